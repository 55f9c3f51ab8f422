"""The InfiniBand rules: training nodes keep InfiniBand for NCCL only, at NCCL's own service level; the IPoIB network of
inference sits in a partition of its own and really reaches the object store. Each rule alone on hand-built objects,
then through the real analyzer on the full small site (small_site.full_site, which loads weights over InfiniBand),
changed as a careless edit of the program would change it."""

from __future__ import annotations

import copy
import dataclasses
import json
from typing import Any

import pytest
from policy_fixtures import SAFE, check, k8s, kube, pod
from pulumi_policy.proxy import UNKNOWN_STRING_VALUE
from rules.infiniband import (
    ipoib_not_in_training_namespaces,
    ipoib_partition_key,
    ipoib_weights_route,
    training_ib_nccl_only,
    training_nccl_service_level,
)

from fabctl.policy import analyze_in_process
from fabctl.render import Plan

GPU = "site-t-gpu"
POOL = "fab.internal/gpu-pool"


def ipoib_network(namespace: str = "inference", master: str | None = "ib0.8a01") -> dict:
    spec = {"networkNamespace": namespace, "ipam": json.dumps({"type": "nv-ipam", "poolName": "ipoib-weights"})}
    if master is not None:
        spec["master"] = master
    return k8s("IPoIBNetwork", "ipoib-weights", api="mellanox.com/v1alpha1", spec=spec)


def ip_pool(values: list[str] | None = None, exclusions: list[dict] | None = None) -> dict:
    spec: dict[str, Any] = {"subnet": "10.30.203.0/24", "perNodeBlockSize": 32}
    if values is not None:
        spec["nodeSelector"] = {"nodeSelectorTerms": [{"matchExpressions": [{"key": POOL, "operator": "In", "values": values}]}]}
    if exclusions is not None:
        spec["exclusions"] = exclusions
    return k8s("IPPool", "ipoib-weights", "nvidia-network-operator", api="nv-ipam.nvidia.com/v1alpha1", spec=spec)


def team_namespace(name: str = "team-yield") -> dict:
    return k8s("Namespace", name, labels={"fab.internal/team": "yield", "fab.internal/kueue-managed": "true"})


def nccl(level: Any = "0", namespace: str = "team-yield") -> dict:
    return k8s("ConfigMap", "nccl", namespace, data={} if level is None else {"NCCL_IB_SL": level})


def vllm(aliases: list[dict] | None) -> dict:
    spec: dict[str, Any] = {"containers": [SAFE]}
    if aliases is not None:
        spec["hostAliases"] = aliases
    deployment = pod("Deployment", "vllm-qwen3-8b", "inference", SAFE)
    deployment["spec"]["template"] = {"metadata": {"annotations": {"k8s.v1.cni.cncf.io/networks": "ipoib-weights@ib0"}}, "spec": spec}
    return deployment


S3_ALIAS = [{"ip": "10.30.203.250", "hostnames": ["s3.site-t.fab.internal"]}]
EXCLUDED = [{"startIP": "10.30.203.250", "endIP": "10.30.203.250"}]


def route_site(aliases: list[dict] | None, exclusions: list[dict] | None = EXCLUDED) -> list:
    return [kube(ipoib_network(), GPU, gpu=True), kube(ip_pool(["inference"], exclusions), GPU, gpu=True), kube(vllm(aliases), GPU, gpu=True)]


# fab-training-ib-nccl-only ---------------------------------------------------------------------

def test_an_ipoib_pool_of_inference_nodes_passes():
    assert check(training_ib_nccl_only, kube(ip_pool(["inference"]), GPU)) == []


def test_fails_when_training_nodes_get_ipoib_addresses():
    assert check(training_ib_nccl_only, kube(ip_pool(["inference", "training"]), GPU)) == [
        ("IPPool nvidia-network-operator/ipoib-weights on site-t-gpu hands IPoIB addresses to nodes outside the inference pool "
         "(nodeSelectorTerms[0] does not limit fab.internal/gpu-pool to inference); InfiniBand on training nodes carries NCCL "
         "only, so IPoIB addresses go to nodes with fab.internal/gpu-pool In [inference] only")
    ]


def test_fails_when_an_ipoib_pool_selects_every_node():
    assert check(training_ib_nccl_only, kube(ip_pool(None), GPU)) == [
        ("IPPool nvidia-network-operator/ipoib-weights on site-t-gpu has no nodeSelector, so it hands IPoIB addresses to every "
         "node, training nodes too; InfiniBand on training nodes carries NCCL only, so IPoIB addresses go to nodes with "
         "fab.internal/gpu-pool In [inference] only")
    ]


def test_fails_closed_when_an_ipoib_pools_node_selector_is_unknown():
    pool = ip_pool(["inference"])
    pool["spec"]["nodeSelector"]["nodeSelectorTerms"][0]["matchExpressions"][0]["key"] = UNKNOWN_STRING_VALUE
    assert check(training_ib_nccl_only, kube(pool, GPU)) == [
        ("IPPool nvidia-network-operator/ipoib-weights on site-t-gpu: .spec.nodeSelector.nodeSelectorTerms[0].matchExpressions[0].key "
         "can't be known during preview, and this rule decides on it, so it fails closed; compute the value in the program "
         "instead of from another resource's output")
    ]


# fab-ipoib-not-in-training-namespaces ----------------------------------------------------------

def test_an_ipoib_network_for_inference_passes():
    assert check(ipoib_not_in_training_namespaces, [kube(team_namespace(), GPU), kube(ipoib_network(), GPU)]) == []


def test_fails_when_an_ipoib_network_reaches_a_training_namespace():
    assert check(ipoib_not_in_training_namespaces, [kube(team_namespace(), GPU), kube(ipoib_network("team-yield"), GPU)]) == [
        ("IPoIBNetwork ipoib-weights on site-t-gpu is attached to namespace team-yield, whose jobs Kueue admits "
         "(fab.internal/kueue-managed=true); InfiniBand carries NCCL only for training, whose storage traffic stays on the "
         "Ethernet bond")
    ]


def test_a_training_namespace_of_another_cluster_is_not_this_networks():
    other = kube(team_namespace(), "site-t-gpu-train")
    assert check(ipoib_not_in_training_namespaces, [other, kube(ipoib_network("team-yield"), GPU)]) == []


# fab-ipoib-partition-key -----------------------------------------------------------------------

def test_an_ipoib_network_on_a_partition_passes():
    assert check(ipoib_partition_key, kube(ipoib_network(), GPU)) == []


@pytest.mark.parametrize(("master", "where"), [
    ("ib0", "ib0, an interface of the default partition"),
    ("ib0.ffff", "ib0.ffff, the default partition ffff"),
    (None, "no master interface, so the host's default-route interface"),
])
def test_fails_when_an_ipoib_network_is_outside_a_partition(master, where):
    assert check(ipoib_partition_key, kube(ipoib_network(master=master), GPU)) == [
        (f"IPoIBNetwork ipoib-weights on site-t-gpu sits on {where}, which every port of the fabric reaches; IPoIB is invisible "
         "to Cilium, so it sits on the child interface of its own partition (<interface>.<P_Key>, P_Key 0x8001-0xfffe, such as "
         "ib0.8a01)")
    ]


def test_fails_closed_when_an_ipoib_networks_interface_is_unknown():
    assert check(ipoib_partition_key, kube(ipoib_network(master=UNKNOWN_STRING_VALUE), GPU)) == [
        ("IPoIBNetwork ipoib-weights on site-t-gpu: .spec.master can't be known during preview, and this rule decides on it, "
         "so it fails closed; compute the value in the program instead of from another resource's output")
    ]


# fab-training-nccl-service-level -------------------------------------------------------------

def test_a_training_namespace_with_nccls_service_level_passes():
    assert check(training_nccl_service_level, [kube(team_namespace(), GPU, gpu=True), kube(nccl("3"), GPU, gpu=True)]) == []


def test_fails_when_a_training_namespace_has_no_nccl_settings():
    assert check(training_nccl_service_level, [kube(team_namespace(), GPU, gpu=True)]) == [
        ("Namespace team-yield on site-t-gpu admits training jobs (fab.internal/kueue-managed=true) but holds no ConfigMap nccl; "
         "training jobs load NCCL_IB_SL, NCCL's InfiniBand service level, from it")
    ]


def test_fails_when_the_nccl_settings_name_no_service_level():
    assert check(training_nccl_service_level, [kube(team_namespace(), GPU, gpu=True), kube(nccl(None), GPU, gpu=True)]) == [
        ("ConfigMap team-yield/nccl on site-t-gpu has no NCCL_IB_SL; NCCL's traffic needs its InfiniBand service level (0-15), "
         "apart from storage's")
    ]


def test_fails_when_nccls_service_level_is_not_one():
    assert check(training_nccl_service_level, [kube(team_namespace(), GPU, gpu=True), kube(nccl("16"), GPU, gpu=True)]) == [
        "ConfigMap team-yield/nccl on site-t-gpu sets NCCL_IB_SL to '16'; an InfiniBand service level is 0-15"
    ]


def test_a_multikueue_managers_namespaces_need_no_nccl_settings():
    assert check(training_nccl_service_level, [kube(team_namespace(), "site-t-compute")]) == []


# fab-ipoib-weights-route ---------------------------------------------------------------------

def test_pods_on_the_ipoib_network_that_reach_the_object_store_over_it_pass():
    assert check(ipoib_weights_route, route_site(S3_ALIAS)) == []


def test_fails_when_pods_on_the_ipoib_network_resolve_nothing_to_it():
    assert check(ipoib_weights_route, route_site(None)) == [
        ("Deployment inference/vllm-qwen3-8b on site-t-gpu attaches the IPoIB network ipoib-weights (10.30.203.0/24) but "
         "resolves no host to an address of it, so its weight sync still goes over the Ethernet S3 endpoint; map the S3 host "
         "name to the object store's IPoIB address (hostAliases)")
    ]


def test_fails_when_the_object_stores_ipoib_address_may_go_to_a_pod():
    assert check(ipoib_weights_route, route_site(S3_ALIAS, exclusions=None)) == [
        ("Deployment inference/vllm-qwen3-8b on site-t-gpu resolves s3.site-t.fab.internal to 10.30.203.250, which IPPool "
         "ipoib-weights may hand to a pod; exclude the object store's IPoIB address from the pool (spec.exclusions)")
    ]


def test_fails_closed_when_the_host_aliases_of_pods_on_the_ipoib_network_are_unknown():
    (message,) = check(ipoib_weights_route, route_site([{"ip": UNKNOWN_STRING_VALUE, "hostnames": ["s3.site-t.fab.internal"]}]))
    assert message == (
        "Deployment inference/vllm-qwen3-8b on site-t-gpu: .hostAliases[0].ip can't be known during preview, and this rule decides "
        "on it, so it fails closed; compute the value in the program instead of from another resource's output"
    )


def test_an_alias_outside_the_ipoib_network_does_not_route_over_it():
    ethernet = [{"ip": "10.30.101.10", "hostnames": ["s3.site-t.fab.internal"]}]
    assert len(check(ipoib_weights_route, route_site(ethernet))) == 1


# The real analyzer on the full small site ----------------------------------------------------

def violations(plan: Plan, edit: Any) -> list[tuple[str, str, str]]:
    resources = copy.deepcopy(plan.resources)
    edit(resources)
    found = analyze_in_process(dataclasses.replace(plan, resources=resources))
    return [(v.policy, v.level, v.message.splitlines()[-1]) for v in found]


def record(resources: list[dict], type_suffix: str, name: str) -> dict:
    (match,) = [r for r in resources if r["type"].endswith(type_suffix) and r["name"] == name]
    return match


def test_the_full_small_site_loads_weights_over_infiniband_and_passes(full_plan):
    assert full_plan.objects("IPoIBNetwork", GPU)
    assert [(v.policy, v.message) for v in analyze_in_process(full_plan)] == []


def test_fails_when_the_program_gives_training_nodes_ipoib_addresses(full_plan):
    def edit(rs):
        record(rs, ":IPPool", "gpu-gpu-ipoib-pool")["inputs"]["spec"]["nodeSelector"]["nodeSelectorTerms"][0][
            "matchExpressions"][0]["values"] = ["training"]
    assert violations(full_plan, edit) == [(
        "fab-training-ib-nccl-only", "mandatory",
        ("IPPool nvidia-network-operator/ipoib-weights on site-t-gpu hands IPoIB addresses to nodes outside the inference pool "
         "(nodeSelectorTerms[0] does not limit fab.internal/gpu-pool to inference); InfiniBand on training nodes carries NCCL "
         "only, so IPoIB addresses go to nodes with fab.internal/gpu-pool In [inference] only"),
    )]


def test_fails_when_the_program_attaches_the_ipoib_network_to_a_team(full_plan):
    def edit(rs):
        record(rs, ":IPoIBNetwork", "gpu-gpu-ipoib-network")["inputs"]["spec"]["networkNamespace"] = "team-fdc"
    assert violations(full_plan, edit) == [(
        "fab-ipoib-not-in-training-namespaces", "mandatory",
        ("IPoIBNetwork ipoib-weights on site-t-gpu is attached to namespace team-fdc, whose jobs Kueue admits "
         "(fab.internal/kueue-managed=true); InfiniBand carries NCCL only for training, whose storage traffic stays on the "
         "Ethernet bond"),
    )]


def test_fails_when_the_program_drops_the_partition(full_plan):
    def edit(rs):
        record(rs, ":IPoIBNetwork", "gpu-gpu-ipoib-network")["inputs"]["spec"]["master"] = "ib0"
    assert violations(full_plan, edit) == [(
        "fab-ipoib-partition-key", "mandatory",
        ("IPoIBNetwork ipoib-weights on site-t-gpu sits on ib0, an interface of the default partition, which every port of the "
         "fabric reaches; IPoIB is invisible to Cilium, so it sits on the child interface of its own partition "
         "(<interface>.<P_Key>, P_Key 0x8001-0xfffe, such as ib0.8a01)"),
    )]


def test_fails_when_the_program_drops_nccls_service_level(full_plan):
    def edit(rs):
        del record(rs, ":ConfigMap", "training-gpu-train-team-yield-nccl")["inputs"]["data"]["NCCL_IB_SL"]
    assert violations(full_plan, edit) == [(
        "fab-training-nccl-service-level", "mandatory",
        ("ConfigMap team-yield/nccl on site-t-gpu-train has no NCCL_IB_SL; NCCL's traffic needs its InfiniBand service level "
         "(0-15), apart from storage's"),
    )]


def test_fails_when_the_program_leaves_the_weight_sync_on_ethernet(full_plan):
    def edit(rs):
        del record(rs, ":Deployment", "inference-vllm-qwen3-8b")["inputs"]["spec"]["template"]["spec"]["hostAliases"]
    assert violations(full_plan, edit) == [(
        "fab-ipoib-weights-route", "mandatory",
        ("Deployment inference/vllm-qwen3-8b on site-t-gpu attaches the IPoIB network ipoib-weights (10.30.203.0/24) but "
         "resolves no host to an address of it, so its weight sync still goes over the Ethernet S3 endpoint; map the S3 host "
         "name to the object store's IPoIB address (hostAliases)"),
    )]
