"""SiteConfig: each rule rejects bad input with one exact line naming the key path, the value and the fix.

Each test starts from the smallest site (small_site.py) and changes one thing; the stack files are only parsed."""

from __future__ import annotations

import pytest

from components.config import ConfigError, parse_site
from helpers import site_raw
from small_site import small_site


def errors_of(raw) -> list[str]:
    with pytest.raises(ConfigError) as info:
        parse_site(raw)
    return info.value.lines


@pytest.mark.parametrize("stack", ["site-a", "site-b"])
def test_stack_files_parse(stack):
    assert parse_site(site_raw(stack)).name == stack


def test_a_site_without_a_flow_table_gets_the_design_flows():
    site = parse_site(small_site())
    assert site.flows is None
    table = site.flow_table()
    assert {name: (f.sources, f.to, f.port, f.target) for name, f in table.items()} == {
        "s3": (["compute", "gpu"], ["storage"], 9000, "pods"),
        "polaris": (["compute", "gpu"], ["storage"], 8181, "pods"),
        "inference": (["compute"], ["gpu"], 443, "pods"),
        "multikueue": (["compute"], ["gpu"], 6443, "kube-apiserver"),
        "compute-ingress": (["world"], ["compute"], 443, "pods"),
        "ray-yield": (["compute"], ["gpu"], 10001, "pods"),
    }


def test_the_default_flows_include_every_gpu_cluster():
    table = parse_site(small_site(gpu_clusters=2)).flow_table()
    assert {name: table[name].to for name in ("multikueue", "inference")} == {"multikueue": ["gpu", "gpu-train"], "inference": ["gpu"]}
    assert {name: table[name].sources for name in ("s3", "polaris")} == {"s3": ["compute", "gpu", "gpu-train"], "polaris": ["compute", "gpu", "gpu-train"]}


def test_kubeconfig_context_defaults_to_the_cluster_name():
    site = parse_site(small_site())
    assert site.kubeconfig_context("gpu") == "site-t-gpu"


def test_kubeconfig_context_can_be_set():
    raw = small_site()
    raw["clusters"]["gpu"]["kubeconfig_context"] = "admin@gpu-t"
    assert parse_site(raw).kubeconfig_context("gpu") == "admin@gpu-t"


def test_fails_when_pod_cidrs_overlap():
    raw = small_site()
    raw["clusters"]["gpu"]["pod_cidr"] = "10.91.0.0/16"
    assert errors_of(raw) == [
        "fab-platform:site.clusters.gpu.pod_cidr: 10.91.0.0/16 overlaps clusters.compute.pod_cidr (10.91.0.0/16); "
        "every pod, node and pool range of a site must be disjoint"
    ]


def test_fails_when_a_pool_overlaps_another_clusters_node_cidr():
    raw = small_site()
    raw["clusters"]["compute"]["lb_pools"]["internal"]["cidrs"] = ["10.30.1.128/27"]
    raw["clusters"]["compute"]["clustermesh_vip"] = "10.30.1.130"
    assert errors_of(raw) == [
        "fab-platform:site.clusters.compute.lb_pools.internal.cidrs[0]: 10.30.1.128/27 overlaps clusters.storage.node_cidr "
        "(10.30.1.0/24); every pod, node and pool range of a site must be disjoint"
    ]


def test_fails_when_cluster_ids_repeat():
    raw = small_site()
    raw["clusters"]["gpu"]["cluster_id"] = 1
    assert errors_of(raw) == [
        "fab-platform:site.clusters.gpu.cluster_id: 1 is already the cluster_id of clusters.storage; "
        "every cluster of a ClusterMesh needs its own id 1-255"
    ]


def test_fails_when_bgp_asns_repeat():
    raw = small_site()
    raw["clusters"]["compute"]["bgp_asn"] = 65301
    assert errors_of(raw) == [
        "fab-platform:site.clusters.compute.bgp_asn: 65301 is already the bgp_asn of clusters.storage; "
        "give every cluster its own ASN so that routes between clusters are not dropped as loops"
    ]


@pytest.mark.parametrize("cluster_id", [0, 256])
def test_fails_when_a_cluster_id_is_out_of_range(cluster_id):
    raw = small_site()
    raw["clusters"]["gpu"]["cluster_id"] = cluster_id
    bound = "greater than or equal to 1" if cluster_id == 0 else "less than or equal to 255"
    assert errors_of(raw) == [f"fab-platform:site.clusters.gpu.cluster_id: Input should be {bound} (got {cluster_id})"]


def test_fails_when_a_gpu_cluster_has_an_external_pool():
    raw = small_site()
    raw["clusters"]["gpu"]["lb_pools"]["public"] = {"cidrs": ["198.51.100.0/28"], "visibility": "external"}
    raw["clusters"]["gpu"]["bgp_peers"]["edge"] = {"address": "10.30.3.254", "asn": 65399, "kind": "public"}
    assert errors_of(raw) == [
        "fab-platform:site.clusters.gpu.lb_pools.public.visibility: 'external' is not allowed on gpu cluster gpu: "
        "nothing on a GPU cluster is exposed outside the site; use visibility 'internal' with an RFC1918 range",
        "fab-platform:site.clusters.gpu.bgp_peers.edge.kind: 'public' is not allowed on gpu cluster gpu: GPU clusters "
        "peer only with private ToRs; use kind 'private'",
    ]


def test_fails_when_a_gpu_train_cluster_has_a_public_peer():
    raw = small_site(gpu_clusters=2)
    raw["clusters"]["gpu-train"]["bgp_peers"]["tor"]["kind"] = "public"
    assert errors_of(raw) == [
        "fab-platform:site.clusters.gpu-train.bgp_peers.tor.kind: 'public' is not allowed on gpu-train cluster "
        "gpu-train: GPU clusters peer only with private ToRs; use kind 'private'"
    ]


def test_fails_when_an_internal_pool_is_outside_rfc1918():
    raw = small_site()
    raw["clusters"]["storage"]["lb_pools"]["vendor"] = {"cidrs": ["100.64.0.0/28"]}
    assert errors_of(raw) == [
        "fab-platform:site.clusters.storage.lb_pools.vendor.cidrs[0]: 100.64.0.0/28 is not in RFC1918 (10.0.0.0/8, "
        "172.16.0.0/12, 192.168.0.0/16) but the pool is internal; use a private range or make the pool external"
    ]


def test_fails_when_an_external_pool_has_no_public_peer():
    raw = small_site()
    raw["clusters"]["storage"]["lb_pools"]["external"] = {"cidrs": ["198.51.100.0/28"], "visibility": "external"}
    assert errors_of(raw) == [
        "fab-platform:site.clusters.storage.lb_pools.external.visibility: 'external' pool 'external' would never be "
        "advertised: clusters.storage has no bgp peer of kind 'public'; add one or make the pool internal"
    ]


def test_fails_when_the_clustermesh_vip_is_outside_its_pool():
    raw = small_site()
    raw["clusters"]["gpu"]["clustermesh_vip"] = "10.30.102.9"
    assert errors_of(raw) == [
        "fab-platform:site.clusters.gpu.clustermesh_vip: 10.30.102.9 is not in pool 'internal' (10.30.103.0/27); "
        "pick an address of that pool"
    ]


def test_fails_when_the_clustermesh_pool_does_not_exist():
    raw = small_site()
    raw["clusters"]["gpu"]["clustermesh_pool"] = "mesh"
    assert errors_of(raw) == ["fab-platform:site.clusters.gpu.clustermesh_pool: 'mesh' is not a pool of clusters.gpu; pools: internal"]


def test_fails_when_the_clustermesh_pool_is_external():
    raw = small_site()
    raw["clusters"]["compute"]["clustermesh_pool"] = "external"
    assert errors_of(raw) == [
        "fab-platform:site.clusters.compute.clustermesh_pool: 'external' is an external pool; the ClusterMesh API "
        "server needs an internal one"
    ]


def test_fails_when_a_flow_names_an_unknown_source_cluster():
    raw = small_site(flow_table=True)
    raw["flows"]["s3"]["from"].append("gpu-b")
    assert errors_of(raw) == [
        "fab-platform:site.flows.s3.from[2]: 'gpu-b' is not a cluster of this site; known clusters: compute, gpu, storage, or world"
    ]


def test_fails_when_a_flow_names_an_unknown_destination_cluster():
    raw = small_site(flow_table=True)
    raw["flows"]["polaris"]["to"] = ["storage-2"]
    assert errors_of(raw) == [
        "fab-platform:site.flows.polaris.to[0]: 'storage-2' is not a cluster of this site; known clusters: compute, gpu, storage"
    ]


def test_fails_when_a_flow_stays_inside_one_cluster():
    raw = small_site(flow_table=True)
    raw["flows"]["s3"]["to"] = ["gpu"]
    assert errors_of(raw) == [
        "fab-platform:site.flows.s3.to[0]: 'gpu' is also a source; a flow crosses clusters, traffic inside a "
        "cluster is not a flow"
    ]


def test_fails_when_the_world_flows_to_a_gpu_cluster():
    raw = small_site(flow_table=True)
    raw["flows"]["inference"]["from"] = ["world"]
    assert errors_of(raw) == [
        "fab-platform:site.flows.inference.to[0]: 'gpu' is a GPU cluster and the flow comes from world; nothing on a "
        "GPU cluster is exposed outside the site: route outside users through the compute cluster's ingress"
    ]


@pytest.mark.parametrize(("port", "bound"), [(0, "greater than or equal to 1"), (70000, "less than or equal to 65535")])
def test_fails_when_a_port_is_out_of_range(port, bound):
    raw = small_site(flow_table=True)
    raw["flows"]["polaris"]["port"] = port
    assert errors_of(raw) == [f"fab-platform:site.flows.polaris.port: Input should be {bound} (got {port})"]


def test_fails_when_a_pods_flow_has_no_destination_namespace():
    raw = small_site(flow_table=True)
    del raw["flows"]["polaris"]["to_namespace"]
    assert errors_of(raw) == [
        "fab-platform:site.flows.polaris.to_namespace: is required for a pods flow: name the namespace of the "
        "destination pods"
    ]


def test_fails_when_a_kube_apiserver_flow_has_no_source_namespace():
    raw = small_site(flow_table=True)
    del raw["flows"]["multikueue"]["from_namespace"]
    assert errors_of(raw) == [
        "fab-platform:site.flows.multikueue.from_namespace: is required for a kube-apiserver flow: name the "
        "namespace of the client pods"
    ]


def test_fails_when_a_kube_apiserver_flow_port_is_not_the_api_server_port():
    raw = small_site(gpu_clusters=2, flow_table=True)
    raw["clusters"]["gpu-train"]["api_server_port"] = 443
    assert errors_of(raw) == [
        "fab-platform:site.flows.multikueue.port: 6443 is not the API server port of clusters.gpu-train (443); "
        "a kube-apiserver flow uses the destination's api_server_port"
    ]


def test_fails_when_a_site_has_two_storage_clusters():
    raw = small_site()
    raw["clusters"]["compute"]["role"] = "storage"
    assert "fab-platform:site.clusters: a site needs exactly one storage cluster, found compute, storage" in errors_of(raw)


def test_fails_when_a_site_has_no_compute_cluster():
    raw = small_site()
    raw["clusters"]["compute"]["role"] = "storage"
    assert "fab-platform:site.clusters: a site needs exactly one compute cluster, found none" in errors_of(raw)


def test_fails_when_a_cluster_name_is_too_long_for_cilium():
    raw = small_site()
    raw["clusters"]["compute-and-analytics-plat"] = raw["clusters"].pop("compute")
    assert errors_of(raw) == [
        "fab-platform:site.clusters.compute-and-analytics-plat: cluster name 'site-t-compute-and-analytics-plat' "
        "(site name + '-' + key) has 33 characters; Cilium allows at most 32: use a shorter key"
    ]


def test_fails_when_a_role_is_unknown():
    raw = small_site()
    raw["clusters"]["gpu"]["role"] = "inference"
    assert errors_of(raw) == [
        "fab-platform:site.clusters.gpu.role: Input should be 'storage', 'compute', 'gpu' or 'gpu-train' (got 'inference')"
    ]


def test_fails_when_a_cidr_is_malformed():
    raw = small_site()
    raw["clusters"]["gpu"]["pod_cidr"] = "10.92.0.0/33"
    assert errors_of(raw) == [
        "fab-platform:site.clusters.gpu.pod_cidr: must be an IPv4 range such as 10.64.0.0/16 (got '10.92.0.0/33')"
    ]


def test_fails_when_a_key_is_unknown():
    raw = small_site()
    raw["clusters"]["gpu"]["bgp_peer"] = {}
    assert errors_of(raw) == [
        "fab-platform:site.clusters.gpu.bgp_peer: unknown key; allowed keys: api_server, api_server_port, bgp_asn, "
        "bgp_peers, cilium, cluster_id, clustermesh_pool, clustermesh_vip, host_network_namespaces, kubeconfig_context, "
        "lb_pools, node_cidr, pod_cidr, role"
    ]


def test_fails_when_a_required_key_is_missing():
    raw = small_site()
    del raw["clusters"]["gpu"]["bgp_asn"]
    assert errors_of(raw) == ["fab-platform:site.clusters.gpu.bgp_asn: required key is missing"]


def test_fails_when_a_name_is_not_a_dns_label():
    raw = small_site()
    raw["clusters"]["gpu"]["lb_pools"]["Internal_VIPs"] = raw["clusters"]["gpu"]["lb_pools"].pop("internal")
    raw["clusters"]["gpu"]["clustermesh_pool"] = "Internal_VIPs"
    assert errors_of(raw) == [
        "fab-platform:site.clusters.gpu.lb_pools.Internal_VIPs: the key must be a DNS label: lowercase letters, digits "
        "and '-', starting and ending with a letter or digit, at most 63 characters (got 'Internal_VIPs')",
        "fab-platform:site.clusters.gpu.clustermesh_pool: must be a DNS label: lowercase letters, digits and '-', "
        "starting and ending with a letter or digit, at most 63 characters (got 'Internal_VIPs')",
    ]


def test_fails_when_the_site_is_not_set():
    assert errors_of(None) == ["fab-platform:site: not set; add it to Pulumi.<stack>.yaml (see docs/configuration.md)"]


def test_fails_when_the_site_is_not_a_mapping():
    assert errors_of(["site-t"]) == ["fab-platform:site: must be a mapping of site settings (got list)"]


def test_fails_when_a_range_is_not_written_as_text():
    raw = small_site()
    raw["clusters"]["gpu"]["pod_cidr"] = 1
    assert errors_of(raw) == [
        "fab-platform:site.clusters.gpu.pod_cidr: must be written as a string such as '10.0.0.0/16' or '10.0.0.1', "
        "not a int (got 1)"
    ]


def test_fails_when_a_cluster_id_is_quoted():
    raw = small_site()
    raw["clusters"]["gpu"]["cluster_id"] = "3"
    assert errors_of(raw) == ["fab-platform:site.clusters.gpu.cluster_id: Input should be a valid integer (got '3')"]


def test_fails_when_a_flag_is_not_a_boolean():
    raw = small_site()
    raw["clusters"]["gpu"]["cilium"] = {"managed": "no"}
    assert errors_of(raw) == ["fab-platform:site.clusters.gpu.cilium.managed: Input should be a valid boolean (got 'no')"]


def test_fails_when_a_range_has_host_bits_set():
    raw = small_site()
    raw["clusters"]["gpu"]["pod_cidr"] = "10.92.0.1/16"
    assert errors_of(raw) == [
        "fab-platform:site.clusters.gpu.pod_cidr: has host bits set; the range is 10.92.0.0/16 (got '10.92.0.1/16')"
    ]


def test_fails_when_the_object_stores_table_catalog_is_enabled():
    raw = small_site()
    raw["storage"]["object_store"] = {"table_catalog": True}
    assert errors_of(raw) == [
        "fab-platform:site.storage.object_store.table_catalog: true is not allowed: Polaris is the only Iceberg "
        "catalog authority, so AIStor's table catalog stays off"
    ]


def test_fails_when_a_contract_class_has_two_buckets():
    raw = small_site()
    raw["storage"]["buckets"]["site-t-warehouse-2"] = {"class": "warehouse"}
    assert errors_of(raw) == [
        "fab-platform:site.storage.buckets: a site needs exactly one bucket of class warehouse, found site-t-warehouse, "
        "site-t-warehouse-2"
    ]


def test_fails_when_a_warehouse_bucket_expires_objects():
    raw = small_site()
    raw["storage"]["buckets"]["site-t-warehouse"]["retention_days"] = 30
    assert errors_of(raw) == [
        "fab-platform:site.storage.buckets.site-t-warehouse.retention_days: is not allowed on class warehouse: Iceberg "
        "removes table files through snapshot expiry; lifecycle expiry would corrupt tables"
    ]


def test_fails_when_an_unversioned_bucket_expires_noncurrent_versions():
    raw = small_site()
    raw["storage"]["buckets"]["site-t-olap"]["noncurrent_expiry_days"] = 7
    assert errors_of(raw) == [
        "fab-platform:site.storage.buckets.site-t-olap.noncurrent_expiry_days: is only for versioned buckets (classes "
        "checkpoints, models, warehouse); class olap is not versioned"
    ]


def test_fails_when_postgres_backups_go_to_a_bucket_of_another_class():
    raw = small_site()
    raw["storage"]["polaris"]["postgres"]["backup_bucket"] = "site-t-olap"
    assert errors_of(raw) == [
        "fab-platform:site.storage.polaris.postgres.backup_bucket: 'site-t-olap' has class olap; Postgres backups go "
        "to a bucket of class backups"
    ]


def test_fails_when_the_backup_bucket_does_not_exist():
    raw = small_site()
    raw["storage"]["polaris"]["postgres"]["backup_bucket"] = "site-t-backups"
    assert errors_of(raw) == [
        "fab-platform:site.storage.polaris.postgres.backup_bucket: 'site-t-backups' is not a bucket of storage.buckets"
    ]


def test_fails_when_the_internal_s3_vip_is_outside_its_pool():
    raw = small_site()
    raw["storage"]["s3"]["internal_vip"] = "10.30.102.10"
    assert errors_of(raw) == [
        "fab-platform:site.storage.s3.internal_vip: 10.30.102.10 is not in pool 'internal' (10.30.101.0/27); pick an "
        "address of that pool"
    ]


def test_fails_when_the_external_s3_endpoint_uses_an_internal_pool():
    raw = small_site()
    raw["storage"]["s3"].update({"external_pool": "internal", "external_vip": "10.30.101.20"})
    assert errors_of(raw) == [
        "fab-platform:site.storage.s3.external_pool: 'internal' is an internal pool; this endpoint needs an external one"
    ]


def test_fails_when_two_endpoints_share_a_vip():
    raw = small_site()
    raw["storage"]["polaris"]["vip"] = "10.30.101.10"
    assert errors_of(raw) == [
        "fab-platform:site.storage.polaris.vip: 10.30.101.10 is already used by storage.s3.internal_vip; every "
        "endpoint needs its own address"
    ]


def test_fails_when_a_bucket_name_is_not_valid_for_s3():
    raw = small_site()
    raw["storage"]["buckets"]["Gold_Tables"] = {"class": "raw"}
    assert errors_of(raw) == [
        "fab-platform:site.storage.buckets.Gold_Tables: the key must be an S3 bucket name: 3-63 lowercase letters, "
        "digits and '-', starting and ending with a letter or digit (got 'Gold_Tables')"
    ]


def test_fails_when_a_bucket_class_is_unknown():
    raw = small_site()
    raw["storage"]["buckets"]["site-t-olap"]["class"] = "silver"
    assert errors_of(raw) == [
        "fab-platform:site.storage.buckets.site-t-olap.class: Input should be 'raw', 'warehouse', 'datasets', "
        "'models', 'checkpoints', 'gold', 'backups' or 'olap' (got 'silver')"
    ]


def test_fails_when_a_model_does_not_fit_the_inference_gpus():
    raw = small_site()
    raw["inference"]["models"]["llama-405b"] = {
        "source": "meta/llama-3.1-405b/", "params_billion": 405, "layers": 126, "kv_heads": 8, "head_dim": 128,
        "max_context": 131072, "concurrent_sequences": 16,
    }
    assert errors_of(raw) == [
        "fab-platform:site.inference.models: model llama-405b does not fit: it needs 102.2 GiB per GPU (weights and one "
        "131072-token sequence at tensor parallel 8, the largest group within a node of 8 GPUs) but a H100 offers "
        "69.7 GiB (gpu_memory_utilization 0.9, 2 GiB reserved); use more GPUs per node, a smaller dtype or a shorter "
        "max_context"
    ]


def test_fails_when_the_models_need_more_gpus_than_the_inference_pool():
    raw = small_site()
    raw["inference"]["models"]["qwen3-8b"]["concurrent_sequences"] = 4000
    assert errors_of(raw) == [
        "fab-platform:site.inference.models: the models need 21 GPUs (qwen3-8b 21 x TP1 = 21) but inference pool "
        "gpu/inference has 8 (1 node of 8 GPUs); add inference nodes or serve fewer replicas"
    ]


def test_fails_when_inference_nodes_differ():
    raw = small_site()
    raw["gpu"]["gpu"]["nodes"]["gpu-inf-2"] = {"gpu_type": "h200", "gpus": 8, "pool": "inference"}
    assert errors_of(raw) == [
        "fab-platform:site.gpu.gpu.nodes: inference nodes must share one GPU type and count, found h100 x8, h200 x8"
    ]


def test_fails_when_inference_runs_on_a_non_gpu_cluster():
    raw = small_site()
    raw["inference"]["cluster"] = "compute"
    assert errors_of(raw) == ["fab-platform:site.inference.cluster: 'compute' is not a gpu cluster of this site; gpu clusters: gpu"]


def test_fails_when_a_node_has_an_unknown_gpu_type():
    raw = small_site()
    raw["gpu"]["gpu"]["nodes"]["gpu-trn-1"]["gpu_type"] = "b200"
    assert errors_of(raw) == [
        "fab-platform:site.gpu.gpu.nodes.gpu-trn-1.gpu_type: 'b200' is not a GPU type; known: h100, h200 (add it under gpu_types)"
    ]


def test_a_gpu_type_can_be_added():
    raw = small_site()
    raw["gpu_types"] = {"b200": {"memory_mib": 183359, "product": "NVIDIA-B200"}}
    raw["gpu"]["gpu"]["nodes"]["gpu-trn-1"]["gpu_type"] = "b200"
    assert parse_site(raw).all_gpu_types()["b200"].memory_mib == 183359


def test_fails_when_a_gpu_cluster_has_no_gpu_section():
    raw = small_site(gpu_clusters=2)
    del raw["gpu"]["gpu-train"]
    assert "fab-platform:site.gpu: cluster 'gpu-train' has role gpu-train but no gpu section: list its GPU nodes" in errors_of(raw)


def test_fails_when_a_gpu_section_names_a_compute_cluster():
    raw = small_site()
    raw["gpu"]["compute"] = {"nodes": {"cpu-01": {"gpu_type": "h100", "gpus": 1, "pool": "training"}}, "system_nodes": ["cpu-02"]}
    assert errors_of(raw) == [
        "fab-platform:site.gpu.compute: 'compute' is a compute cluster; gpu sections are for gpu and gpu-train clusters: gpu"
    ]


def test_fails_when_a_training_only_cluster_has_inference_nodes():
    raw = small_site(gpu_clusters=2)
    raw["gpu"]["gpu-train"]["nodes"]["gpu-train-trn-1"]["pool"] = "inference"
    assert (
        "fab-platform:site.gpu.gpu-train.nodes.gpu-train-trn-1.pool: 'inference' is not allowed on gpu-train cluster gpu-train: "
        "it trains only; serve from a gpu cluster"
    ) in errors_of(raw)


def test_fails_when_a_rate_limit_names_an_unknown_team():
    raw = small_site()
    raw["inference"]["team_requests_per_minute"] = {"litho": 100}
    assert errors_of(raw) == ["fab-platform:site.inference.team_requests_per_minute.litho: 'litho' is not a team; teams: yield"]


def test_fails_when_the_gateway_vip_is_outside_its_pool():
    raw = small_site()
    raw["inference"]["gateway"]["vip"] = "10.30.101.20"
    assert errors_of(raw) == [
        "fab-platform:site.inference.gateway.vip: 10.30.101.20 is not in pool 'internal' (10.30.103.0/27); pick an address of that pool"
    ]


def test_fails_when_the_mean_context_exceeds_the_max():
    raw = small_site()
    raw["inference"]["models"]["qwen3-8b"]["mean_context"] = 65536
    assert errors_of(raw) == ["fab-platform:site.inference.models.qwen3-8b.mean_context: 65536 is longer than max_context 32768"]


def test_fails_when_the_world_flows_to_s3_without_a_reason():
    raw = small_site(flow_table=True, external_s3=True)
    del raw["flows"]["s3-external"]["world_reason"]
    assert errors_of(raw) == [
        "fab-platform:site.flows.s3-external.from[0]: 'world' would let every address outside the site reach the object "
        "store's S3 endpoint, and the MinIO admin API on its port; admit the clients' ranges in from_cidrs instead, or say "
        "why in world_reason"
    ]


def test_fails_when_a_world_reason_is_given_to_a_flow_not_from_the_world():
    raw = small_site(flow_table=True, external_s3=True)
    raw["flows"]["s3-external"]["from"] = []
    raw["flows"]["s3-external"]["from_cidrs"] = ["192.0.2.16/28"]
    assert errors_of(raw) == ["fab-platform:site.flows.s3-external.world_reason: is only for flows from 'world'; remove it"]


def test_ranges_outside_the_site_reach_s3_without_a_reason():
    raw = small_site(flow_table=True, external_s3=True)
    flow = raw["flows"]["s3-external"]
    del flow["world_reason"]
    flow["from"], flow["from_cidrs"] = [], ["192.0.2.16/28"]
    assert parse_site(raw).flows["s3-external"].from_cidrs


def test_fails_when_the_clusters_of_a_site_do_not_encrypt_alike():
    raw = small_site()
    raw["clusters"]["gpu"]["cilium"] = {"encryption": "off"}
    assert errors_of(raw) == [
        "fab-platform:site.clusters.gpu.cilium.encryption: 'off' differs from clusters.storage.cilium.encryption "
        "('wireguard'); every cluster of the site encrypts alike, or the traffic between them is not encrypted: use "
        "'wireguard' on all of them"
    ]
