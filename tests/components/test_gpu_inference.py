"""GpuCluster and InferencePool behaviour, read from renders of small sites."""

from __future__ import annotations

import importlib.util
import ipaddress
import json

import pytest

from components.gpu import POSTRENDER
from fabctl.render import PROJECT_DIR

WORKLOADS = ("Deployment", "StatefulSet", "DaemonSet", "Job", "CronJob", "Pod")


def pod_specs(obj: dict) -> list[dict]:
    spec = obj.get("spec", {})
    if obj["kind"] == "Pod":
        return [spec]
    if obj["kind"] == "CronJob":
        return [spec["jobTemplate"]["spec"]["template"]["spec"]]
    return [spec["template"]["spec"]]


def containers(pod: dict) -> list[dict]:
    return [*pod.get("initContainers", []), *pod.get("containers", [])]


def vllm_deployments(plan) -> list[dict]:
    return [d for d in plan.objects("Deployment") if d["metadata"]["name"].startswith("vllm-")]


def test_nothing_outside_gpu_clusters_requests_gpus(full_plan):
    outside = [(cluster, obj) for cluster, obj, _ in full_plan.manifests()
               if obj["kind"] in WORKLOADS and cluster not in ("site-t-gpu", "site-t-gpu-train")]
    assert {cluster for cluster, _ in outside} == {"site-t-storage", "site-t-compute"}
    offenders = [
        (cluster, obj["metadata"]["name"])
        for cluster, obj in outside
        for pod in pod_specs(obj)
        for c in containers(pod)
        if "nvidia.com/gpu" in {**c.get("resources", {}).get("requests", {}), **c.get("resources", {}).get("limits", {})}
    ]
    assert offenders == []


def test_every_vllm_pod_runs_only_on_inference_nodes(small_plan):
    deployments = vllm_deployments(small_plan)
    assert deployments
    for deployment in deployments:
        pod = deployment["spec"]["template"]["spec"]
        assert pod["nodeSelector"] == {"fab.internal/gpu-pool": "inference"}
        assert pod["tolerations"] == [{"key": "fab.internal/gpu-pool", "operator": "Equal", "value": "inference", "effect": "NoSchedule"}]
        assert pod["priorityClassName"] == "fab-serving"


def test_vllm_is_sized_by_the_capacity_math(small_plan):
    capacity = small_plan.outputs["capacity"]
    assert vllm_deployments(small_plan)
    for deployment in vllm_deployments(small_plan):
        model = deployment["metadata"]["labels"]["fab.internal/model"]
        container = deployment["spec"]["template"]["spec"]["containers"][0]
        args = dict(zip(container["args"][::2], container["args"][1::2]))
        assert deployment["spec"]["replicas"] == capacity[model]["replicas"]
        assert args["--tensor-parallel-size"] == str(capacity[model]["tensor_parallel"])
        assert container["resources"]["limits"]["nvidia.com/gpu"] == str(capacity[model]["tensor_parallel"])


def test_the_capacity_output_is_the_sizing_on_the_inference_gpus(small_plan):
    # qwen3-8b (8.2 B parameters, bf16, 36 layers, 8 KV heads of 128) on H100s, 64 sequences of 2048 tokens on average.
    assert small_plan.outputs["capacity"] == {
        "qwen3-8b": {
            "tensor_parallel": 1, "replicas": 2, "gpus": 2, "weights_per_gpu_gib": 15.3, "kv_cache_per_gpu_gib": 54.4,
            "kv_bytes_per_token": 147456, "max_context_sequences_per_replica": 12, "sequences_per_replica": 193,
        },
    }


def test_weights_are_copied_with_inference_read_only_keys(small_plan):
    (deployment,) = [d for d in vllm_deployments(small_plan) if d["metadata"]["name"] == "vllm-qwen3-8b"]
    pod = deployment["spec"]["template"]["spec"]
    sync = pod["initContainers"][1]
    assert sync["args"] == ["mirror", "--overwrite", "--remove", "models/site-t-models/qwen/qwen3-8b", "/models/qwen3-8b"]
    secrets = {e["valueFrom"]["secretKeyRef"]["name"] for e in sync["env"] if "valueFrom" in e}
    assert secrets == {"s3-inference"}
    cache = next(v for v in pod["volumes"] if v["name"] == "model-cache")
    assert cache["ephemeral"]["volumeClaimTemplate"]["spec"]["storageClassName"] == "local-nvme-cache"


def test_every_model_has_a_disruption_budget_and_a_service(small_plan):
    names = {d["metadata"]["name"] for d in vllm_deployments(small_plan)}
    assert names == {"vllm-qwen3-8b"}
    assert {p["metadata"]["name"] for p in small_plan.objects("PodDisruptionBudget", "site-t-gpu")} == names
    assert {s["metadata"]["name"] for s in small_plan.objects("Service", "site-t-gpu") if s["metadata"]["namespace"] == "inference"} == names


def test_the_gateway_service_is_a_private_local_vip(small_plan):
    (proxy,) = small_plan.objects("EnvoyProxy", "site-t-gpu")
    service = proxy["spec"]["provider"]["kubernetes"]["envoyService"]
    vip = ipaddress.ip_address(service["annotations"]["lbipam.cilium.io/ips"])
    assert (service["type"], service["externalTrafficPolicy"]) == ("LoadBalancer", "Local")
    assert (vip.is_private, str(vip)) == (True, "10.30.103.10")
    assert service["labels"] == {"lb.fab.internal/pool": "internal"}


def test_the_inference_gateway_and_routes_are_on_the_inference_cluster(full_plan):
    placed = {(obj["kind"], c) for c, obj, _ in full_plan.manifests() if obj["metadata"]["name"] == "llm" or obj["metadata"]["name"].startswith("vllm-")}
    assert {c for _, c in placed} == {"site-t-gpu"}
    assert {"Gateway", "EnvoyProxy", "HTTPRoute"} <= {kind for kind, _ in placed}


def test_every_route_has_a_jwt_policy_and_a_rate_limit(small_plan):
    routes = {r["metadata"]["name"] for r in small_plan.objects("HTTPRoute", "site-t-gpu")}
    covered = lambda kind: {t["name"] for p in small_plan.objects(kind) for t in p["spec"]["targetRefs"] if t["kind"] == "HTTPRoute"}  # noqa: E731
    assert routes
    assert covered("SecurityPolicy") == routes
    assert covered("BackendTrafficPolicy") == routes
    for policy in small_plan.objects("SecurityPolicy"):
        assert policy["spec"]["authorization"]["defaultAction"] == "Deny"
        assert policy["spec"]["jwt"]["providers"][0]["audiences"] == ["llm-gateway"]


def test_rate_limits_are_per_team_with_overrides(full_plan):
    (policy,) = [p for p in full_plan.objects("BackendTrafficPolicy") if p["metadata"]["name"] == "vllm-qwen3-8b"]
    default, override = policy["spec"]["rateLimit"]["local"]["rules"]
    assert default == {
        "clientSelectors": [{"headers": [
            {"name": "x-fab-team", "type": "Distinct"},
            {"name": "x-fab-team", "type": "Exact", "value": "fdc", "invert": True},
        ]}],
        "limit": {"requests": 600, "unit": "Minute"},
    }
    assert override == {
        "clientSelectors": [{"headers": [{"name": "x-fab-team", "type": "Exact", "value": "fdc"}]}],
        "limit": {"requests": 3000, "unit": "Minute"},
    }


def test_the_gateway_admits_only_the_team_clients_of_the_site_teams(full_plan):
    (policy,) = [p for p in full_plan.objects("SecurityPolicy") if p["metadata"]["name"] == "vllm-qwen3-8b"]
    assert policy["spec"]["authorization"]["rules"][0]["principal"]["jwt"]["claims"] == [
        {"name": "llm_access", "values": ["true"]}, {"name": "team", "values": ["fdc", "yield"]},
    ]


def test_clients_cannot_forge_the_team_header(small_plan):
    (policy,) = small_plan.objects("ClientTrafficPolicy")
    assert policy["spec"]["headers"]["earlyRequestHeaders"]["remove"] == ["x-fab-team"]


def test_every_team_gets_a_gateway_client_with_its_team_claim(full_plan):
    clients = {
        r["inputs"]["clientId"]: r["inputs"] for r in full_plan.of_type("keycloak:openid/client:Client")
        if r["inputs"]["clientId"].startswith("inference-")
    }
    claims = {
        r["inputs"]["claimValue"] for r in full_plan.of_type("keycloak:openid/hardcodedClaimProtocolMapper:HardcodedClaimProtocolMapper")
        if r["inputs"]["claimName"] == "team"
    }
    assert sorted(clients) == ["inference-fdc", "inference-yield"]
    assert all(c["serviceAccountsEnabled"] and not c["standardFlowEnabled"] for c in clients.values())
    assert sorted(claims) == ["fdc", "yield"]


def test_serving_contract_is_exported(small_plan):
    serving = small_plan.outputs["serving"]
    assert (serving["url"], serving["vip"]) == ("https://llm.site-t.fab.internal", "10.30.103.10")
    assert serving["models"] == {"qwen3-8b": {"base_url": "https://llm.site-t.fab.internal/models/qwen3-8b/v1", "served_name": "qwen3-8b"}}


def test_routes_rewrite_the_model_prefix_to_the_openai_path(small_plan):
    (route,) = [r for r in small_plan.objects("HTTPRoute") if r["metadata"]["name"] == "vllm-qwen3-8b"]
    (rule,) = route["spec"]["rules"]
    assert rule["matches"] == [{"path": {"type": "PathPrefix", "value": "/models/qwen3-8b/v1"}}]
    assert rule["filters"][0]["urlRewrite"]["path"] == {"type": "ReplacePrefixMatch", "replacePrefixMatch": "/v1"}


def test_cluster_policy_runs_the_operands_the_platform_needs(small_plan):
    (policy,) = small_plan.objects("ClusterPolicy", "site-t-gpu")
    spec = policy["spec"]
    assert policy["metadata"]["name"] == "cluster-policy"
    assert all(spec[k]["enabled"] for k in ("driver", "toolkit", "devicePlugin", "gfd", "dcgmExporter"))
    assert spec["dcgmExporter"]["serviceMonitor"]["enabled"] is False  # the program's own (components/monitors.py)
    assert spec["driver"]["rdma"] == {"enabled": True, "useHostMofed": False}
    assert (spec["mig"], spec["migManager"]["enabled"]) == ({"strategy": "single"}, False)


def test_the_chart_cluster_policy_is_removed_by_the_post_renderer(small_plan):
    releases = [r for r in small_plan.of_type("kubernetes:helm.sh/v3:Release") if r["inputs"]["chart"] == "gpu-operator"]
    assert {r["inputs"]["postrender"] for r in releases} == {POSTRENDER}
    assert (PROJECT_DIR / POSTRENDER).stat().st_mode & 0o111


def test_post_renderer_drops_only_the_cluster_policy():
    spec = importlib.util.spec_from_file_location("drop", PROJECT_DIR / POSTRENDER)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    rendered = (
        "---\napiVersion: v1\nkind: ServiceAccount\nmetadata: {name: gpu-operator}\n"
        "---\napiVersion: nvidia.com/v1\nkind: ClusterPolicy\nmetadata: {name: cluster-policy}\n"
        "---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {name: gpu-operator}\n"
    )
    out = module.drop_cluster_policy(rendered)
    assert "ClusterPolicy" not in out
    assert out.count("kind:") == 2


def test_nic_cluster_policy_shares_rdma_and_runs_ipoib(small_plan):
    (policy,) = small_plan.objects("NicClusterPolicy", "site-t-gpu")
    assert policy["metadata"]["name"] == "nic-cluster-policy"
    config = json.loads(policy["spec"]["rdmaSharedDevicePlugin"]["config"])
    assert config["configList"][0]["resourceName"] == "rdma_shared_ib"
    assert set(policy["spec"]["secondaryNetwork"]) == {"cniPlugins", "multus", "ipoib"}


def test_only_inference_nodes_get_the_ipoib_weights_network(full_plan):
    assert [n["spec"]["networkNamespace"] for n in full_plan.objects("IPoIBNetwork", "site-t-gpu")] == ["inference"]
    assert full_plan.objects("IPoIBNetwork", "site-t-gpu-train") == []


def test_node_pools_are_labels_and_taints_that_nfd_puts_on_the_listed_nodes(small_plan):
    (rule,) = small_plan.objects("NodeFeatureRule", "site-t-gpu")
    by_pool = {
        (r["labels"]["fab.internal/gpu-pool"], r["labels"]["fab.internal/gpu-type"]): (
            r["matchFeatures"][0]["matchExpressions"]["nodename"]["value"], r["taints"]
        )
        for r in rule["spec"]["rules"]
    }
    assert by_pool == {
        ("inference", "h100"): (["gpu-inf-1"], [{"key": "fab.internal/gpu-pool", "value": "inference", "effect": "NoSchedule"}]),
        ("training", "h100"): (["gpu-trn-1"], [{"key": "fab.internal/gpu-pool", "value": "training", "effect": "NoSchedule"}]),
    }


def test_no_node_of_a_gpu_cluster_is_pulumis(full_plan):
    # Only the compute cluster's pool nodes are labelled by the program.
    assert {full_plan.target(r) for r in full_plan.of_type("kubernetes:core/v1:NodePatch")} == {"site-t-compute"}


def test_nfd_applies_the_pool_taints_and_its_worker_tolerates_them(small_plan):
    (release,) = [r for r in small_plan.of_type("kubernetes:helm.sh/v3:Release") if r["name"] == "gpu-gpu-gpu-operator"]
    nfd = release["inputs"]["values"]["node-feature-discovery"]
    assert nfd["master"]["config"] == {"enableTaints": True}
    assert {"key": "fab.internal/gpu-pool", "operator": "Equal", "value": "training", "effect": "NoSchedule"} in nfd["worker"]["tolerations"]


def test_serving_outranks_training_which_never_preempts(small_plan):
    classes = {p["metadata"]["name"]: p for p in small_plan.objects("PriorityClass", "site-t-gpu")}
    assert classes["fab-serving"]["value"] > classes["fab-training"]["value"]
    assert classes["fab-training"]["preemptionPolicy"] == "Never"


def test_local_nvme_is_marked_as_cache(small_plan):
    (storage_class,) = small_plan.objects("StorageClass", "site-t-gpu")
    assert storage_class["metadata"]["labels"] == {"fab.internal/durability": "cache"}
    assert (storage_class["reclaimPolicy"], storage_class["volumeBindingMode"]) == ("Delete", "WaitForFirstConsumer")


@pytest.mark.parametrize("namespace", ["gpu-operator", "nvidia-network-operator"])
def test_operator_namespaces_are_privileged_with_a_reason(small_plan, namespace):
    (ns,) = [n for n in small_plan.objects("Namespace", "site-t-gpu") if n["metadata"]["name"] == namespace]
    assert ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "privileged"
    assert ns["metadata"]["annotations"]["fab.internal/privileged-reason"]


def test_a_model_route_waits_for_its_jwt_and_rate_limit_policies(small_plan):
    """Envoy Gateway serves a route as soon as it exists: its authentication must be in place first."""
    routes = [r for r in small_plan.resources if r["type"] == "kubernetes:gateway.networking.k8s.io/v1:HTTPRoute"
              and r["name"].startswith("inference-route-")]
    assert routes
    for route in routes:
        model = route["name"].removeprefix("inference-route-")
        policies = {r["urn"] for r in small_plan.resources if r["name"] in (f"inference-jwt-{model}", f"inference-ratelimit-{model}")}
        assert len(policies) == 2
        assert policies <= set(route["dependencies"]), route["name"]


def _to_vllm(plan, cluster, source):
    from cilium_engine import admitted, pod
    from components.serving import VLLM_PORT, stable_labels

    model = next(d["spec"]["template"]["metadata"]["labels"]["fab.internal/model"] for d in plan.objects("Deployment", cluster)
                 if d["metadata"]["namespace"] == "inference" and "fab.internal/model" in d["spec"]["template"]["metadata"]["labels"])
    return admitted(plan, pod(cluster, "inference", stable_labels(model)), source, VLLM_PORT)


def test_the_gateway_proxies_and_prometheus_reach_vllm(small_plan):
    from cilium_engine import pod
    from components.serving import GATEWAY_NAME

    proxy = pod("site-t-gpu", "envoy-gateway-system", {"app.kubernetes.io/name": "envoy", "app.kubernetes.io/component": "proxy",
                                                       "gateway.envoyproxy.io/owning-gateway-name": GATEWAY_NAME,
                                                       "gateway.envoyproxy.io/owning-gateway-namespace": "envoy-gateway-system"})
    prometheus = pod("site-t-gpu", "monitoring", {"app.kubernetes.io/name": "prometheus"})
    assert (_to_vllm(small_plan, "site-t-gpu", proxy).admitted, _to_vllm(small_plan, "site-t-gpu", prometheus).admitted) == (True, True)


def test_the_endpoint_picker_reaches_vllm(plan_a):
    from cilium_engine import pod

    (picker,) = [d for d in plan_a.objects("Deployment", "site-a-gpu") if d["metadata"]["namespace"] == "inference"
                 and d["spec"]["template"]["metadata"]["labels"].get("app.kubernetes.io/component") == "endpoint-picker"][:1]
    source = pod("site-a-gpu", "inference", picker["spec"]["template"]["metadata"]["labels"])
    assert _to_vllm(plan_a, "site-a-gpu", source).admitted


def test_another_gateways_proxy_cannot_reach_vllm(small_plan):
    from cilium_engine import pod

    other = pod("site-t-gpu", "envoy-gateway-system", {"app.kubernetes.io/name": "envoy", "app.kubernetes.io/component": "proxy",
                                                       "gateway.envoyproxy.io/owning-gateway-name": "mine"})
    verdict = _to_vllm(small_plan, "site-t-gpu", other)
    assert (verdict.admitted, verdict.why) == (False, "denied by vllm")


def test_the_rate_limit_service_reaches_its_store_and_a_proxy_does_not(small_plan):
    from cilium_engine import admitted, pod
    from components.gateway import RATE_LIMIT_STORE_LABELS, RATE_LIMIT_STORE_PORT

    store = pod("site-t-gpu", "envoy-gateway-system", RATE_LIMIT_STORE_LABELS)
    service = pod("site-t-gpu", "envoy-gateway-system", {"app.kubernetes.io/name": "envoy-ratelimit", "app.kubernetes.io/component":
                                                         "ratelimit", "app.kubernetes.io/managed-by": "envoy-gateway"})
    proxy = pod("site-t-gpu", "envoy-gateway-system", {"app.kubernetes.io/name": "envoy", "app.kubernetes.io/component": "proxy"})
    verdicts = [admitted(small_plan, store, who, RATE_LIMIT_STORE_PORT) for who in (service, proxy)]
    assert [(v.admitted, v.why) for v in verdicts] == [(True, "allowed by fab-default-deny-remote"), (False, "denied by ratelimit-valkey")]
