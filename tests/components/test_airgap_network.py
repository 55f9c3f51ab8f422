"""Air gap, network part: every image of the Cilium chart from the site registry's mirror, with its pull Secret in
kube-system (components/airgap/network.py, components/network.py; docs/airgap.md).

The releases are rendered by a real Helm from the pinned chart package, so an image key the chart does not read would show
as an upstream image here."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from helpers import render_small
from small_site import CLUSTERS, small_site

from components import versions
from components.airgap import chart_values
from components.config import RegistryConfig
from components.registry import Registry, merge_values
from fabctl.check.mirror import image_references, pod_specs
from fabctl.helm import ChartPackages, ChartRef, template
from fabctl.render import PROJECT_DIR, Plan

MIRROR = "registry.fab.internal/mirror"
PULL_SECRET = "site-registry"
REGISTRY = {"charts": "oci://registry.fab.internal/charts", "images": MIRROR, "pull_secret": PULL_SECRET,
            "maven": "https://maven.fab.internal/repository/central"}
"""The smallest site's registry (Spark Connect resolves its packages from `maven`)."""
SECRETS = {"fab-platform:registryPullSecret": {"secure": "v1:pull"}}
HELM_RELEASE = "kubernetes:helm.sh/v3:Release"


def mirrored_plan(**registry: Any) -> Plan:
    site = small_site()
    site["registry"] = {k: v for k, v in {**REGISTRY, **registry}.items() if v is not None}
    return render_small(site, secrets=SECRETS if site["registry"].get("pull_secret") else None)


def cilium_releases(plan: Plan) -> list[dict[str, Any]]:
    return [r for r in plan.of_type(HELM_RELEASE) if r["inputs"]["name"] == "cilium"]


def rendered(release: dict[str, Any], chart_dir: Path, helm: Path) -> list[dict[str, Any]]:
    """The objects the release installs, from the pinned package (CRDs left out: their text is documentation)."""
    package = ChartPackages(chart_dir).find(ChartRef.of(release))
    assert package is not None
    return [o for o in template(release, package, helm, PROJECT_DIR) if o["kind"] != "CustomResourceDefinition"]


def images(objects: list[dict[str, Any]]) -> set[str]:
    return {ref for obj in objects for _, ref in image_references({k: v for k, v in obj.items() if k != "metadata"})}


def pods(objects: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """`Kind/name` -> pod spec of every pod template of the objects."""
    return {f"{o['kind']}/{o['metadata']['name']}": spec for o in objects for _, spec in pod_specs(o.get("spec") or {})}


@pytest.fixture(scope="module")
def mirrored() -> Plan:
    return mirrored_plan()


@pytest.fixture(scope="module")
def cilium(mirrored, chart_dir, helm) -> list[dict[str, Any]]:
    """What the first cluster's Cilium release installs on the mirrored site."""
    return rendered(cilium_releases(mirrored)[0], chart_dir, helm)


def test_every_image_of_the_cilium_release_comes_from_the_mirror(cilium):
    found = images(cilium)
    assert found
    assert sorted(i for i in found if not i.startswith(f"{MIRROR}/")) == []


def test_the_mirror_keeps_each_cilium_image_under_its_source(cilium):
    sources = {Registry.of(RegistryConfig(**REGISTRY)).source_of(i).split(":")[0] for i in images(cilium)}
    assert sources == {"quay.io/cilium/cilium", "quay.io/cilium/cilium-envoy", "quay.io/cilium/operator-generic",
                       "quay.io/cilium/clustermesh-apiserver", "quay.io/cilium/hubble-relay", "quay.io/cilium/hubble-ui",
                       "quay.io/cilium/hubble-ui-backend"}


def test_every_cilium_pod_names_the_pull_secret(cilium):
    found = pods(cilium)
    assert found
    assert sorted(name for name, spec in found.items() if spec.get("imagePullSecrets") != [{"name": PULL_SECRET}]) == []


def test_cilium_parts_the_program_leaves_off_pull_from_the_mirror_once_switched_on(chart_dir, helm):
    """Pre-flight, node-init, certgen (`tls.auto.method: cronJob`), SPIRE and the Hubble UI, switched on over the air-gap
    values alone: each image key is one the chart reads."""
    switches = {
        "preflight": {"enabled": True}, "nodeinit": {"enabled": True},
        "hubble": {"tls": {"auto": {"method": "cronJob"}}, "relay": {"enabled": True}, "ui": {"enabled": True}},
        "clustermesh": {"useAPIServer": True, "apiserver": {"tls": {"auto": {"method": "cronJob"}}}},
        "authentication": {"mutual": {"spire": {"enabled": True, "install": {"enabled": True}}}},
    }
    registry = Registry.of(RegistryConfig(**REGISTRY))
    release = {"name": "cilium", "inputs": {"name": "cilium", "namespace": "kube-system", "chart": versions.CILIUM.chart,
                                            "version": versions.CILIUM.version,
                                            "values": merge_values(switches, chart_values(versions.CILIUM, registry))}}
    objects = rendered(release, chart_dir, helm)
    assert {"DaemonSet/cilium-pre-flight-check", "DaemonSet/cilium-node-init", "CronJob/hubble-generate-certs",
            "StatefulSet/spire-server", "DaemonSet/spire-agent", "Deployment/hubble-ui"} <= set(pods(objects))
    assert sorted(i for i in images(objects) if not i.startswith(f"{MIRROR}/")) == []
    assert sorted(name for name, spec in pods(objects).items() if spec.get("imagePullSecrets") != [{"name": PULL_SECRET}]) == []


def test_the_pull_secret_is_in_kube_system_before_each_cilium_release(mirrored):
    secrets = {r["urn"]: r for r in mirrored.of_type("kubernetes:core/v1:Secret")
               if (r["inputs"]["metadata"]["name"], r["inputs"]["metadata"]["namespace"]) == (PULL_SECRET, "kube-system")}
    releases = cilium_releases(mirrored)
    assert len(releases) == len(CLUSTERS)
    for release in releases:
        (secret,) = [urn for urn in release["dependencies"] if urn in secrets]
        assert secrets[secret]["provider"] == release["provider"]


def test_cilium_names_no_pull_secret_when_the_site_has_none():
    plan = mirrored_plan(pull_secret=None)
    release = cilium_releases(plan)[0]
    assert "imagePullSecrets" not in release["inputs"]["values"]
    assert release["inputs"]["values"]["image"]["repository"] == f"{MIRROR}/quay.io/cilium/cilium"
    assert [r for r in plan.of_type("kubernetes:core/v1:Secret") if r["inputs"]["metadata"]["name"] == PULL_SECRET] == []


def test_without_a_registry_cilium_keeps_the_charts_images_and_kube_system_no_pull_secret(small_plan):
    values = cilium_releases(small_plan)[0]["inputs"]["values"]
    assert {"image", "imagePullSecrets", "envoy", "certgen", "preflight", "nodeinit"} & set(values) == set()
    assert "image" not in values["operator"] and "image" not in values["hubble"]["relay"]
    assert [r["name"] for r in small_plan.of_type("kubernetes:core/v1:Secret") if r["inputs"]["metadata"]["name"] == PULL_SECRET] == []
