"""Scrape targets (components/monitors.py): valid ServiceMonitors and PodMonitors that select the pods and ports the
program and the pinned charts create, and the metrics endpoints the components turn on for them."""

from __future__ import annotations

from typing import Any

import jwt
import pytest
import yaml
from helpers import render_small
from schemas import CrdSchemas, schema_errors
from small_site import add_observability, full_site, small_site

from components import metrics_sources, monitors, object_store
from components.config import parse_site
from components.gpu import INFERENCE_NAMESPACE


@pytest.fixture(scope="module")
def full_scopes() -> dict[str, monitors.MetricsScope]:
    return monitors.metrics_scopes(parse_site(full_site()))


def targets_of(scopes: dict[str, monitors.MetricsScope]) -> dict[str, dict[str, Any]]:
    """`<cluster>/<namespace scraped>/<name>` -> monitor, over every cluster."""
    return {f"{key}/{monitors.target_namespace(m)}/{m['metadata']['name']}": m
            for key, scope in scopes.items() for m in monitors.scrape_targets(scope)}


def matches(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    if any(labels.get(k) != v for k, v in selector.get("matchLabels", {}).items()):
        return False
    for expr in selector.get("matchExpressions", []):
        if expr["operator"] != "In":
            raise AssertionError(f"unexpected operator {expr['operator']}")
        if labels.get(expr["key"]) not in expr["values"]:
            return False
    return True


def pod_templates(objects: list[dict[str, Any]]) -> list[tuple[str, dict[str, str], set[str]]]:
    """(namespace, pod labels, container port names) of every workload among `objects`."""
    out = []
    for obj in objects:
        if obj["kind"] in ("Deployment", "DaemonSet", "StatefulSet"):
            template = obj["spec"]["template"]
            ports = {p.get("name") for c in template["spec"]["containers"] for p in c.get("ports", [])}
            out.append((obj["metadata"].get("namespace"), template["metadata"].get("labels", {}), ports))
    return out


def release_objects(releases: list[Any], cluster: str, chart: str) -> list[dict[str, Any]]:
    found = [r for r in releases if r.cluster == cluster and r.chart.name == chart]
    assert found, f"no {chart} release on {cluster}"
    return [dict(o, metadata={"namespace": found[0].release["inputs"]["namespace"], **o["metadata"]}) for o in found[0].objects]


def pod_monitor_targets(monitor: dict[str, Any], objects: list[dict[str, Any]]) -> list[str]:
    """Ports, by name, of the pods the PodMonitor selects among `objects`, one entry per endpoint that finds its port."""
    spec = monitor["spec"]
    hits = []
    for namespace, labels, ports in pod_templates(objects):
        if namespace in spec["namespaceSelector"]["matchNames"] and matches(spec["selector"], labels):
            hits += [e["port"] for e in spec["podMetricsEndpoints"] if e["port"] in ports]
    return hits


def test_every_scrape_target_validates_against_the_prometheus_operator_crds(full_scopes, crd_dir):
    targets = targets_of(full_scopes)
    assert targets
    crds = CrdSchemas(crd_dir)
    assert {name: errors for name, m in targets.items() if (errors := schema_errors(m, crds))} == {}


def test_each_cluster_gets_the_monitors_of_what_runs_on_it(full_scopes):
    assert sorted(targets_of(full_scopes)) == [
        "compute/envoy-gateway-system/envoy-proxies", "compute/kube-system/cilium-agent", "compute/kube-system/cilium-operator",
        "compute/kueue-system/kueue", "compute/spark-operator/spark-operator", "compute/starrocks/starrocks",
        "gpu-train/gpu-operator/dcgm-exporter", "gpu-train/kube-system/cilium-agent", "gpu-train/kube-system/cilium-operator",
        "gpu-train/kueue-system/kueue",
        "gpu/envoy-gateway-system/envoy-proxies", "gpu/envoy-gateway-system/envoy-ratelimit", "gpu/gpu-operator/dcgm-exporter",
        "gpu/inference/vllm",
        "gpu/kube-system/cilium-agent", "gpu/kube-system/cilium-operator", "gpu/kueue-system/kueue",
        "storage/aistor/aistor", "storage/kube-system/cilium-agent", "storage/kube-system/cilium-operator",
        "storage/polaris/polaris", "storage/polaris/polaris-db",
    ]


def test_scopes_carry_each_gpu_nodes_gpus_from_config():
    site = small_site()
    site["gpu"]["gpu"]["nodes"]["gpu-trn-1"]["gpus"] = 4
    assert monitors.metrics_scopes(parse_site(site))["gpu"].gpu_nodes == {"gpu-inf-1": 8, "gpu-trn-1": 4}


def test_a_cluster_without_inference_gets_no_vllm_or_gateway_monitors(full_scopes):
    assert [m["metadata"]["name"] for m in monitors.scrape_targets(full_scopes["gpu-train"])] == [
        "cilium-agent", "cilium-operator", "dcgm-exporter", "kueue",
    ]


def test_the_vllm_monitor_selects_every_model_pod_on_its_http_port(full_plan, full_scopes):
    (monitor,) = [m for m in monitors.scrape_targets(full_scopes["gpu"]) if m["metadata"]["name"] == "vllm"]
    deployments = [d for d in full_plan.objects("Deployment", "site-t-gpu") if d["metadata"]["namespace"] == INFERENCE_NAMESPACE]
    vllm = [d for d in deployments if d["metadata"]["name"].startswith("vllm-")]
    assert vllm
    assert pod_monitor_targets(monitor, vllm) == ["http"] * len(vllm)


def test_the_vllm_monitor_labels_series_with_the_model_key(full_scopes):
    (monitor,) = [m for m in monitors.scrape_targets(full_scopes["gpu"]) if m["metadata"]["name"] == "vllm"]
    assert monitor["spec"]["podMetricsEndpoints"][0]["relabelings"] == [
        {"action": "replace", "sourceLabels": ["__meta_kubernetes_pod_label_fab_internal_model"], "targetLabel": "model"},
    ]


@pytest.mark.parametrize(("cluster", "chart", "monitor", "ports"), [
    ("gpu", "cilium", "cilium-agent", ["prometheus", "hubble-metrics"]),
    ("gpu", "cilium", "cilium-operator", ["prometheus"]),
    ("compute", "spark-operator", "spark-operator", ["metrics"]),
    ("storage", "polaris", "polaris", ["polaris-mgmt"]),
])
def test_a_pod_monitor_selects_the_chart_pods_on_their_metrics_port(small, cluster, chart, monitor, ports):
    scopes = monitors.metrics_scopes(small.site)
    (target,) = [m for m in monitors.scrape_targets(scopes[cluster]) if m["metadata"]["name"] == monitor]
    assert pod_monitor_targets(target, release_objects(small.releases, f"site-t-{cluster}", chart)) == ports


def test_the_starrocks_monitor_selects_fe_and_cn_pods_as_the_operator_labels_them(full_scopes):
    (target,) = [m for m in monitors.scrape_targets(full_scopes["compute"]) if m["metadata"]["name"] == "starrocks"]
    # StarRocks operator v1.11.5 (pkg/k8sutils/load, templates/pod): `<cluster>-<component>` and the component; FE
    # serves HTTP on `http-port`, CN on `webserver-port`.
    pods = [{"kind": "StatefulSet", "metadata": {"namespace": "starrocks"}, "spec": {"template": {
        "metadata": {"labels": {"app.starrocks.ownerreference/name": f"starrocks-{component}", "app.kubernetes.io/component": component}},
        "spec": {"containers": [{"name": component, "ports": [{"name": port}]}]},
    }}} for component, port in (("fe", "http-port"), ("cn", "webserver-port"))]
    assert pod_monitor_targets(target, pods) == ["http-port", "webserver-port"]


def test_the_kueue_monitor_selects_the_charts_metrics_service_and_port(small):
    (target,) = [m for m in monitors.scrape_targets(monitors.metrics_scopes(small.site)["gpu"]) if m["metadata"]["name"] == "kueue"]
    services = [o for o in release_objects(small.releases, "site-t-gpu", "kueue") if o["kind"] == "Service"
                and matches(target["spec"]["selector"], o["metadata"].get("labels", {}))]
    assert [(s["metadata"]["name"], [p["name"] for p in s["spec"]["ports"]]) for s in services] == [
        ("kueue-controller-manager-metrics-service", [target["spec"]["endpoints"][0]["port"]]),
    ]


def test_the_aistor_monitor_selects_the_s3_pods_the_s3_services_select(small_plan):
    scope = monitors.metrics_scopes(parse_site(small_site()))["storage"]
    (target,) = [m for m in monitors.scrape_targets(scope) if m["metadata"]["name"] == "aistor"]
    services = [s for s in small_plan.objects("Service", "site-t-storage") if s["metadata"]["name"].startswith("s3-")]
    assert services
    assert all(s["spec"]["selector"] == target["spec"]["selector"]["matchLabels"] for s in services)
    assert {p["targetPort"] for s in services for p in s["spec"]["ports"]} == {target["spec"]["podMetricsEndpoints"][0]["portNumber"]}


def test_the_aistor_monitor_authenticates_with_a_bearer_token(full_scopes):
    (target,) = [m for m in monitors.scrape_targets(full_scopes["storage"]) if m["metadata"]["name"] == "aistor"]
    assert target["spec"]["podMetricsEndpoints"][0]["authorization"] == {
        "type": "Bearer", "credentials": {"name": "aistor-metrics-token", "key": "token"},
    }


def test_cilium_releases_turn_on_agent_operator_and_hubble_metrics(small_plan):
    (values, *_) = [r["inputs"]["values"] for r in small_plan.of_type("kubernetes:helm.sh/v3:Release")
                    if r["inputs"]["chart"] == "cilium"]
    assert (values["prometheus"]["enabled"], values["operator"]["prometheus"]["enabled"]) == (True, True)
    assert values["hubble"]["metrics"]["enabled"] == metrics_sources.HUBBLE_METRICS


def test_hubble_drop_metrics_carry_both_ends_identity_for_their_clusters():
    (drop,) = [m for m in metrics_sources.HUBBLE_METRICS if m.startswith("drop:")]
    assert "sourceContext=identity" in drop and "destinationContext=identity" in drop


def test_kueue_exports_cluster_queue_usage_and_quota(small_plan):
    (values, *_) = [r["inputs"]["values"] for r in small_plan.of_type("kubernetes:helm.sh/v3:Release")
                    if r["inputs"]["chart"].endswith("/kueue")]
    config = yaml.safe_load(values["managerConfig"]["controllerManagerConfigYaml"])
    assert config["metrics"] == {"bindAddress": ":8443", "enableClusterQueueResources": True}


def test_the_rate_limit_service_counts_near_limit_hits_from_the_saturation_threshold():
    site = small_site()
    add_observability(site, alerts={"rate_limit_saturation_percent": 75})
    plan = render_small(site)
    (values,) = [r["inputs"]["values"] for r in plan.of_type("kubernetes:helm.sh/v3:Release")
                 if r["inputs"]["chart"].endswith("/gateway-helm") and plan.cluster(r) == "site-t-gpu"]
    env = values["config"]["envoyGateway"]["provider"]["kubernetes"]["rateLimitDeployment"]["container"]["env"]
    assert {"name": "NEAR_LIMIT_RATIO", "value": "0.75"} in env



def test_the_aistor_monitor_scrapes_every_buckets_s3_traffic(full_scopes):
    (target,) = [m for m in monitors.scrape_targets(full_scopes["storage"]) if m["metadata"]["name"] == "aistor"]
    assert [e["path"] for e in target["spec"]["podMetricsEndpoints"]] == ["/minio/metrics/v3", "/minio/metrics/v3/bucket/api/*"]


def test_the_aistor_token_is_the_jwt_mc_admin_prometheus_generate_makes():
    secret = "s" * 64  # long enough that PyJWT's decode does not warn (MinIO's own keys are 40 characters)
    token = object_store.metrics_token("AKIAEXAMPLE", secret)
    assert jwt.decode(token, secret, algorithms=["HS512"], issuer="prometheus") == {
        "exp": 4_102_444_800, "sub": "AKIAEXAMPLE", "iss": "prometheus",
    }


def test_the_aistor_token_is_the_same_for_the_same_keys():
    assert object_store.metrics_token("AK", "SK") == object_store.metrics_token("AK", "SK")


def test_the_metrics_principal_may_read_metrics_and_nothing_else():
    allowed = [s for s in object_store.METRICS_POLICY["Statement"] if s["Effect"] == "Allow"]
    assert allowed == [{"Sid": "ReadMetrics", "Effect": "Allow", "Action": ["admin:Prometheus"]}]


def test_gpu_clusters_scrape_the_dcgm_exporter_through_the_programs_own_monitor(full_scopes):
    gpu = {m["metadata"]["name"]: m for m in monitors.scrape_targets(full_scopes["gpu"])}
    assert gpu["dcgm-exporter"]["spec"]["selector"] == {"matchLabels": {"app": "nvidia-dcgm-exporter"}}
    assert monitors.target_namespace(gpu["dcgm-exporter"]) == "gpu-operator"
    assert "dcgm-exporter" not in {m["metadata"]["name"] for m in monitors.scrape_targets(full_scopes["compute"])}


def test_monitors_live_in_the_monitoring_namespace_but_the_one_beside_the_secrets_it_presents(full_scopes):
    where = {f"{key}/{m['metadata']['name']}": m["metadata"]["namespace"]
             for key, scope in full_scopes.items() for m in monitors.scrape_targets(scope)}
    assert where["storage/aistor"] == "aistor"
    assert {ns for name, ns in where.items() if name != "storage/aistor"} == {"monitoring"}
