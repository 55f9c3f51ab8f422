"""InfiniBand on GPU clusters: weights load over Ethernet S3 by default; over IPoIB only on the inference cluster, in the
configured partition, reaching the object store at its IPoIB address; NCCL's service level reaches every training
namespace, apart from storage's (DESIGN section 2: training nodes keep InfiniBand for NCCL only)."""

from __future__ import annotations

import yaml
from helpers import config_errors, render_small
from small_site import IPOIB_RANGE, S3_IPOIB_ADDRESS, add_weights_over_ib, small_site

from components.config import parse_site
from components.gpu import infiniband_contract, nccl_env

INFINIBAND = "fab-platform:site.gpu.gpu.infiniband"


def ib_site(**infiniband) -> dict:
    """The smallest site, loading weights over InfiniBand, with `infiniband` changed."""
    site = small_site()
    add_weights_over_ib(site)
    site["gpu"]["gpu"]["infiniband"].update(infiniband)
    return site


def vllm_pod(plan) -> dict:
    (deployment,) = [d for d in plan.objects("Deployment", "site-t-gpu") if d["metadata"]["name"] == "vllm-qwen3-8b"]
    return deployment["spec"]["template"]


# Default: Ethernet S3 over TCP -------------------------------------------------------------------

def test_weights_load_over_the_ethernet_s3_endpoint_by_default(small_plan):
    pod = vllm_pod(small_plan)
    assert "hostAliases" not in pod["spec"]
    assert "k8s.v1.cni.cncf.io/networks" not in (pod["metadata"].get("annotations") or {})
    assert small_plan.objects("IPoIBNetwork", "site-t-gpu") == small_plan.objects("IPPool", "site-t-gpu") == []


# Over InfiniBand: it routes ------------------------------------------------------------------------

def test_over_infiniband_the_weight_sync_resolves_the_s3_host_to_the_object_stores_ipoib_address():
    pod = vllm_pod(render_small(ib_site()))
    assert pod["metadata"]["annotations"] == {"k8s.v1.cni.cncf.io/networks": "ipoib-weights@ib0"}
    assert pod["spec"]["hostAliases"] == [{"ip": S3_IPOIB_ADDRESS, "hostnames": ["s3.site-t.fab.internal"]}]


def test_the_object_stores_ipoib_address_is_never_handed_to_a_pod():
    (pool,) = render_small(ib_site()).objects("IPPool", "site-t-gpu")
    assert pool["spec"]["subnet"] == IPOIB_RANGE
    assert pool["spec"]["exclusions"] == [{"startIP": S3_IPOIB_ADDRESS, "endIP": S3_IPOIB_ADDRESS}]


def test_the_ipoib_network_sits_on_the_configured_partitions_child_interface():
    (network,) = render_small(ib_site(ipoib_partition_key="0x0123", ipoib_master="ib1")).objects("IPoIBNetwork", "site-t-gpu")
    assert network["spec"]["master"] == "ib1.8123"


def test_the_stack_states_the_storage_partition_the_subnet_manager_must_hold():
    plan = render_small(ib_site(nccl_service_level=2, storage_qos_service_level=5))
    assert plan.outputs["infiniband"] == {"gpu": {
        "nccl_service_level": 2, "nccl_traffic_class": 0,
        "storage_partition": {"partition_key": "0x0a01", "interface": "ib0.8a01", "service_level": 5,
                              "ipoib_range": IPOIB_RANGE, "s3_ipoib_address": S3_IPOIB_ADDRESS},
    }}


def test_the_stack_states_storages_bandwidth_share_as_opensm_qos():
    site = parse_site(ib_site(nccl_service_level=0, storage_qos_service_level=5, storage_bandwidth_percent=30))
    partition = infiniband_contract(site.gpu["gpu"], ipoib=True)["storage_partition"]
    assert (partition["bandwidth_percent"], partition["opensm_qos"]) == (30, (
        "qos TRUE\nqos_max_vls 2\nqos_sl2vl 0,0,0,0,0,1,0,0,0,0,0,0,0,0,0,0\nqos_vlarb_high 0:0,1:0\n"
        "qos_vlarb_low 0:140,1:60\n"))


def test_without_a_bandwidth_share_the_subnet_managers_arbitration_stands():
    partition = infiniband_contract(parse_site(ib_site()).gpu["gpu"], ipoib=True)["storage_partition"]
    assert "bandwidth_percent" not in partition and "opensm_qos" not in partition


# NCCL's service level ----------------------------------------------------------------------------

def test_every_team_namespace_of_every_gpu_cluster_gets_its_clusters_nccl_service_level():
    site = small_site(gpu_clusters=2, teams=("fdc", "yield"), multikueue=True)
    site["gpu"]["gpu-train"]["infiniband"] = {"nccl_service_level": 3}
    plan = render_small(site)
    found = {(cluster, obj["metadata"]["namespace"]): obj["data"] for cluster, obj, _ in plan.manifests()
             if obj["kind"] == "ConfigMap" and obj["metadata"]["name"] == "nccl"}
    assert found == {
        ("site-t-gpu", "team-fdc"): {"NCCL_IB_SL": "0", "NCCL_IB_TC": "0"},
        ("site-t-gpu", "team-yield"): {"NCCL_IB_SL": "0", "NCCL_IB_TC": "0"},
        ("site-t-gpu-train", "team-fdc"): {"NCCL_IB_SL": "3", "NCCL_IB_TC": "0"},
        ("site-t-gpu-train", "team-yield"): {"NCCL_IB_SL": "3", "NCCL_IB_TC": "0"},
    }


def test_training_jobs_load_the_nccl_settings_of_the_cluster_that_runs_them(small_plan):
    job = yaml.safe_load(small_plan.outputs["training"]["example_job"])
    (container,) = job["spec"]["template"]["spec"]["containers"]
    assert {"configMapRef": {"name": "nccl"}} in container["envFrom"]


def test_nccl_settings_carry_the_configured_traffic_class():
    site = small_site()
    site["gpu"]["gpu"]["infiniband"] = {"nccl_service_level": 3, "nccl_traffic_class": 106}
    config = parse_site(site).gpu["gpu"]
    assert nccl_env(config) == {"NCCL_IB_SL": "3", "NCCL_IB_TC": "106"}
    assert infiniband_contract(config, ipoib=False) == {"nccl_service_level": 3, "nccl_traffic_class": 106}


def test_fails_when_nccls_traffic_class_is_not_one():
    site = small_site()
    site["gpu"]["gpu"]["infiniband"] = {"nccl_traffic_class": 256}
    assert config_errors(site) == [f"{INFINIBAND}.nccl_traffic_class: Input should be less than or equal to 255 (got 256)"]


def test_fails_when_a_bandwidth_share_is_given_without_weights_over_infiniband():
    site = small_site()
    site["gpu"]["gpu"]["infiniband"] = {"storage_bandwidth_percent": 40}
    assert config_errors(site) == [
        (f"{INFINIBAND}.storage_bandwidth_percent: is set but inference_weights_over_ib is false, so nothing uses it (weights "
         "load from the Ethernet S3 endpoint); remove it, or turn inference_weights_over_ib on")
    ]


def test_fails_when_storage_would_take_the_whole_port():
    assert config_errors(ib_site(storage_bandwidth_percent=100)) == [
        f"{INFINIBAND}.storage_bandwidth_percent: Input should be less than or equal to 99 (got 100)"
    ]


# Config: refused settings --------------------------------------------------------------------------

def test_fails_when_an_ipoib_setting_is_given_without_weights_over_infiniband():
    site = small_site()
    site["gpu"]["gpu"]["infiniband"] = {"storage_qos_service_level": 3}
    assert config_errors(site) == [
        (f"{INFINIBAND}.storage_qos_service_level: is set but inference_weights_over_ib is false, so nothing uses it (weights "
         "load from the Ethernet S3 endpoint); remove it, or turn inference_weights_over_ib on")
    ]


def test_fails_when_weights_over_infiniband_has_no_ipoib_address_of_the_object_store():
    site = ib_site()
    del site["gpu"]["gpu"]["infiniband"]["s3_ipoib_address"]
    assert config_errors(site) == [
        (f"{INFINIBAND}.s3_ipoib_address: is required while inference_weights_over_ib is true: the weight sync reaches the "
         "object store at its IPoIB address, or it still goes over Ethernet")
    ]


def test_fails_when_weights_over_infiniband_has_no_partition():
    site = ib_site()
    del site["gpu"]["gpu"]["infiniband"]["ipoib_partition_key"]
    assert config_errors(site) == [
        (f"{INFINIBAND}.ipoib_partition_key: is required while inference_weights_over_ib is true: IPoIB is invisible to "
         "Cilium, so the network stays in a partition of its own (0x0001-0x7ffe)")
    ]


def test_fails_when_the_object_stores_ipoib_address_is_outside_the_ipoib_range():
    assert config_errors(ib_site(s3_ipoib_address="10.30.204.1")) == [
        (f"{INFINIBAND}.s3_ipoib_address: 10.30.204.1 is not in ipoib_range (10.30.203.0/24): the weight sync reaches the "
         "object store over the IPoIB network, so its address is one of that network's")
    ]


def test_fails_when_the_object_stores_ipoib_address_is_the_ranges_network_address():
    assert config_errors(ib_site(s3_ipoib_address="10.30.203.0")) == [
        (f"{INFINIBAND}.s3_ipoib_address: 10.30.203.0 is the network address of ipoib_range (10.30.203.0/24); give the "
         "object store's host address")
    ]


def test_fails_when_storage_and_nccl_share_a_service_level():
    assert config_errors(ib_site(nccl_service_level=4, storage_qos_service_level=4)) == [
        (f"{INFINIBAND}.storage_qos_service_level: 4 is also nccl_service_level: storage and NCCL traffic need different "
         "service levels, so that the subnet manager keeps storage off NCCL's virtual lane")
    ]


def test_fails_when_a_training_only_cluster_loads_weights_over_infiniband():
    site = small_site(gpu_clusters=2)
    site["gpu"]["gpu-train"]["infiniband"] = {"inference_weights_over_ib": True}
    assert config_errors(site) == [
        ("fab-platform:site.gpu.gpu-train.infiniband.inference_weights_over_ib: is true on gpu-train, which does not serve "
         "inference (inference.cluster is 'gpu'): training nodes keep InfiniBand for NCCL only; set it on the inference "
         "cluster or remove it")
    ]


def test_fails_when_weights_over_infiniband_meet_an_installed_object_store():
    site = ib_site()
    site["storage"]["object_store"] = {"install": True}
    assert config_errors(site) == [
        (f"{INFINIBAND}.inference_weights_over_ib: is true but storage.object_store.install is true: an object store this "
         "program installs answers S3 on the storage cluster's network only, never on IPoIB, so the weights would still load "
         "over Ethernet; keep it false")
    ]


def test_fails_when_the_partition_key_is_the_default_partition():
    assert config_errors(ib_site(ipoib_partition_key="0x7fff")) == [
        (f"{INFINIBAND}.ipoib_partition_key: 0x7fff is the default partition, which every port of the fabric is a member of; "
         "give the storage partition's key, 0x0001-0x7ffe (got '0x7fff')")
    ]


def test_fails_when_the_partition_key_carries_the_membership_bit():
    assert config_errors(ib_site(ipoib_partition_key="0x8a01")) == [
        (f"{INFINIBAND}.ipoib_partition_key: 0x8a01 has the full-membership bit 0x8000 set; give the partition's key without "
         "it, 0x0a01 (the hosts join as full members) (got '0x8a01')")
    ]


def test_fails_when_the_partition_key_is_not_hex():
    assert config_errors(ib_site(ipoib_partition_key="a01")) == [
        f"{INFINIBAND}.ipoib_partition_key: must be a partition key in hex, such as 0x0a01 (got 'a01')"
    ]


def test_fails_when_the_partition_key_is_zero():
    assert config_errors(ib_site(ipoib_partition_key=0)) == [
        f"{INFINIBAND}.ipoib_partition_key: 0x0000 is not a partition key; give the storage partition's key, 0x0001-0x7ffe (got 0)"
    ]


def test_fails_when_nccls_service_level_is_not_one():
    assert config_errors(ib_site(nccl_service_level=16)) == [
        f"{INFINIBAND}.nccl_service_level: Input should be less than or equal to 15 (got 16)"
    ]


def test_a_partition_key_may_be_written_as_a_number():
    assert parse_site(ib_site(ipoib_partition_key=0x0A01)).gpu["gpu"].infiniband.partition_interface == "ib0.8a01"


def test_the_infiniband_objects_validate_strictly_against_their_schemas(crd_dir):
    from schemas import CrdSchemas, schema_errors

    crds, plan = CrdSchemas(crd_dir), render_small(ib_site())
    objects = [(cluster, obj) for cluster, obj, _ in plan.manifests()
               if obj["kind"] in ("IPPool", "IPoIBNetwork", "Deployment", "ConfigMap") and cluster == "site-t-gpu"]
    assert {obj["kind"] for _, obj in objects} == {"IPPool", "IPoIBNetwork", "Deployment", "ConfigMap"}
    assert {f"{obj['kind']}/{obj['metadata']['name']}": errs for _, obj in objects if (errs := schema_errors(obj, crds))} == {}


def test_fails_when_the_ipoib_port_is_already_a_partitions_child_interface():
    assert config_errors(ib_site(ipoib_master="ib0.8a01")) == [
        (f"{INFINIBAND}.ipoib_master: must be the host's IPoIB port interface, such as ib0: at most 10 letters, digits, '-' or "
         "'_', and no '.', since the program adds the partition's '.<P_Key>' and an interface name has at most 15 characters "
         "(got 'ib0.8a01')")
    ]
