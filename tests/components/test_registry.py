"""The site registry (components/registry.py): where a cluster's images, charts and release files come from."""

from __future__ import annotations

import pytest

from components.airgap import CHART_VALUES, chart_values
from components.engines import CHART_IMAGES
from components.config import RegistryConfig
from components.registry import UPSTREAM, ImageRef, Registry, merge_values
from components.versions import CHARTS, GPU_DRIVER, KUEUE, HelmChart

MIRROR = Registry.of(RegistryConfig(charts="oci://registry.fab.internal/charts", images="registry.fab.internal/mirror",
                                    files="https://files.fab.internal", maven="https://maven.fab.internal/central",
                                    pull_secret="site-registry"))


@pytest.mark.parametrize(("reference", "mirrored"), [
    ("python:3.13.9-slim-bookworm", "registry.fab.internal/mirror/docker.io/library/python:3.13.9-slim-bookworm"),
    ("vllm/vllm-openai:v0.31.0", "registry.fab.internal/mirror/docker.io/vllm/vllm-openai:v0.31.0"),
    ("docker.io/valkey/valkey:9.0.8-alpine", "registry.fab.internal/mirror/docker.io/valkey/valkey:9.0.8-alpine"),
    ("registry.k8s.io/kubectl:v1.34.1", "registry.fab.internal/mirror/registry.k8s.io/kubectl:v1.34.1"),
    ("localhost:5000/tools/kubectl:v1", "registry.fab.internal/mirror/localhost:5000/tools/kubectl:v1"),
    ("quay.io/minio/mc@sha256:" + "a" * 64, "registry.fab.internal/mirror/quay.io/minio/mc@sha256:" + "a" * 64),
])
def test_a_mirrored_image_keeps_its_source_registry_and_path_under_the_prefix(reference, mirrored):
    assert MIRROR.image(reference) == mirrored


def test_the_mirror_reference_names_its_source():
    assert MIRROR.source_of(MIRROR.image("python:3.13.9-slim-bookworm")) == "docker.io/library/python:3.13.9-slim-bookworm"


def test_a_reference_outside_the_mirror_has_no_source():
    assert MIRROR.source_of("docker.io/library/python:3.13.9-slim-bookworm") is None


def test_a_chart_taking_registry_and_repository_apart_gets_the_mirror_as_registry():
    assert MIRROR.ref("quay.io/prometheus/prometheus:v3.5.0") == ImageRef(
        "registry.fab.internal/mirror", "quay.io/prometheus/prometheus", "v3.5.0")


def test_an_operator_operand_is_mirrored_under_its_repository():
    operand = MIRROR.operand(GPU_DRIVER)
    assert (operand.repository, operand.image, operand.version) == ("registry.fab.internal/mirror/nvcr.io/nvidia", "driver", GPU_DRIVER.version)


def test_a_chart_comes_from_the_site_repository_with_its_name_and_version():
    assert MIRROR.chart(KUEUE) == HelmChart(chart="kueue", version=KUEUE.version, repo="oci://registry.fab.internal/charts")


def test_a_release_file_is_served_under_its_source_host_and_path():
    assert MIRROR.file("https://github.com/kubernetes-sigs/x/releases/download/v1/manifests.yaml") == \
        "https://files.fab.internal/github.com/kubernetes-sigs/x/releases/download/v1/manifests.yaml"


def test_a_pod_names_the_pull_secret():
    assert MIRROR.pod_fields() == {"imagePullSecrets": [{"name": "site-registry"}]}


def test_without_a_registry_everything_is_upstream_and_pods_gain_nothing():
    assert (UPSTREAM.image("python:3.13"), UPSTREAM.chart(KUEUE), UPSTREAM.operand(GPU_DRIVER), UPSTREAM.pod_fields(),
            UPSTREAM.file("https://github.com/a/b"), UPSTREAM.maven) == ("python:3.13", KUEUE, GPU_DRIVER, {}, "https://github.com/a/b", None)


def test_without_a_registry_no_chart_gets_image_values():
    assert [chart.chart for chart in CHARTS if chart_values(chart, UPSTREAM)] == []


def test_every_pinned_chart_has_image_values():
    assert CHARTS
    assert sorted({chart.chart for chart in CHARTS} - set(CHART_VALUES) - set(CHART_IMAGES)) == []


def test_fails_when_a_chart_has_no_image_values():
    with pytest.raises(LookupError, match="^chart mystery has no image values in components/airgap"):
        chart_values(HelmChart(chart="mystery", version="1.0.0", repo="https://charts.example"), MIRROR)


def test_overlay_values_are_merged_key_by_key():
    assert merge_values({"image": {"tag": "v1", "pullPolicy": "Always"}, "replicas": 2},
                        {"image": {"registry": "mirror"}}) == {"image": {"tag": "v1", "pullPolicy": "Always", "registry": "mirror"}, "replicas": 2}


def test_no_overlay_leaves_the_values_as_they_are():
    values = {"replicas": 2}
    assert merge_values(values, {}) is values
