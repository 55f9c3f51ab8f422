"""The observability section's cross-field checks (where the site's series are kept, node-exporter's host access) and the
flow `metrics` it adds to the site's flow table."""

from __future__ import annotations

import pytest
from helpers import config_errors
from small_site import RECEIVER_VIP, STORE, add_gpu_cluster, add_observability, small_site, write_flow_table

from components.config import parse_site
from components.config.checks.observability import receiver_pool
from components.config.load import required_secrets

KEY = "fab-platform:site"


def observed(metrics: str = "in-cluster", **settings) -> dict:
    site = small_site()
    add_observability(site, metrics, **settings)
    return site


def test_an_in_cluster_site_passes():
    assert parse_site(observed()).observability.receiver_vip is not None


def test_a_remote_write_site_passes():
    assert parse_site(observed("remote-write")).observability.remote_write is not None


def test_fails_when_the_receiver_vip_is_missing_while_in_cluster():
    site = observed()
    del site["observability"]["receiver_vip"]
    assert config_errors(site) == [(
        f"{KEY}.observability.receiver_vip: is required while metrics is in-cluster: the other clusters' Prometheus write to "
        "it; pick a free address of an internal pool of clusters.compute (internal: 10.30.102.0/27)"
    )]


def test_fails_when_the_receiver_vip_is_outside_computes_internal_pools():
    assert config_errors(observed(receiver_vip="203.0.113.21")) == [(
        f"{KEY}.observability.receiver_vip: 203.0.113.21 is not in an internal pool of clusters.compute (internal: "
        "10.30.102.0/27); pick a free address of one"
    )]


def test_fails_when_the_receiver_vip_is_another_endpoints():
    assert config_errors(observed(receiver_vip="10.30.102.2")) == [(
        f"{KEY}.observability.receiver_vip: 10.30.102.2 is already used by clusters.compute.clustermesh_vip; every endpoint "
        "needs its own address"
    )]


def test_fails_when_the_receiver_vip_is_its_pools_broadcast_address():
    assert config_errors(observed(receiver_vip="10.30.102.31")) == [(
        f"{KEY}.observability.receiver_vip: 10.30.102.31 is the broadcast address of the pool block 10.30.102.0/27, which "
        "routers drop or broadcast; pick a host address of it"
    )]


def test_fails_when_a_store_is_named_while_in_cluster():
    assert config_errors(observed(remote_write=dict(STORE))) == [(
        f"{KEY}.observability.remote_write: is set but metrics is in-cluster (compute's Prometheus keeps the site's series); "
        "remove it, or set metrics to remote-write"
    )]


def test_fails_when_the_store_is_missing_while_remote_write():
    site = observed("remote-write")
    del site["observability"]["remote_write"]
    assert config_errors(site) == [(
        f"{KEY}.observability.remote_write: is required while metrics is remote-write: name the site's metrics store (url, "
        "query_url)"
    )]


def test_fails_when_a_receiver_vip_is_set_while_remote_write():
    assert config_errors(observed("remote-write", receiver_vip=RECEIVER_VIP)) == [(
        f"{KEY}.observability.receiver_vip: {RECEIVER_VIP} is set but metrics is remote-write (every Prometheus writes to "
        "remote_write); remove it, or set metrics to in-cluster"
    )]


def test_fails_when_a_cluster_does_not_allow_list_node_exporter():
    site = observed()
    site["clusters"]["storage"]["host_network_namespaces"] = []
    assert config_errors(site) == [(
        f"{KEY}.clusters.storage.host_network_namespaces: [] lacks node-exporter, where node-exporter reads the node (host "
        "network, host PID, its root filesystem) on every cluster while observability is set; the policy pack allows host "
        "access only in the namespaces listed here, so add it"
    )]


def test_the_stores_password_is_required_only_with_a_user():
    with_user = parse_site(observed("remote-write", remote_write={**STORE, "username": "site-t"}))
    assert required_secrets(with_user) == {"metricsRemoteWritePassword": "observability.remote_write.username is set"}
    assert required_secrets(parse_site(observed("remote-write"))) == {}


def test_the_receiver_pool_is_the_internal_pool_holding_the_vip():
    assert receiver_pool(parse_site(observed())) == "internal"


def test_the_metrics_flow_joins_the_flow_table_while_in_cluster():
    site = observed()
    add_gpu_cluster(site, "gpu-train")
    flow = parse_site(site).flow_table()["metrics"]
    assert (flow.sources, flow.to, flow.port, flow.to_namespace, flow.from_namespace, flow.to_labels) == (
        ["gpu", "gpu-train", "storage"], ["compute"], 9090, "monitoring", "monitoring", {"app.kubernetes.io/name": "prometheus"})


@pytest.mark.parametrize("site", [small_site(), observed("remote-write")], ids=["no-observability", "remote-write"])
def test_the_metrics_flow_is_not_in_the_table_otherwise(site):
    assert "metrics" not in parse_site(site).flow_table()


def test_a_stacks_own_metrics_flow_passes_the_flow_rules():
    site = observed()
    write_flow_table(site)
    site["flows"]["metrics"] = {"from": ["gpu", "storage"], "to": ["compute"], "port": 9090, "to_namespace": "monitoring"}
    assert parse_site(site).flow_table()["metrics"].port == 9090


def test_fails_when_a_stacks_metrics_flow_opens_another_port():
    site = observed()
    write_flow_table(site)
    site["flows"]["metrics"] = {"from": ["gpu", "storage"], "to": ["compute"], "port": 9091, "to_namespace": "monitoring"}
    assert config_errors(site) == [(
        f"{KEY}.flows.metrics.port: 9091 is not the port of compute's Prometheus (its remote-write receiver) (9090, its HTTP "
        "port); clients dial 9090"
    )]
