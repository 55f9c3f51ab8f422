"""Explicit waits serve a runtime need (issue 24): nothing waits for an application's readiness it does not use."""

from __future__ import annotations

import pytest
from helpers import render_small
from small_site import add_gpu_notebooks, add_observability, add_vendor, small_site

from fabctl.render import Plan


def grown(add) -> Plan:
    """The render of the small site with one part added by `add`."""
    site = small_site()
    add(site)
    return render_small(site)


@pytest.fixture(scope="module")
def observability_plan():
    """The small site with the metrics stack in-cluster (compute's receiver VIP) and Grafana."""
    return grown(add_observability)


@pytest.fixture(scope="module")
def notebooks_plan():
    """The small site with GPU notebooks (the hub and its proxy VIP on `gpu`)."""
    return grown(add_gpu_notebooks)


@pytest.fixture(scope="module")
def vendor_plan():
    """The small site with one equipment vendor (the catalog route on the compute ingress)."""
    return grown(add_vendor)


def by_name(plan, name: str) -> dict:
    (resource,) = [r for r in plan.resources if r["name"] == name and r["custom"]]
    return resource


def test_the_polaris_rest_service_does_not_wait_for_the_polaris_chart(small_plan):
    service = by_name(small_plan, "storage-svc-polaris-rest")
    assert by_name(small_plan, "storage-polaris")["urn"] not in small_plan.waits_for(service)


def test_the_polaris_rest_service_still_waits_for_its_namespace_and_address_pool(small_plan):
    service = by_name(small_plan, "storage-svc-polaris-rest")
    assert {by_name(small_plan, "storage-ns-polaris")["urn"], by_name(small_plan, "network-storage-pool-internal")["urn"]} <= set(
        service["dependencies"])


@pytest.mark.parametrize("suffix", ["svc", "pdb"])
def test_a_vllm_service_and_disruption_budget_do_not_wait_for_the_deployment(small_plan, suffix):
    deployment = by_name(small_plan, "inference-vllm-qwen3-8b")
    other = by_name(small_plan, f"inference-vllm-qwen3-8b-{suffix}")
    assert deployment["urn"] not in small_plan.waits_for(other)
    assert by_name(small_plan, "inference-ns-inference")["urn"] in other["dependencies"]


def test_the_vllm_deployment_waits_for_what_serving_pods_need_of_the_gpu_cluster(small_plan):
    deployment = by_name(small_plan, "inference-vllm-qwen3-8b")
    needs = {by_name(small_plan, name)["urn"] for name in (
        "gpu-gpu-node-pools", "gpu-gpu-cluster-policy", "gpu-gpu-nvme", "gpu-gpu-priority-serving")}
    assert needs <= set(deployment["dependencies"])


def test_with_ipoib_the_vllm_deployment_waits_for_the_nic_policy_and_the_weights_network(full_plan):
    # The pod's network annotation names the IPoIB network, and its RDMA request needs the NIC policy's device plugin.
    deployment = by_name(full_plan, "inference-vllm-qwen3-8b")
    needs = {by_name(full_plan, name)["urn"] for name in ("gpu-gpu-nic-cluster-policy", "gpu-gpu-ipoib-pool", "gpu-gpu-ipoib-network")}
    assert needs <= set(deployment["dependencies"])


def test_the_vllm_deployment_does_not_wait_for_the_whole_gpu_cluster(small_plan):
    # Waiting for the component would mean waiting for every one of its children, the Network Operator's chart among them.
    deployment = by_name(small_plan, "inference-vllm-qwen3-8b")
    assert by_name(small_plan, "gpu-gpu-network-operator")["urn"] not in small_plan.waits_for(deployment)


def test_pulumi_waits_for_a_vllm_deployment_as_long_as_its_pods_take_to_load(small_plan):
    # qwen3-8b (about 16 GiB of weights, 2 replicas): 15 minutes to schedule and pull, the download at 0.25 GiB/s and
    # the 30-minute startup floor make 47 minutes a pod; an update rolls the replicas one at a time.
    deployment = by_name(small_plan, "inference-vllm-qwen3-8b")
    assert deployment["custom_timeouts"] == {"create": "47m", "update": "93m"}


def test_without_ipoib_the_vllm_deployment_does_not_wait_for_the_nic_operands(small_plan):
    deployment = by_name(small_plan, "inference-vllm-qwen3-8b")
    assert by_name(small_plan, "gpu-gpu-nic-cluster-policy")["urn"] not in small_plan.waits_for(deployment)


@pytest.mark.parametrize("engine", ["airflow", "superset", "jupyterhub"])
def test_a_web_ui_route_does_not_wait_for_its_chart(small_plan, engine):
    route = by_name(small_plan, f"compute-route-{engine}")
    assert by_name(small_plan, f"compute-{engine}")["urn"] not in small_plan.waits_for(route)


def test_a_web_ui_route_still_waits_for_its_gateway_and_the_gateway_api_crds(small_plan):
    route = by_name(small_plan, "compute-route-airflow")
    waits = small_plan.waits_for(route)
    assert by_name(small_plan, "compute-gateway")["urn"] in waits
    assert {r["urn"] for r in small_plan.resources if r["type"] == "kubernetes:helm.sh/v3:Release" and "envoy" in r["name"]
            and small_plan.cluster(r) == small_plan.cluster(route)} & waits


def test_the_spark_operator_does_not_wait_for_yunikorn(small_plan):
    operator = by_name(small_plan, "compute-spark-operator")
    assert by_name(small_plan, "compute-yunikorn")["urn"] not in small_plan.waits_for(operator)


def test_the_spark_connect_server_waits_for_yunikorn_which_schedules_it(small_plan):
    server = by_name(small_plan, "compute-spark-connect-yield")
    assert by_name(small_plan, "compute-yunikorn")["urn"] in server["dependencies"]


def test_the_spark_connect_server_waits_for_the_operator_chart_which_makes_its_executors_account(small_plan):
    server = by_name(small_plan, "compute-spark-connect-yield")
    assert by_name(small_plan, "compute-spark-operator")["urn"] in server["dependencies"]


def test_the_grafana_route_does_not_wait_for_the_metrics_chart(observability_plan):
    route = by_name(observability_plan, "observability-compute-route-grafana")
    assert by_name(observability_plan, "observability-compute-stack")["urn"] not in observability_plan.waits_for(route)


def test_the_grafana_route_still_waits_for_its_gateway_and_namespace(observability_plan):
    route = by_name(observability_plan, "observability-compute-route-grafana")
    assert {by_name(observability_plan, "compute-gateway")["urn"],
            by_name(observability_plan, "observability-compute-ns-monitoring")["urn"]} <= set(route["dependencies"])


def test_the_metrics_receiver_service_does_not_wait_for_the_metrics_chart(observability_plan):
    service = by_name(observability_plan, "observability-compute-receiver")
    assert by_name(observability_plan, "observability-compute-stack")["urn"] not in observability_plan.waits_for(service)


def test_the_metrics_receiver_service_still_waits_for_its_namespace_and_address_pool(observability_plan):
    service = by_name(observability_plan, "observability-compute-receiver")
    assert {by_name(observability_plan, "observability-compute-ns-monitoring")["urn"],
            by_name(observability_plan, "network-compute-pool-internal")["urn"]} <= set(service["dependencies"])


def test_the_gpu_notebooks_proxy_vip_does_not_wait_for_the_hub_chart(notebooks_plan):
    service = by_name(notebooks_plan, "notebooks-proxy-vip")
    assert by_name(notebooks_plan, "notebooks-hub")["urn"] not in notebooks_plan.waits_for(service)


def test_the_gpu_notebooks_proxy_vip_still_waits_for_its_namespace_and_address_pool(notebooks_plan):
    service = by_name(notebooks_plan, "notebooks-proxy-vip")
    assert {by_name(notebooks_plan, "notebooks-ns")["urn"],
            by_name(notebooks_plan, "network-gpu-pool-internal")["urn"]} <= set(service["dependencies"])


def test_a_vllm_route_does_not_wait_for_the_deployment(small_plan):
    route = by_name(small_plan, "inference-route-qwen3-8b")
    assert by_name(small_plan, "inference-vllm-qwen3-8b")["urn"] not in small_plan.waits_for(route)


def test_a_vllm_route_still_waits_for_its_gateway_and_its_authentication_and_rate_limit_policies(small_plan):
    route = by_name(small_plan, "inference-route-qwen3-8b")
    assert {by_name(small_plan, name)["urn"] for name in (
        "inference-gateway", "inference-jwt-qwen3-8b", "inference-ratelimit-qwen3-8b")} <= set(route["dependencies"])


def test_the_vendor_catalog_route_waits_for_the_vendors_allowlist_and_not_the_other_way(vendor_plan):
    route, allowlist = by_name(vendor_plan, "vendor-catalog-route"), by_name(vendor_plan, "vendor-catalog-sources")
    assert allowlist["urn"] in route["dependencies"]
    assert route["urn"] not in vendor_plan.waits_for(allowlist)


def test_the_network_operator_chart_still_waits_for_the_nfd_crds_of_the_gpu_operator_chart(small_plan):
    network_operator = by_name(small_plan, "gpu-gpu-network-operator")
    assert by_name(small_plan, "gpu-gpu-gpu-operator")["urn"] in network_operator["dependencies"]


def test_pulumi_waits_for_a_vllm_service_as_long_as_for_its_deployment(small_plan):
    # A Service waits for the pods it selects once any exist: a canary's Service is created while its pods load.
    assert by_name(small_plan, "inference-vllm-qwen3-8b-svc")["custom_timeouts"] == {"create": "47m", "update": "93m"}
