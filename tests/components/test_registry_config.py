"""Config `registry` (docs/airgap.md): refused values, and what a registry requires of the rest of the site."""

from __future__ import annotations

from helpers import config_errors
from small_site import small_site

REGISTRY = {"charts": "oci://registry.fab.internal/charts", "images": "registry.fab.internal/mirror",
            "maven": "https://maven.fab.internal/central"}


def _site(**registry):
    site = small_site()
    site["registry"] = {**REGISTRY, **registry}
    return site


def test_a_site_with_a_registry_is_accepted():
    from components.config import parse_site

    assert parse_site(_site()).registry.images == "registry.fab.internal/mirror"


def test_fails_when_the_image_prefix_has_a_scheme():
    assert config_errors(_site(images="https://registry.fab.internal/mirror")) == [
        "fab-platform:site.registry.images: must be a registry host with an optional port and path, such as "
        "registry.fab.internal/mirror: the host has a dot or a port (a first segment without either is a Docker Hub "
        "namespace), no scheme, no tag, no trailing '/' (got 'https://registry.fab.internal/mirror')"
    ]


def test_fails_when_the_chart_repository_is_plain_http():
    assert config_errors(_site(charts="http://charts.fab.internal")) == [
        "fab-platform:site.registry.charts: must be an OCI registry path (oci://registry.fab.internal/charts) or a Helm "
        "repository URL (https://charts.fab.internal/stable): a lowercase host, an optional port and path, no trailing '/' "
        "(got 'http://charts.fab.internal')"
    ]


def test_fails_when_the_registry_ca_bundle_cannot_be_read():
    assert config_errors(_site(ca_bundle="certs/registry-ca.pem")) == [
        "fab-platform:site.registry.ca_bundle: 'certs/registry-ca.pem' cannot be read (No such file or directory); paths "
        "are relative to the project directory"
    ]


def test_fails_when_spark_resolves_packages_and_the_registry_has_no_maven_repository():
    site = _site()
    del site["registry"]["maven"]
    assert config_errors(site) == [
        "fab-platform:site.registry.maven: is not set, but compute.spark.connect resolves Spark packages from Maven Central "
        "at start, which an air-gapped site cannot reach; set it to the site's Maven repository (a proxy of Maven Central)"
    ]


def test_fails_when_model_aware_routing_is_on_and_the_registry_has_no_file_server():
    from small_site import full_site

    site = full_site()
    site["registry"] = dict(REGISTRY)
    site["inference"]["routing"] = "inference-extension"  # a phase 5 site: the feature's phase
    assert config_errors(site) == [
        "fab-platform:site.registry.files: is not set, but inference.routing applies the Gateway API Inference Extension's "
        "CRD manifest from its GitHub release, which an air-gapped site cannot reach; set it to the site's file server "
        "(docs/airgap.md)"
    ]


def test_fails_when_the_image_prefix_has_no_registry_host():
    """containerd reads a first segment without a dot or a port as a Docker Hub namespace: pulls would leave the site."""
    assert config_errors(_site(images="mirror/fab")) == [
        "fab-platform:site.registry.images: must be a registry host with an optional port and path, such as "
        "registry.fab.internal/mirror: the host has a dot or a port (a first segment without either is a Docker Hub "
        "namespace), no scheme, no tag, no trailing '/' (got 'mirror/fab')"
    ]
