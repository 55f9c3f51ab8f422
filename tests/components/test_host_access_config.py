"""The stack's host-access allow-list (`clusters.<key>.host_network_namespaces`) is the only one the policy pack reads:
a GPU cluster lists the namespaces where the program runs the NVIDIA operators privileged, or the config is refused."""

from __future__ import annotations

from helpers import config_errors, render_small
from small_site import add_gpu_cluster, small_site

from components.config import parse_site


def test_a_gpu_cluster_listing_its_operators_passes():
    assert parse_site(small_site()).clusters["gpu"].host_network_namespaces == ["gpu-operator", "nvidia-network-operator"]


def test_fails_when_a_gpu_cluster_does_not_list_the_network_operator():
    raw = small_site()
    raw["clusters"]["gpu"]["host_network_namespaces"] = ["gpu-operator"]
    assert config_errors(raw) == [
        ("fab-platform:site.clusters.gpu.host_network_namespaces: [gpu-operator] lacks nvidia-network-operator, where the "
        "program runs an NVIDIA operator with host access on every GPU cluster; the policy pack allows host access only in "
        "the namespaces listed here, so add it")
    ]


def test_fails_when_a_training_cluster_lists_no_namespace():
    raw = small_site()
    add_gpu_cluster(raw, "gpu-train")
    del raw["clusters"]["gpu-train"]["host_network_namespaces"]
    assert config_errors(raw) == [
        ("fab-platform:site.clusters.gpu-train.host_network_namespaces: [] lacks gpu-operator, nvidia-network-operator, where "
        "the program runs an NVIDIA operator with host access on every GPU cluster; the policy pack allows host access only "
        "in the namespaces listed here, so add them")
    ]


def test_the_privileged_namespaces_the_program_creates_are_the_ones_a_gpu_cluster_must_list():
    plan = render_small(small_site())
    privileged = {
        (cluster, obj["metadata"]["name"]) for cluster, obj, _ in plan.manifests()
        if obj["kind"] == "Namespace" and obj["metadata"]["labels"].get("pod-security.kubernetes.io/enforce") == "privileged"
    }
    assert privileged == {("site-t-gpu", "gpu-operator"), ("site-t-gpu", "nvidia-network-operator")}
