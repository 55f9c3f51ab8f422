"""fabctl check, pins: every image has a tag or digest that does not move, every chart an exact version."""

from __future__ import annotations

import pytest

from fabctl.check.pins import image_problem


def _vllm_container(small):
    (deployment,) = [d for d in small.plan.objects("Deployment", "site-t-gpu") if d["metadata"]["name"] == "vllm-qwen3-8b"]
    return deployment["spec"]["template"]["spec"]["containers"][0]


def test_every_image_and_chart_of_the_smallest_site_is_pinned(small):
    assert small.lines("images.pinned") + small.lines("charts.pinned") == []


@pytest.mark.parametrize("reference", ["vllm/vllm-openai:v0.31.0", "registry.local:5000/vllm/vllm-openai:v0.31.0",
                                       "vllm/vllm-openai@sha256:" + "a" * 64])
def test_a_tag_or_a_digest_pins_an_image(reference):
    assert image_problem(reference) is None


def test_fails_when_an_image_has_no_tag(small):
    _vllm_container(small)["image"] = "registry.local:5000/vllm/vllm-openai"
    assert small.lines("images.pinned") == [
        "error [images.pinned] site-t-gpu Deployment inference/vllm-qwen3-8b (inference-vllm-qwen3-8b): "
        "spec.template.spec.containers[0].image 'registry.local:5000/vllm/vllm-openai' has no tag (the runtime pulls latest). "
        "Fix: pin a tag or digest (components/versions.py for the program's images, the chart's values for a chart's)"
    ]


def test_fails_when_an_image_is_tagged_latest(small):
    _vllm_container(small)["image"] = "vllm/vllm-openai:latest"
    assert [f.problem for f in small.findings("images.pinned")] == [
        "spec.template.spec.containers[0].image 'vllm/vllm-openai:latest' is tagged 'latest', which moves"
    ]


def test_fails_when_an_operator_image_has_version_latest(small):
    (policy,) = small.plan.objects("ClusterPolicy", "site-t-gpu")
    policy["spec"]["driver"]["version"] = "latest"
    assert [f.problem for f in small.findings("images.pinned")] == [
        f"spec.driver.image {policy['spec']['driver']['image']!r} has version 'latest', which moves"
    ]


def test_fails_when_a_chart_version_is_a_range(small):
    release = small.resource("training-gpu-kueue")
    release["inputs"]["version"] = "~0.19"
    assert small.lines("charts.pinned") == [
        "error [charts.pinned] site-t-gpu HelmRelease kueue-system/kueue (training-gpu-kueue): chart "
        "oci://registry.k8s.io/kueue/charts/kueue has version '~0.19', not an exact version. Fix: pin the chart's exact "
        "version in components/versions.py"
    ]


def test_fails_when_helm_refuses_a_release(small):
    small.release("kueue", "site-t-gpu").error = "Error: values don't meet the specifications of the schema(s)\n- at '/x': bad"
    assert [f.problem for f in small.findings("charts.render")] == [
        "Helm refuses to render it: Error: values don't meet the specifications of the schema(s) - at '/x': bad"
    ]
