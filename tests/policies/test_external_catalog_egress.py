"""fab-flow-direction on egress to external databases: Trino's pods alone may reach one, within the ranges and on the one
port its catalog declares (compute.trino.external_catalogs, read from the stack's config as the CLI hands it)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from policy_fixtures import check, k8s, options, provider
from pulumi_policy import PolicyResource
from rules._stack import DATABASE_PORTS
from rules.network import flow_direction
from small_site import small_site

from components.config.schema.compute import EXTERNAL_CONNECTORS
from fabctl.stackfile import SITE_KEY

NAMESPACE_LABEL = "k8s:io.kubernetes.pod.namespace"
COMPUTE = PolicyResource("fab:compute:ComputeCluster", {}, "urn:pulumi:s::p::fab:compute:ComputeCluster::compute", "compute",
                         options(), None, None, [], {})


def on_compute(obj: dict[str, Any]) -> PolicyResource:
    """An object of the compute cluster, under ComputeCluster (which gives the cluster its role)."""
    type_ = f"kubernetes:{obj['apiVersion']}:{obj['kind']}"
    return PolicyResource(type_, obj, f"urn:pulumi:s::p::{type_}::{obj['metadata']['name']}", obj["metadata"]["name"],
                          options(), provider("site-a-compute"), COMPUTE, [], {})


@pytest.fixture(autouse=True)
def stack(monkeypatch):
    """The smallest site with the ERP's Oracle database (172.20.8.0/28, 1521) as the stack's config (PULUMI_CONFIG)."""
    site = small_site()
    site["compute"] = {"trino": {"external_catalogs": {"erp": {
        "connector": "oracle", "host": "erp-db.corp.example", "cidrs": ["172.20.8.0/28"], "database": "ERP", "user": "ro"}}}}
    monkeypatch.setenv("PULUMI_CONFIG", json.dumps({SITE_KEY: json.dumps(site)}))


STORAGE_POOL = small_site()["clusters"]["storage"]["lb_pools"]["internal"]["cidrs"][0]
"""The storage cluster's internal VIP pool (S3's and Polaris's VIPs) in the smallest site."""


def _egress(namespace: str, ports: list[str], cidr: str = "172.20.8.0/28") -> Any:
    spec = {"endpointSelector": {"matchLabels": {NAMESPACE_LABEL: namespace}},
            "egress": [{"toCIDRSet": [{"cidr": cidr}],
                        "toPorts": [{"ports": [{"port": p, "protocol": "TCP"} for p in ports]}]}]}
    obj = k8s("CiliumClusterwideNetworkPolicy", "fab-flow-x", api="cilium.io/v2", labels={"fab.internal/rule": "flow"}, spec=spec)
    return [on_compute(k8s("Namespace", "spark")), on_compute(obj)]


def test_the_pack_admits_trinos_egress_to_a_database():
    assert check(flow_direction, _egress("trino", ["1521"])) == []


def test_fails_when_another_namespace_opens_egress_to_a_database():
    assert check(flow_direction, _egress("spark", ["1521"])) == [
        ("CiliumClusterwideNetworkPolicy fab-flow-x on site-a-compute (compute) lets its pods reach addresses outside the "
        "cluster on port 1521, which is not a flow of the design's table (to API servers: 6443 from compute)")
    ]


def test_fails_when_trinos_egress_opens_more_than_one_port():
    assert check(flow_direction, _egress("trino", ["1521", "22"])) == [
        ("CiliumClusterwideNetworkPolicy fab-flow-x on site-a-compute (compute) lets Trino's pods reach 172.20.8.0/28 on "
        "1521/TCP, 22/TCP, which is not an external catalog's database (compute.trino.external_catalogs: erp: "
        "172.20.8.0/28 on 1521), nor an internal VIP pool or federated peer's range of the stack on a port of the flow "
        "table")
    ]


def test_fails_when_trinos_egress_opens_another_port():
    assert check(flow_direction, _egress("trino", ["5432"])) == [
        ("CiliumClusterwideNetworkPolicy fab-flow-x on site-a-compute (compute) lets Trino's pods reach 172.20.8.0/28 on "
        "5432/TCP, which is not an external catalog's database (compute.trino.external_catalogs: erp: 172.20.8.0/28 on 1521), nor an internal VIP pool or federated peer's range of the stack on a port of the flow "
        "table")
    ]


def test_fails_when_trinos_egress_widens_the_range():
    assert check(flow_direction, _egress("trino", ["1521"], cidr="172.20.0.0/16")) == [
        ("CiliumClusterwideNetworkPolicy fab-flow-x on site-a-compute (compute) lets Trino's pods reach 172.20.0.0/16 on "
        "1521/TCP, which is not an external catalog's database (compute.trino.external_catalogs: erp: 172.20.8.0/28 on 1521), nor an internal VIP pool or federated peer's range of the stack on a port of the flow "
        "table")
    ]


def test_the_pack_knows_each_connectors_default_port():
    assert DATABASE_PORTS == EXTERNAL_CONNECTORS


def test_the_pack_admits_trinos_egress_to_a_vip_pool_of_the_site_on_a_flow_port():
    assert check(flow_direction, _egress("trino", ["9000"], cidr=STORAGE_POOL)) == []


def test_fails_when_trinos_egress_reaches_a_vip_pool_on_another_port():
    assert check(flow_direction, _egress("trino", ["22"], cidr=STORAGE_POOL)) == [
        (f"CiliumClusterwideNetworkPolicy fab-flow-x on site-a-compute (compute) lets Trino's pods reach {STORAGE_POOL} on "
        "22/TCP, which is not an external catalog's database (compute.trino.external_catalogs: erp: 172.20.8.0/28 on 1521), "
        "nor an internal VIP pool or federated peer's range of the stack on a port of the flow table")
    ]


def _egress_entry(entry: dict[str, Any]) -> Any:
    spec = {"endpointSelector": {"matchLabels": {NAMESPACE_LABEL: "trino"}}, "egress": [entry]}
    obj = k8s("CiliumClusterwideNetworkPolicy", "fab-egress-x", api="cilium.io/v2", labels={"fab.internal/rule": "egress"}, spec=spec)
    return [on_compute(obj)]


def _https(*names: dict[str, str]) -> dict[str, Any]:
    return {"toFQDNs": list(names), "toPorts": [{"ports": [{"port": "443", "protocol": "TCP"}]}]}


def test_the_pack_admits_trinos_egress_to_the_sites_keycloak_by_name():
    assert check(flow_direction, _egress_entry(_https({"matchName": "keycloak.site-t.fab.internal"}))) == []


def test_fails_when_trinos_egress_reaches_another_name():
    assert check(flow_direction, _egress_entry(_https({"matchPattern": "*"}))) == [
        ("CiliumClusterwideNetworkPolicy fab-egress-x on site-a-compute (compute) lets Trino's pods reach * on 443: outside "
         "the site they may reach only an external catalog's database, by its ranges, and the site's Keycloak "
         "(keycloak.site-t.fab.internal on 443), by name")
    ]


def test_fails_when_trinos_egress_reaches_the_world_entity():
    assert check(flow_direction, _egress_entry({"toEntities": ["cluster", "world"]})) == [
        ("CiliumClusterwideNetworkPolicy fab-egress-x on site-a-compute (compute) lets Trino's pods reach the entities world: "
         "outside the site they may reach only an external catalog's database, by its ranges, and the site's Keycloak "
         "(keycloak.site-t.fab.internal on 443), by name")
    ]
