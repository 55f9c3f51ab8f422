"""fabctl check, air gap (fabctl/check/mirror.py): with a site registry, nothing the site runs comes from outside it."""

from __future__ import annotations

import copy

import pytest
from airgap_cases import CHART_REPOSITORY, MIRROR_RULES, SECRETS, with_registry
from helpers import render_small
from small_site import small_site


@pytest.fixture(scope="module")
def mirrored(chart_dir, helm):
    from check_helpers import Deploy

    from components.config import parse_site
    from fabctl.helm import ChartPackages, render_releases
    from fabctl.render import PROJECT_DIR

    site = with_registry(small_site())
    plan = copy.deepcopy(render_small(site, secrets=SECRETS))
    releases, missing = render_releases(plan, ChartPackages(chart_dir), helm, PROJECT_DIR)
    return Deploy(plan, parse_site(site), releases, missing)


def _lines(deploy, rule):
    return [f.line() for f in deploy.report().findings if f.rule == rule]


def test_the_smallest_site_with_a_registry_pulls_everything_from_it(mirrored):
    assert mirrored.releases
    assert [line for rule in MIRROR_RULES for line in _lines(mirrored, rule)] == []


def test_every_release_of_a_site_with_a_registry_takes_its_chart_from_it(mirrored):
    charts = [r["inputs"]["chart"] for r in mirrored.plan.of_type("kubernetes:helm.sh/v3:Release")]
    assert charts
    assert [c for c in charts if not c.startswith(f"{CHART_REPOSITORY}/")] == []


def test_every_namespace_the_program_creates_holds_the_pull_secret_but_the_preview_identitys(mirrored):
    """The preview namespace holds an identity and no pod: it gets no registry credential."""
    namespaces = {(mirrored.plan.cluster(r), r["inputs"]["metadata"]["name"]) for r in mirrored.plan.of_type("kubernetes:core/v1:Namespace")}
    secrets = {(mirrored.plan.cluster(r), r["inputs"]["metadata"]["namespace"]) for r in mirrored.plan.of_type("kubernetes:core/v1:Secret")
               if r["inputs"]["metadata"]["name"] == "site-registry"}
    assert namespaces
    assert namespaces - secrets == {(f"site-t-{cluster}", "fab-preview") for cluster in ("compute", "gpu", "storage")}


def test_the_pull_secret_is_a_docker_config_held_as_a_pulumi_secret(mirrored):
    (secret, *_) = [r for r in mirrored.plan.of_type("kubernetes:core/v1:Secret") if r["inputs"]["metadata"]["name"] == "site-registry"]
    assert (secret["inputs"]["type"], secret["inputs"]["stringData"]) == ("kubernetes.io/dockerconfigjson", {".dockerconfigjson": "[secret]"})


def test_fails_when_a_pulled_image_is_outside_the_registry(mirrored):
    deploy = mirrored.copy()
    (deployment,) = [d for d in deploy.plan.objects("Deployment", "site-t-gpu") if d["metadata"]["name"] == "vllm-qwen3-8b"]
    deployment["spec"]["template"]["spec"]["containers"][0]["image"] = "vllm/vllm-openai:v0.31.0"
    assert _lines(deploy, "images.mirrored") == [
        "error [images.mirrored] site-t-gpu Deployment inference/vllm-qwen3-8b (inference-vllm-qwen3-8b): "
        "spec.template.spec.containers[0].image 'vllm/vllm-openai:v0.31.0' is not under the site registry "
        "registry.fab.internal/mirror. Fix: move it to the registry: components/registry.py for the program's images, the "
        "chart's entry in components/airgap for a chart's"
    ]


def test_fails_when_an_operator_operand_is_outside_the_registry(mirrored):
    deploy = mirrored.copy()
    (policy,) = deploy.plan.objects("ClusterPolicy", "site-t-gpu")
    policy["spec"]["driver"]["repository"] = "nvcr.io/nvidia"
    assert [f.problem for f in deploy.findings("images.mirrored")] == [
        f"spec.driver.image 'nvcr.io/nvidia/driver:{policy['spec']['driver']['version']}' is not under the site registry "
        "registry.fab.internal/mirror"
    ]


def test_fails_when_an_image_is_passed_to_an_operator_in_an_argument(mirrored):
    deploy = mirrored.copy()
    (deployment,) = [d for d in deploy.plan.objects("Deployment", "site-t-gpu") if d["metadata"]["name"] == "vllm-qwen3-8b"]
    deployment["spec"]["template"]["spec"]["containers"][0].setdefault("args", []).append("--helper-image=quay.io/minio/mc:RELEASE.1")
    assert [f.problem for f in deploy.findings("images.mirrored")] == [
        f"spec.template.spec.containers[0].args[{len(deployment['spec']['template']['spec']['containers'][0]['args']) - 1}] "
        "'quay.io/minio/mc:RELEASE.1' is not under the site registry registry.fab.internal/mirror"
    ]


def test_fails_when_a_pod_does_not_name_the_pull_secret(mirrored):
    deploy = mirrored.copy()
    (deployment,) = [d for d in deploy.plan.objects("Deployment", "site-t-gpu") if d["metadata"]["name"] == "vllm-qwen3-8b"]
    del deployment["spec"]["template"]["spec"]["imagePullSecrets"]
    assert [f.problem for f in deploy.findings("images.pull-secret")] == [
        "spec.template.spec does not name the pull Secret 'site-registry'"
    ]


def test_fails_when_a_release_takes_its_chart_from_upstream(mirrored):
    deploy = mirrored.copy()
    release = deploy.resource("training-gpu-kueue")
    release["inputs"]["chart"] = "oci://registry.k8s.io/kueue/charts/kueue"
    assert _lines(deploy, "charts.mirrored") == [
        "error [charts.mirrored] site-t-gpu HelmRelease kueue-system/kueue (training-gpu-kueue): chart "
        "oci://registry.k8s.io/kueue/charts/kueue 0.19.2 comes from 'oci://registry.k8s.io/kueue/charts', not the site "
        "registry oci://registry.fab.internal/charts. Fix: install it through helm_release (components/kube.py), which "
        "takes the chart from the registry"
    ]


def test_a_site_without_a_registry_is_not_held_to_one(small):
    assert [line for rule in MIRROR_RULES for line in small.lines(rule)] == []
