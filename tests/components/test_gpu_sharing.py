"""GPU sharing on the notebooks pool (issue 20, item 3): the GPU Operator's device plugin time-slices those GPUs into
nvidia.com/gpu.shared, or its MIG manager splits them into nvidia.com/mig-<profile>, chosen per node by the labels the
pools' NodeFeatureRule sets; every other node keeps whole GPUs. The rules of `gpu.<cluster>.sharing`."""

from __future__ import annotations

import json
from typing import Any

from helpers import config_errors
from small_site import add_gpu_cluster, add_gpu_notebooks, small_site

from components.config import parse_site
from components.gpu import cluster_policy_spec, node_pools_rule_spec, sharing_configs

KEY = "fab-platform:site"
SHARING = f"{KEY}.gpu.gpu.sharing"


def shared(**sharing: Any) -> dict[str, Any]:
    site = small_site()
    add_gpu_notebooks(site, **sharing)
    return site


def mig(profile: str = "1g.10gb") -> dict[str, Any]:
    site = shared(mode="mig", mig_profile=profile)
    site["gpu"]["gpu"]["mig_strategy"] = "mixed"
    return site


def gpu_config(raw: dict[str, Any]):
    site = parse_site(raw)
    return site.gpu["gpu"], site.all_gpu_types()


def notebooks_rule(raw: dict[str, Any]) -> dict[str, Any]:
    site = parse_site(raw)
    spec = site.gpu["gpu"]
    rules = node_pools_rule_spec(spec, {node: site.node_pool("gpu", node) for node in spec.nodes})["rules"]
    (rule,) = [r for r in rules if r["labels"]["fab.internal/gpu-pool"] == "notebooks"]
    return rule


# Time-slicing --------------------------------------------------------------------------------------------------------

def test_time_slices_are_a_resource_of_their_own():
    spec, types = gpu_config(shared(replicas=3))
    notebooks = json.loads(sharing_configs(spec, types)["fab-device-plugin"]["notebooks"])
    assert notebooks["sharing"]["timeSlicing"] == {
        "renameByDefault": True, "failRequestsGreaterThanOne": True, "resources": [{"name": "nvidia.com/gpu", "replicas": 3}]}


def test_every_other_node_keeps_whole_gpus_by_default():
    spec, _ = gpu_config(shared())
    assert cluster_policy_spec(spec)["devicePlugin"]["config"] == {"name": "fab-device-plugin", "default": "whole"}


def test_the_notebooks_pool_is_labelled_for_the_shared_config():
    assert notebooks_rule(shared())["labels"]["nvidia.com/device-plugin.config"] == "notebooks"


def test_no_sharing_config_without_notebooks_nodes():
    spec, types = gpu_config(small_site())
    assert (sharing_configs(spec, types), "config" in cluster_policy_spec(spec)["devicePlugin"]) == ({}, False)


# MIG -----------------------------------------------------------------------------------------------------------------

def test_mig_splits_each_gpu_into_as_many_instances_as_it_holds():
    spec, types = gpu_config(mig("1g.20gb"))
    config = json.loads(sharing_configs(spec, types)["fab-mig-parted"]["config.yaml"])
    assert config["mig-configs"]["notebooks-h100"] == [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.20gb": 4}}]


def test_mig_leaves_every_other_node_disabled():
    spec, _ = gpu_config(mig())
    assert cluster_policy_spec(spec)["migManager"]["config"] == {"name": "fab-mig-parted", "default": "all-disabled"}


def test_the_notebooks_pool_is_labelled_for_its_mig_config():
    assert notebooks_rule(mig())["labels"]["nvidia.com/mig.config"] == "notebooks-h100"


def test_mig_instances_are_their_own_resource():
    assert parse_site(mig()).gpu["gpu"].sharing.resource() == "nvidia.com/mig-1g.10gb"


def test_fails_when_mig_sharing_keeps_the_single_strategy():
    site = mig()
    site["gpu"]["gpu"]["mig_strategy"] = "single"
    assert config_errors(site) == [
        (f"{KEY}.gpu.gpu.mig_strategy: 'single', but sharing.mode is mig: MIG instances must be their own resources "
        "(nvidia.com/mig-<profile>), never counted as whole GPUs, which takes mig_strategy mixed")
    ]


def test_fails_when_the_mig_profile_is_not_one_of_the_gpu_type():
    assert config_errors(mig("1g.18gb")) == [
        (f"{SHARING}.mig_profile: '1g.18gb' is not a MIG profile of h100 (NVIDIA-H100-80GB-HBM3, node gpu-nb-1); it offers "
        "1g.10gb, 1g.20gb, 2g.20gb, 3g.40gb, 4g.40gb, 7g.80gb")
    ]


def test_fails_when_mig_has_no_profile():
    site = mig()
    del site["gpu"]["gpu"]["sharing"]["mig_profile"]
    assert config_errors(site) == [f"{SHARING}.mig_profile: is required with mode mig: name the MIG profile notebooks get, such as 1g.18gb"]


def test_fails_when_the_gpu_type_has_no_known_mig_profiles():
    site = mig()
    site["gpu_types"] = {"l40s": {"memory_mib": 46068, "product": "NVIDIA-L40S"}}
    site["gpu"]["gpu"]["nodes"]["gpu-nb-1"]["gpu_type"] = "l40s"
    assert config_errors(site) == [
        (f"{KEY}.gpu.gpu.nodes.gpu-nb-1.gpu_type: 'l40s' (NVIDIA-L40S) has no MIG profiles the program knows "
        "(NVIDIA-H100-80GB-HBM3, NVIDIA-H200 have); use sharing.mode time-slicing on this cluster")
    ]


def test_fails_when_a_time_sliced_cluster_names_a_mig_profile():
    assert config_errors(shared(mig_profile="1g.10gb")) == [
        f"{SHARING}.mig_profile: '1g.10gb' is set but mode is time-slicing; remove it, or set mode: mig"
    ]


def test_fails_when_a_mig_quota_exceeds_the_instances():
    site = mig("3g.40gb")  # two instances per GPU: 16 on one node
    site["compute"]["jupyterhub"]["gpu_notebooks"]["team_quotas"]["yield"] = 17
    assert config_errors(site) == [
        (f"{KEY}.compute.jupyterhub.gpu_notebooks.team_quotas.yield: 17 notebooks is more than the notebooks pool of gpu "
        "holds (16: its GPUs times 3g.40gb instances); give at most 16")
    ]


def test_fails_when_a_training_only_cluster_shares_gpus():
    site = shared()
    add_gpu_cluster(site, "gpu-train")
    site["gpu"]["gpu-train"]["nodes"]["gpu-train-trn-1"]["pool"] = "notebooks"
    assert config_errors(site) == [
        (f"{KEY}.gpu.gpu-train.nodes.gpu-train-trn-1.pool: 'notebooks' on a gpu-train cluster; GPU notebooks run on a gpu "
        "cluster (gpu-train clusters train only): use pool training")
    ]
