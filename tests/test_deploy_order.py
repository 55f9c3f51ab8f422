"""A first `pulumi up` on empty clusters can finish: nothing waits for something created after it (fabctl.order)."""

from __future__ import annotations

import copy

from fabctl.order import load_balancer_problems, namespace_problems


def test_every_awaited_load_balancer_waits_for_its_pool(plan, releases_of):
    done, _ = releases_of(plan.stack)
    assert load_balancer_problems(plan, done) == []


def test_the_clustermesh_api_server_gets_its_vip_from_a_service_that_waits_for_the_pool(plan_b):
    (service,) = [o for o in plan_b.objects("Service", "site-b-gpu") if o["metadata"]["name"] == "clustermesh-apiserver-vip"]
    assert (service["spec"]["type"], service["metadata"]["annotations"], service["metadata"]["labels"]) == (
        "LoadBalancer", {"lbipam.cilium.io/ips": "10.20.103.2"}, {"lb.fab.internal/pool": "internal"}
    )


def _without_dependency(plan, name: str, dependency: str):
    """A copy of the plan in which resource `name` no longer waits for resource `dependency`."""
    broken = copy.deepcopy(plan)
    (record,) = [r for r in broken.resources if r["name"] == name]
    (urn,) = [r["urn"] for r in broken.resources if r["name"] == dependency]
    record["dependencies"] = [d for d in record["dependencies"] if d != urn]
    broken.__dict__.pop("by_urn", None)
    return broken


def test_fails_when_a_load_balancer_is_awaited_before_its_pool(plan_b):
    broken = _without_dependency(plan_b, "network-gpu-clustermesh-apiserver", "network-gpu-pool-internal")
    assert load_balancer_problems(broken, []) == [
        "Service kube-system/clustermesh-apiserver-vip on site-b-gpu: network-gpu-clustermesh-apiserver waits for its "
        "address, but the pool network-gpu-pool-internal is not created before it"
    ]


def test_every_object_waits_for_the_namespace_that_holds_it(plan):
    assert namespace_problems(plan) == []


def test_fails_when_an_object_does_not_wait_for_its_namespace(plan_b):
    broken = _without_dependency(plan_b, "storage-secret-polaris-token-broker", "storage-ns-polaris")
    assert namespace_problems(broken) == ["Secret polaris/polaris-token-broker on site-b-storage does not wait for its namespace"]
