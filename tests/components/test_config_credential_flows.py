"""Every cluster that receives S3 or Polaris credentials is a source of the matching flow (issue 15).

Each test starts from the smallest site (storage, compute, one gpu cluster) and changes one thing.
"""

from __future__ import annotations

from typing import Any

from components.config import credential_holders, parse_site
from fabctl.stackfile import SITE_KEY
from helpers import config_errors, render_config
from small_site import add_bucket, small_site


def with_gpu_train(raw: dict[str, Any], key: str = "gpu-train") -> dict[str, Any]:
    """The site with a training-only GPU cluster `key`, its ranges after the smallest site's three clusters."""
    raw["clusters"][key] = {
        "role": "gpu-train", "cluster_id": 4, "pod_cidr": "10.93.0.0/16", "node_cidr": "10.30.4.0/24",
        "api_server": "10.30.4.10", "bgp_asn": 65304, "bgp_peers": {"tor": {"address": "10.30.4.1", "asn": 65300}},
        "lb_pools": {"internal": {"cidrs": ["10.30.104.0/27"]}}, "clustermesh_vip": "10.30.104.2",
        "host_network_namespaces": ["gpu-operator", "nvidia-network-operator"],
    }
    raw["gpu"][key] = {"nodes": {f"{key}-trn-1": {"gpu_type": "h100", "gpus": 8, "pool": "training"}}, "system_nodes": [f"{key}-sys-1"]}
    return raw


def with_flows(raw: dict[str, Any], s3_from: list[str], polaris_from: list[str]) -> dict[str, Any]:
    """The site with its own flow table: S3 and Polaris from the given clusters to storage."""
    raw["flows"] = {
        "s3": {"from": s3_from, "to": ["storage"], "port": 9000, "to_namespace": "aistor"},
        "polaris": {"from": polaris_from, "to": ["storage"], "port": 8181, "to_namespace": "polaris"},
    }
    return raw


def test_passes_when_every_credential_holder_is_a_source_of_its_flows():
    raw = with_flows(with_gpu_train(small_site()), ["compute", "gpu", "gpu-train"], ["compute", "gpu", "gpu-train"])
    assert parse_site(raw).flows["s3"].sources == ["compute", "gpu", "gpu-train"]


def test_passes_with_the_default_flows():
    site = parse_site(with_gpu_train(small_site()))
    assert site.flow_table()["s3"].sources == ["compute", "gpu", "gpu-train"]


def test_passes_when_compute_runs_no_data_engine_and_is_left_out():
    raw = with_flows(small_site(), ["gpu"], ["gpu"])
    raw["compute"]["spark"]["enabled"] = False
    raw["compute"]["trino"] = {"enabled": False}
    raw["compute"]["starrocks"] = {"enabled": False}
    assert parse_site(raw).flows["polaris"].sources == ["gpu"]


def test_fails_when_a_gpu_train_cluster_is_left_out_of_the_s3_flow():
    raw = with_flows(with_gpu_train(small_site()), ["compute", "gpu"], ["compute", "gpu", "gpu-train"])
    assert config_errors(raw) == [
        "fab-platform:site.flows.s3.from: ['compute', 'gpu'] leaves out cluster 'gpu-train', whose team namespaces "
        "receive S3 credentials; add it"
    ]


def test_fails_when_a_gpu_train_cluster_is_left_out_of_the_polaris_flow():
    raw = with_flows(with_gpu_train(small_site()), ["compute", "gpu", "gpu-train"], ["compute", "gpu"])
    assert config_errors(raw) == [
        "fab-platform:site.flows.polaris.from: ['compute', 'gpu'] leaves out cluster 'gpu-train', whose team "
        "namespaces receive Polaris credentials; add it"
    ]


def test_fails_when_the_inference_cluster_is_left_out_of_the_s3_flow():
    raw = with_flows(small_site(), ["compute"], ["compute", "gpu"])
    assert config_errors(raw) == [
        "fab-platform:site.flows.s3.from: ['compute'] leaves out cluster 'gpu', whose inference namespace and team "
        "namespaces receive S3 credentials; add it"
    ]


def test_fails_when_compute_is_left_out_of_the_polaris_flow():
    raw = with_flows(small_site(), ["compute", "gpu"], ["gpu"])
    assert config_errors(raw) == [
        "fab-platform:site.flows.polaris.from: ['gpu'] leaves out cluster 'compute', whose spark, starrocks and trino "
        "namespaces and team namespaces receive Polaris credentials; add it"
    ]


def test_fails_when_compute_runs_one_data_engine_and_is_left_out():
    raw = with_flows(small_site(), ["gpu"], ["compute", "gpu"])
    raw["compute"]["spark"]["enabled"] = False
    raw["compute"]["starrocks"] = {"enabled": False}
    assert config_errors(raw) == [
        "fab-platform:site.flows.s3.from: ['gpu'] leaves out cluster 'compute', whose trino namespace receives S3 "
        "credentials; add it"
    ]


def test_fails_when_the_flow_table_has_no_s3_flow():
    raw = with_flows(small_site(), ["compute", "gpu"], ["compute", "gpu"])
    del raw["flows"]["s3"]
    assert config_errors(raw) == [
        "fab-platform:site.flows: has no 's3' flow, but clusters compute and gpu receive S3 credentials; add flows.s3 "
        "from them to the storage cluster"
    ]


def test_fails_only_on_the_unknown_cluster_when_a_flow_names_one():
    raw = with_flows(with_gpu_train(small_site()), ["compute", "gpu", "gpu-trian"], ["compute", "gpu", "gpu-train"])
    assert config_errors(raw) == [
        "fab-platform:site.flows.s3.from[2]: 'gpu-trian' is not a cluster of this site; known clusters: compute, gpu, "
        "gpu-train, storage, or world"
    ]


def test_storage_holds_replication_credentials_while_a_linked_consumer_takes_gold():
    raw = small_site()
    add_bucket(raw, "site-t-gold", "gold")
    raw["federation"] = {"consumers": {"site-x": {}}, "linked": ["site-x"], "ranges": {"site-x": ["10.200.0.0/16"]}}
    assert credential_holders(parse_site(raw))["s3"]["storage"] == ["polaris", "postgres-backup", "replication"]


def test_credential_holders_are_where_the_render_delivers_s3_and_polaris_secrets():
    raw = with_gpu_train(small_site())
    raw["compute"]["trino"] = {"enabled": False}
    plan = render_config("site-t", {SITE_KEY: raw})
    delivered: dict[str, dict[str, set[str]]] = {"s3": {}, "polaris": {}}
    for cluster, obj, _ in plan.manifests():
        engine = obj["metadata"].get("labels", {}).get("fab.internal/engine")
        flow = obj["metadata"]["name"].split("-", 1)[0]
        if obj["kind"] == "Secret" and engine and obj["metadata"]["name"] == f"{flow}-{engine}":
            delivered[flow].setdefault(cluster.removeprefix("site-t-"), set()).add(engine)
    assert delivered["s3"] and delivered["polaris"]
    assert credential_holders(parse_site(raw)) == {
        flow: {cluster: sorted(engines) for cluster, engines in sorted(by_cluster.items())} for flow, by_cluster in delivered.items()
    }
