"""ClusterMesh global services (issue 23): Polaris and the inference gateway under cluster-local names, while the flow
table's Cilium policies still decide which clusters' pods may connect."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import yaml

from helpers import config_errors, render_small
from small_site import small_site

GLOBAL = "service.cilium.io/global"
SHARED = "service.cilium.io/shared"
AFFINITY = "service.cilium.io/affinity"
CLUSTER = "io.cilium.k8s.policy.cluster"
NAMESPACE = "k8s:io.kubernetes.pod.namespace"


def service(plan, cluster: str, namespace: str, name: str) -> dict[str, Any]:
    (found,) = [s for s in plan.objects("Service", cluster)
                if (s["metadata"].get("namespace"), s["metadata"]["name"]) == (namespace, name)]
    return found


def global_services(plan) -> set[tuple[str, str, str]]:
    return {(cluster, obj["metadata"]["namespace"], obj["metadata"]["name"]) for cluster, obj, _ in plan.manifests()
            if obj["kind"] == "Service" and (obj["metadata"].get("annotations") or {}).get(GLOBAL) == "true"}


def ports(svc: dict[str, Any]) -> list[tuple[str, int, str]]:
    return [(p["name"], p["port"], p["protocol"]) for p in svc["spec"]["ports"]]


def without_global_services() -> dict[str, Any]:
    site = small_site()
    site["global_services"] = False
    return site


# Which Services are global, on which clusters ----------------------------------------------------------------------

def test_polaris_service_is_global_with_local_affinity_on_storage(small_plan):
    annotations = service(small_plan, "site-t-storage", "polaris", "polaris-rest")["metadata"]["annotations"]
    assert {k: v for k, v in annotations.items() if k.startswith("service.cilium.io/")} == {GLOBAL: "true", AFFINITY: "local"}


def test_compute_and_gpu_clusters_repeat_polaris_service_without_backends(small_plan):
    backend = service(small_plan, "site-t-storage", "polaris", "polaris-rest")
    for cluster in ("site-t-compute", "site-t-gpu"):
        consumer = service(small_plan, cluster, "polaris", "polaris-rest")
        assert "selector" not in consumer["spec"] and consumer["spec"]["type"] == "ClusterIP"
        assert ports(consumer) == ports(backend) == [("rest", 8181, "TCP")]
        assert consumer["metadata"]["annotations"] == {GLOBAL: "true", SHARED: "false", AFFINITY: "local"}


def test_gateway_service_is_global_on_the_serving_cluster(small_plan):
    backend = service(small_plan, "site-t-gpu", "envoy-gateway-system", "inference-gateway")
    assert backend["metadata"]["annotations"] == {GLOBAL: "true"}
    assert backend["spec"]["selector"] == {
        "app.kubernetes.io/name": "envoy", "app.kubernetes.io/component": "proxy",
        "gateway.envoyproxy.io/owning-gateway-name": "llm", "gateway.envoyproxy.io/owning-gateway-namespace": "envoy-gateway-system",
    }
    assert [(p["name"], p["port"], p["targetPort"]) for p in backend["spec"]["ports"]] == [("https-443", 443, 10443)]


def test_the_gateways_load_balancer_keeps_the_name_envoy_gateway_gives_it(small_plan):
    """Naming it would make Envoy Gateway replace the Service at the VIP on a site that already serves."""
    (proxy,) = [p for p in small_plan.objects("EnvoyProxy", "site-t-gpu") if p["metadata"]["name"] == "llm"]
    envoy_service = proxy["spec"]["provider"]["kubernetes"]["envoyService"]
    assert ("name" in envoy_service, envoy_service["type"]) == (False, "LoadBalancer")
    assert not any(key.startswith("service.cilium.io/") for key in envoy_service["annotations"])


def test_compute_repeats_the_gateway_service_without_backends(small_plan):
    consumer = service(small_plan, "site-t-compute", "envoy-gateway-system", "inference-gateway")
    assert "selector" not in consumer["spec"]
    # Envoy Gateway names an HTTPS listener's Service port `https-<port>`; Cilium pairs backends by port name.
    assert ports(consumer) == [("https-443", 443, "TCP")]
    assert consumer["metadata"]["annotations"] == {GLOBAL: "true", SHARED: "false"}


def test_only_polaris_and_the_gateway_consumers_are_global_services(small_plan):
    assert global_services(small_plan) == {
        ("site-t-storage", "polaris", "polaris-rest"),
        ("site-t-compute", "polaris", "polaris-rest"),
        ("site-t-gpu", "polaris", "polaris-rest"),
        ("site-t-gpu", "envoy-gateway-system", "inference-gateway"),
        ("site-t-compute", "envoy-gateway-system", "inference-gateway"),
    }


def test_a_consumer_cluster_gets_polaris_namespace_for_the_service(small_plan):
    names = {ns["metadata"]["name"] for ns in small_plan.objects("Namespace", "site-t-gpu")}
    assert "polaris" in names


# Which names clients use ----------------------------------------------------------------------------------------------

def _spark_catalog_uri(plan) -> str:
    """The catalog URI of Spark's jobs (Airflow's SparkApplication template)."""
    (template,) = [c for c in plan.objects("ConfigMap", "site-t-compute") if c["metadata"]["name"] == "spark-application"]
    return yaml.safe_load(template["data"]["sparkapplication.yaml"])["spec"]["sparkConf"]["spark.sql.catalog.fab.uri"]


def test_site_clients_call_polaris_by_its_cluster_local_name(small_plan):
    assert _spark_catalog_uri(small_plan) == "http://polaris-rest.polaris.svc:8181/api/catalog"


def test_polaris_stays_published_under_its_vip_name_for_other_sites_and_users(small_plan):
    assert small_plan.outputs["data"]["catalog_uri"] == "http://polaris.site-t.fab.internal:8181/api/catalog"


def test_the_serving_url_keeps_the_gateway_host_its_certificate_names(small_plan):
    assert small_plan.outputs["serving"]["url"] == "https://llm.site-t.fab.internal"


def test_switched_off_no_service_is_global_and_clients_use_the_vip_name():
    plan = render_small(without_global_services())
    assert global_services(plan) == set()
    assert _spark_catalog_uri(plan) == "http://polaris.site-t.fab.internal:8181/api/catalog"


def test_fails_when_global_services_are_set_before_phase_5():
    site = small_site()
    site["phase"] = 4
    site["global_services"] = True
    assert config_errors(site) == [
        ("fab-platform:site.global_services: true announces Polaris and the inference gateway as ClusterMesh global services: "
         "ClusterMesh global services (Polaris and the inference gateway under cluster-local names) comes in phase 05 "
         "(scale-out) and the site is at phase 4; do without it until phase 04 is done and phase is 5 (docs/roadmap.md), or "
         "list global-services in early_features"),
    ]


# What the flow table admits when clients come pod to pod through the global service ----------------------------------

def admitted(plan, cluster: str, source: dict[str, str] | str, to: dict[str, str], port: int) -> bool:
    """Whether the Cilium cluster-wide policies of `cluster` admit a connection from `source` (a pod's identity labels,
    or an entity such as `world`) to a pod labelled `to` on `port`. Through a global service, Cilium on the client's node
    picks a backend pod and connects to it directly: the destination's policy sees the client pod's own identity, known
    across ClusterMesh, and the pod's port, exactly as it does after the LoadBalancer VIP."""
    rules = [spec for policy in plan.objects("CiliumClusterwideNetworkPolicy", cluster) for spec in policy.get("specs") or [policy["spec"]]]
    for spec in rules:
        if not spec["endpointSelector"].get("matchLabels", {}).items() <= to.items():
            continue
        for rule in spec.get("ingress", []):
            by_endpoint = isinstance(source, dict) and any(
                sel["matchLabels"].items() <= source.items() for sel in rule.get("fromEndpoints", []))
            by_entity = isinstance(source, str) and source in rule.get("fromEntities", [])
            on_port = "toPorts" not in rule or any(
                int(p["port"]) == port for to_ports in rule["toPorts"] for p in to_ports["ports"])
            if (by_endpoint or by_entity) and on_port:
                return True
    return False


def pod(cluster: str, namespace: str, **labels: str) -> dict[str, str]:
    return {CLUSTER: cluster, NAMESPACE: namespace, **labels}


POLARIS_POD = pod("site-t-storage", "polaris", **{"app.kubernetes.io/name": "polaris"})


def test_the_polaris_flow_admits_compute_and_gpu_pods_through_the_global_service(small_plan):
    for client in (pod("site-t-compute", "spark"), pod("site-t-gpu", "team-yield")):
        assert admitted(small_plan, "site-t-storage", client, POLARIS_POD, 8181)


def test_the_polaris_flow_admits_nothing_else(small_plan):
    assert not admitted(small_plan, "site-t-storage", "world", POLARIS_POD, 8181)
    assert not admitted(small_plan, "site-t-storage", pod("site-t-other", "spark"), POLARIS_POD, 8181)
    assert not admitted(small_plan, "site-t-storage", pod("site-t-compute", "spark"), POLARIS_POD, 8182)


def test_without_the_polaris_flow_no_client_cluster_reaches_polaris_through_the_global_service(small_plan):
    plan = dataclasses.replace(small_plan, resources=[
        r for r in small_plan.resources if not (r["inputs"].get("kind") == "CiliumClusterwideNetworkPolicy"
                                                and r["inputs"].get("metadata", {}).get("name") == "fab-flow-polaris")])
    assert "polaris-rest" in {s["metadata"]["name"] for s in plan.objects("Service", "site-t-compute")}
    for client in (pod("site-t-compute", "spark"), pod("site-t-gpu", "team-yield")):
        assert not admitted(plan, "site-t-storage", client, POLARIS_POD, 8181)
    assert admitted(plan, "site-t-storage", pod("site-t-storage", "polaris"), POLARIS_POD, 8181)


def test_the_inference_flow_admits_compute_pods_only_through_the_global_service(small_plan):
    envoy = pod("site-t-gpu", "envoy-gateway-system", **{"app.kubernetes.io/name": "envoy"})
    assert admitted(small_plan, "site-t-gpu", pod("site-t-compute", "airflow"), envoy, 10443)
    assert not admitted(small_plan, "site-t-gpu", pod("site-t-storage", "polaris"), envoy, 10443)
    assert not admitted(small_plan, "site-t-gpu", "world", envoy, 10443)


def test_what_calls_polaris_by_its_cluster_local_name_waits_for_that_name(small_plan):
    """On a first `pulumi up`, Trino, StarRocks' setup and Spark would otherwise start before the name resolves."""
    repeated = {r["urn"] for r in small_plan.resources
                if r["type"] == "kubernetes:core/v1:Service" and r["name"] == "network-compute-global-polaris-polaris-rest"}
    callers = [r for r in small_plan.resources if "polaris-rest.polaris.svc" in json.dumps(r["inputs"])
               and r["name"].startswith("compute-")]
    assert sorted(r["name"] for r in callers if repeated <= small_plan.waits_for(r)) == sorted(r["name"] for r in callers) == [
        "compute-spark-application", "compute-spark-connect-yield-defaults", "compute-starrocks-setup", "compute-trino",
    ]
