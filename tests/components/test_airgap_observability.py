"""Air gap, the metrics stack and Envoy Gateway (issue 21): with a site registry, every image kube-prometheus-stack and
gateway-helm install, and every image their operators launch, comes from the registry's mirror under its source
registry, and every pod pulls with the site's pull Secret; without one, nothing changes.

The charts are rendered by real Helm from ../shared/charts with the program's values (the smallest site with the metrics
stack), once with a registry and once without: the mirrored render must name exactly the upstream render's images, each
moved under the mirror.
"""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest
import yaml
from airgap_cases import FILES, PULL_SECRET, SECRETS, site_registry, with_registry
from helpers import render_small
from small_site import add_observability, small_site

from components import versions
from components.airgap.observability import VALUES
from components.gateway import PROXY_REPLICAS, RATE_LIMIT_STORE, proxy_deployment
from fabctl.check.mirror import image_references, pod_specs
from fabctl.helm import ChartPackages, ChartRef, template
from fabctl.render import HELM_RELEASE_TYPE, PROJECT_DIR, Plan

SITE_REGISTRY = site_registry(files=FILES)
NO_SECRET = site_registry(files=FILES, pull_secret=None)
COMPUTE, GPU = "site-t-compute", "site-t-gpu"
RELOADER = "registry.fab.internal/mirror/quay.io/prometheus-operator/prometheus-config-reloader:v0.93.1"


def _site(registry: bool) -> dict:
    site = small_site()
    add_observability(site)
    return with_registry(site, files=FILES) if registry else site


@pytest.fixture(scope="module")
def upstream() -> Plan:
    return render_small(_site(registry=False))


@pytest.fixture(scope="module")
def mirrored() -> Plan:
    return render_small(_site(registry=True), secrets=SECRETS)


@pytest.fixture(scope="module")
def objects_of(chart_dir, helm):
    """(plan, chart, cluster) -> the objects that cluster's release of the chart installs, through `helm template`."""
    cache: dict[tuple[int, str, str], list[dict]] = {}

    def objects(plan: Plan, chart: str, cluster: str) -> list[dict]:
        key = (id(plan), chart, cluster)
        if key not in cache:
            (release,) = [r for r in plan.of_type(HELM_RELEASE_TYPE)
                          if ChartRef.of(r).name == chart and plan.cluster(r) == cluster]
            package = ChartPackages(chart_dir).find(ChartRef.of(release))
            cache[key] = [o for o in template(release, package, helm, PROJECT_DIR) if o["kind"] != "CustomResourceDefinition"]
        return cache[key]

    return objects


def images(objects: list[dict]) -> set[str]:
    return {reference for obj in objects for _, reference in image_references(obj)}


def pods_without_the_secret(objects: list[dict]) -> list[str]:
    return [f"{obj['kind']}/{obj['metadata']['name']}" for obj in objects for _, pod in pod_specs(obj)
            if {"name": PULL_SECRET} not in pod.get("imagePullSecrets", [])]


def pod_count(objects: list[dict]) -> int:
    return sum(1 for obj in objects for _ in pod_specs(obj))


def named(objects: list[dict], kind: str, name: str) -> dict:
    (obj,) = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    return obj


# kube-prometheus-stack


@pytest.mark.parametrize("cluster", [COMPUTE, GPU])
def test_every_image_of_the_metrics_stack_is_its_upstream_image_from_the_mirror(upstream, mirrored, objects_of, cluster):
    source = images(objects_of(upstream, "kube-prometheus-stack", cluster))
    assert source
    assert images(objects_of(mirrored, "kube-prometheus-stack", cluster)) == {SITE_REGISTRY.image(image) for image in source}


def test_the_prometheus_operator_launches_its_config_reloader_and_thanos_from_the_mirror(mirrored, objects_of):
    (operator,) = named(objects_of(mirrored, "kube-prometheus-stack", COMPUTE), "Deployment", "metrics-operator")[
        "spec"]["template"]["spec"]["containers"]
    assert [arg for arg in operator["args"] if arg.startswith(("--prometheus-config-reloader=", "--thanos-default-base-image="))] == [
        f"--prometheus-config-reloader={RELOADER}",
        "--thanos-default-base-image=registry.fab.internal/mirror/quay.io/thanos/thanos:v0.42.4",
    ]


def test_every_pod_of_the_metrics_stack_pulls_with_the_site_secret(mirrored, objects_of):
    objects = objects_of(mirrored, "kube-prometheus-stack", COMPUTE)
    assert pod_count(objects) >= 5  # operator, kube-state-metrics, node-exporter, Grafana, the two webhook Jobs
    assert pods_without_the_secret(objects) == []


def test_the_pods_the_prometheus_operator_creates_pull_with_the_site_secret(mirrored, objects_of):
    objects = objects_of(mirrored, "kube-prometheus-stack", COMPUTE)
    secret = [{"name": PULL_SECRET}]
    assert (named(objects, "Prometheus", "metrics-prometheus")["spec"]["imagePullSecrets"],
            named(objects, "Alertmanager", "metrics-alertmanager")["spec"]["imagePullSecrets"],
            named(objects, "ServiceAccount", "metrics-alertmanager")["imagePullSecrets"]) == (secret, secret, secret)


def test_grafana_calls_no_grafana_com_on_a_site_with_a_registry(mirrored, objects_of):
    ini = named(objects_of(mirrored, "kube-prometheus-stack", COMPUTE), "ConfigMap", "grafana")["data"]["grafana.ini"]
    assert {"preinstall_disabled = true", "public_key_retrieval_disabled = true", "check_for_plugin_updates = false",
            "check_for_updates = false"} <= set(ini.splitlines())


def test_the_metrics_stack_names_no_pull_secret_without_one():
    assert "global" not in VALUES["kube-prometheus-stack"](NO_SECRET)


# Envoy Gateway


@pytest.mark.parametrize("cluster", [COMPUTE, GPU])
def test_every_image_of_envoy_gateway_is_its_upstream_image_from_the_mirror(upstream, mirrored, objects_of, cluster):
    source = images(objects_of(upstream, "gateway-helm", cluster))
    assert source
    assert images(objects_of(mirrored, "gateway-helm", cluster)) == {SITE_REGISTRY.image(image) for image in source}


def test_envoy_gateway_launches_the_rate_limit_service_and_the_shutdown_manager_from_the_mirror(mirrored, objects_of):
    config = yaml.safe_load(named(objects_of(mirrored, "gateway-helm", GPU), "ConfigMap", "envoy-gateway-config")["data"][
        "envoy-gateway.yaml"])["provider"]["kubernetes"]
    assert (config["rateLimitDeployment"]["container"]["image"], config["shutdownManager"]["image"]) == (
        "registry.fab.internal/mirror/docker.io/envoyproxy/ratelimit:17b1956c",
        "registry.fab.internal/mirror/docker.io/envoyproxy/gateway:v1.9.0",
    )


def test_the_rate_limit_service_keeps_the_programs_settings_beside_its_mirrored_image(upstream, mirrored, objects_of):
    def deployment(plan: Plan) -> dict:
        config = yaml.safe_load(named(objects_of(plan, "gateway-helm", GPU), "ConfigMap", "envoy-gateway-config")["data"][
            "envoy-gateway.yaml"])
        spec = config["provider"]["kubernetes"]["rateLimitDeployment"]
        spec.pop("pod", None)
        del spec["container"]["image"]
        return spec

    assert deployment(upstream)["container"]["env"]
    assert deployment(mirrored) == deployment(upstream)


def test_every_pod_envoy_gateway_installs_or_launches_pulls_with_the_site_secret(mirrored, objects_of):
    objects = objects_of(mirrored, "gateway-helm", GPU)
    config = yaml.safe_load(named(objects, "ConfigMap", "envoy-gateway-config")["data"]["envoy-gateway.yaml"])
    assert pod_count(objects) == 2  # the controller and the certgen Job
    assert (pods_without_the_secret(objects), config["provider"]["kubernetes"]["rateLimitDeployment"]["pod"]) == (
        [], {"imagePullSecrets": [{"name": PULL_SECRET}]})


def test_the_proxies_run_envoy_gateways_default_envoy_from_the_mirror_with_the_site_secret(mirrored):
    proxies = [p["spec"]["provider"]["kubernetes"]["envoyDeployment"] for p in mirrored.objects("EnvoyProxy")]
    assert len(proxies) == 2  # the inference gateway and the compute ingress
    assert proxies == [{
        "replicas": PROXY_REPLICAS,
        "container": {"image": "registry.fab.internal/mirror/docker.io/envoyproxy/envoy:distroless-v1.39.0"},
        "pod": {"imagePullSecrets": [{"name": PULL_SECRET}]},
    }] * 2


def test_the_proxies_name_no_pull_secret_without_one():
    assert "pod" not in proxy_deployment(NO_SECRET)


def test_the_rate_limit_store_pulls_valkey_from_the_mirror_with_the_site_secret(mirrored):
    (store,) = [d for d in mirrored.objects("Deployment", GPU) if d["metadata"]["name"] == RATE_LIMIT_STORE]
    pod = store["spec"]["template"]["spec"]
    assert ([c["image"] for c in pod["containers"]], pod["imagePullSecrets"]) == (
        ["registry.fab.internal/mirror/docker.io/valkey/valkey:9.0.8-alpine"], [{"name": PULL_SECRET}])


def _chart_file(chart_dir: Path, chart: versions.HelmChart, member: str) -> str:
    package = ChartPackages(chart_dir).find(ChartRef(chart.chart, chart.version, chart.repo))
    with tarfile.open(package) as tar:
        return io.TextIOWrapper(tar.extractfile(f"{chart.chart}/{member}"), encoding="utf-8").read()


def test_the_pinned_envoy_gateway_images_are_the_charts_own(chart_dir):
    images_ = yaml.safe_load(_chart_file(chart_dir, versions.ENVOY_GATEWAY, "values.yaml"))["global"]["images"]
    assert (images_["envoyGateway"]["image"], images_["ratelimit"]["image"]) == (
        versions.ENVOY_GATEWAY_IMAGE, versions.ENVOY_RATELIMIT_IMAGE)


def test_the_pinned_envoy_proxy_is_the_tag_the_chart_knows_envoy_gateway_runs(chart_dir):
    # The chart's helper completes an Envoy image without a tag with the controller's default tag
    # (DefaultEnvoyProxyImage in api/v1alpha1/shared_types.go of the same release).
    tag = versions.ENVOY_PROXY_IMAGE.rsplit(":", 1)[1]
    assert f'default "{tag}" $repositoryParts._1' in _chart_file(chart_dir, versions.ENVOY_GATEWAY, "templates/_helpers.tpl")


# Without a registry


@pytest.mark.parametrize("chart", ["kube-prometheus-stack", "gateway-helm"])
def test_without_a_registry_the_releases_set_no_image_value(upstream, chart):
    releases = [r for r in upstream.of_type(HELM_RELEASE_TYPE) if ChartRef.of(r).name == chart]
    assert releases
    assert [r["name"] for r in releases if "global" in r["inputs"]["values"] or "registry" in str(r["inputs"]["values"])] == []


def test_without_a_registry_the_proxies_and_the_store_run_their_upstream_images(upstream):
    proxies = [p["spec"]["provider"]["kubernetes"]["envoyDeployment"] for p in upstream.objects("EnvoyProxy")]
    (store,) = [d for d in upstream.objects("Deployment", GPU) if d["metadata"]["name"] == RATE_LIMIT_STORE]
    pod = store["spec"]["template"]["spec"]
    assert (proxies, [c["image"] for c in pod["containers"]], "imagePullSecrets" in pod) == (
        [{"replicas": PROXY_REPLICAS}] * 2, [versions.RATE_LIMIT_STORE_IMAGE], False)
