"""Air gap, network part: every image of the Cilium chart from the site registry's mirror, with its pull Secret in
kube-system (components/airgap/network.py, components/network.py; docs/airgap.md).

The releases are rendered by a real Helm from the pinned chart package, so an image key the chart does not read would show
as an upstream image here."""

from __future__ import annotations

from typing import Any

import pytest
from airgap_cases import (
    MIRROR,
    PULL_SECRET,
    SECRETS,
    images,
    not_mirrored,
    pinned_release,
    pods,
    rendered,
    site_registry,
    with_registry,
)
from helpers import render_small
from small_site import CLUSTERS, small_site

from components import versions
from components.airgap import chart_values
from components.registry import merge_values
from fabctl.render import HELM_RELEASE_TYPE, Plan


def mirrored_plan(**registry: Any) -> Plan:
    site = with_registry(small_site(), **registry)
    return render_small(site, secrets=SECRETS if site["registry"].get("pull_secret") else None)


def cilium_releases(plan: Plan) -> list[dict[str, Any]]:
    return [r for r in plan.of_type(HELM_RELEASE_TYPE) if r["inputs"]["name"] == "cilium"]


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
    assert not_mirrored(found) == []


def test_the_mirror_keeps_each_cilium_image_under_its_source(cilium):
    sources = {site_registry().source_of(i).split(":")[0] for i in images(cilium)}
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
    release = pinned_release("cilium", versions.CILIUM, "kube-system",
                             merge_values(switches, chart_values(versions.CILIUM, site_registry())))
    objects = rendered(release, chart_dir, helm)
    assert {"DaemonSet/cilium-pre-flight-check", "DaemonSet/cilium-node-init", "CronJob/hubble-generate-certs",
            "StatefulSet/spire-server", "DaemonSet/spire-agent", "Deployment/hubble-ui"} <= set(pods(objects))
    assert not_mirrored(images(objects)) == []
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
