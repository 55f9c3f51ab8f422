"""The site's own registry (an air-gapped fab): where every chart, image and downloaded file comes from when the site
cannot reach the public internet (docs/airgap.md)."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator, Field

from components.config.fields import DnsLabel, HttpsUrl, _Model, matching

_HOST = r"[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*(:[0-9]{1,5})?"
_PATH = r"(/[a-z0-9]([a-z0-9._-]*[a-z0-9])?)*"
CHART_REPOSITORY = re.compile(rf"^(oci|https)://{_HOST}{_PATH}$")
_REGISTRY_HOST = r"([a-z0-9-]+(\.[a-z0-9-]+)+(:[0-9]{1,5})?|[a-z0-9-]+:[0-9]{1,5}|localhost)"
IMAGE_PREFIX = re.compile(rf"^{_REGISTRY_HOST}{_PATH}$")
"""A registry host (with a dot or a port, or `localhost`: anything else the container runtime reads as a Docker Hub
namespace) and an optional path."""

ChartRepository = Annotated[str, AfterValidator(matching(
    CHART_REPOSITORY,
    "must be an OCI registry path (oci://registry.fab.internal/charts) or a Helm repository URL "
    "(https://charts.fab.internal/stable): a lowercase host, an optional port and path, no trailing '/'",
))]
"""Where the site's Helm charts are: `oci://host[:port]/path` or `https://host[:port]/path`."""
ImagePrefix = Annotated[str, AfterValidator(matching(
    IMAGE_PREFIX,
    "must be a registry host with an optional port and path, such as registry.fab.internal/mirror: the host has a dot or "
    "a port (a first segment without either is a Docker Hub namespace), no scheme, no tag, no trailing '/'",
))]
"""`host[:port][/path]`: the registry and path every mirrored image is under."""


class RegistryConfig(_Model):
    """The site's registry: its charts, its images (a mirror of every image the site runs) and the files and Maven
    packages the platform downloads at run time. Nothing is pulled from the internet once it is set."""

    charts: ChartRepository = Field(
        description="The Helm repository holding every chart the site installs, under its upstream name and version: an "
        "OCI path (`oci://registry.fab.internal/charts`, charts pushed with `helm push`) or a classic repository "
        "(`https://charts.fab.internal/stable`). `fabctl mirror` lists them with the commands that fill it.",
    )
    images: ImagePrefix = Field(
        description="The registry path every image is mirrored under, keeping its source registry and path: "
        "`docker.io/library/python:3.13` runs as `<images>/docker.io/library/python:3.13` (the layout `skopeo sync "
        "--scoped` writes). Every image of the program's objects, of every chart and of what the operators launch is "
        "redirected there.",
    )
    ca_bundle: str | None = Field(
        None, min_length=1,
        description="PEM file, relative to the project directory, with the CA that issued the registry's certificate: "
        "the Helm client of `pulumi up` trusts it when it pulls charts from an https repository (the nodes' container "
        "runtime and an OCI chart registry use the system trust store: docs/airgap.md). Defaults to the site's "
        "`ca_bundle`.",
    )
    pull_secret: DnsLabel | None = Field(
        None,
        description="The name of the image pull Secret (`kubernetes.io/dockerconfigjson`) the program creates, from the "
        "secret config `registryPullSecret` (a Docker config.json), in every namespace it creates, and names in every "
        "pod it runs and every chart's values. Defaults to none: the nodes' container runtime authenticates (or the "
        "registry allows anonymous pulls).",
    )
    files: HttpsUrl | None = Field(
        None,
        description="A web server holding the release files the platform applies by URL, each under its source host and "
        "path (`<files>/github.com/kubernetes-sigs/gateway-api-inference-extension/releases/download/...`). Required "
        "when a feature applies one (`inference.routing: inference-extension`). Defaults to none.",
    )
    maven: HttpsUrl | None = Field(
        None,
        description="A Maven repository proxying Maven Central (Nexus, Artifactory), from which Spark resolves the "
        "packages the platform names (`spark.jars.packages`: Spark Connect, Iceberg, the RAPIDS Accelerator). Required "
        "when a Spark pod resolves packages (`compute.spark.connect`, `gpu.<cluster>.spark_rapids`). Defaults to none.",
    )
