"""fab-flow-direction on egress to external databases: Trino's pods alone may reach one, on the one port its catalog
declares (compute.trino.external_catalogs)."""

from __future__ import annotations

from typing import Any

from policy_fixtures import check, k8s, options, provider
from pulumi_policy import PolicyResource
from rules.network import flow_direction

NAMESPACE_LABEL = "k8s:io.kubernetes.pod.namespace"
COMPUTE = PolicyResource("fab:compute:ComputeCluster", {}, "urn:pulumi:s::p::fab:compute:ComputeCluster::compute", "compute",
                         options(), None, None, [], {})


def on_compute(obj: dict[str, Any]) -> PolicyResource:
    """An object of the compute cluster, under ComputeCluster (which gives the cluster its role)."""
    type_ = f"kubernetes:{obj['apiVersion']}:{obj['kind']}"
    return PolicyResource(type_, obj, f"urn:pulumi:s::p::{type_}::{obj['metadata']['name']}", obj["metadata"]["name"],
                          options(), provider("site-a-compute"), COMPUTE, [], {})


def _egress(namespace: str, ports: list[str]) -> Any:
    spec = {"endpointSelector": {"matchLabels": {NAMESPACE_LABEL: namespace}},
            "egress": [{"toCIDRSet": [{"cidr": "172.20.8.0/28"}],
                        "toPorts": [{"ports": [{"port": p, "protocol": "TCP"} for p in ports]}]}]}
    obj = k8s("CiliumClusterwideNetworkPolicy", "fab-flow-x", api="cilium.io/v2", labels={"fab.internal/rule": "flow"}, spec=spec)
    return [on_compute(k8s("Namespace", "spark")), on_compute(obj)]


def test_the_pack_admits_trinos_egress_to_a_database():
    assert check(flow_direction, _egress("trino", ["1521"])) == []


def test_fails_when_another_namespace_opens_egress_to_a_database():
    assert check(flow_direction, _egress("spark", ["1521"])) == [
        "CiliumClusterwideNetworkPolicy fab-flow-x on site-a-compute (compute) lets its pods reach addresses outside the "
        "cluster on port 1521, which is not a flow of the design's table (to API servers: 6443 from compute)"
    ]


def test_fails_when_trinos_egress_opens_more_than_one_port():
    assert len(check(flow_direction, _egress("trino", ["1521", "22"]))) == 2
