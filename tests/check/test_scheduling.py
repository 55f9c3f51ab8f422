"""fabctl check, scheduling: every pod fits a declared node, node agents reach the nodes they serve.

GPU nodes are labelled and tainted by pool (NFD, from the plan's NodeFeatureRule) and offer GPUs and RDMA only
where the operators' device plugins run; a GPU cluster's system pods run on its declared system nodes.
"""

from __future__ import annotations

from components.config import parse_site
from fabctl.check.picture import Picture
from fabctl.check.scheduling import declared_nodes, fits, with_device_plugins
from fabctl.helm import ChartPackages, ChartRef, template
from fabctl.render import PROJECT_DIR
from helpers import config_errors
from small_site import small_site

POOL_LABEL = "fab.internal/gpu-pool"
POOL_TAINT = {"key": POOL_LABEL, "effect": "NoSchedule"}


def _nodes(small, cluster: str = "site-t-gpu"):
    picture = Picture(small.plan, small.site, small.releases, small.missing)
    return {n.name: n for n in with_device_plugins(picture, cluster, declared_nodes(picture)[cluster])}


def _vllm(small):
    (deployment,) = [d for d in small.plan.objects("Deployment", "site-t-gpu") if d["metadata"]["name"] == "vllm-qwen3-8b"]
    return deployment["spec"]["template"]["spec"]


def test_every_pod_of_the_smallest_site_has_a_node(small):
    assert small.lines("scheduling.fit") + small.lines("scheduling.node-agent") == []


def test_gpu_nodes_carry_their_pool_taint_and_offer_gpus_and_system_nodes_neither(small):
    nodes = _nodes(small)
    assert {name: (n.taints, dict(n.offers).get("nvidia.com/gpu", 0)) for name, n in nodes.items()} == {
        "gpu-inf-1": (({**POOL_TAINT, "value": "inference"},), 8),
        "gpu-trn-1": (({**POOL_TAINT, "value": "training"},), 8),
        "gpu-sys-1": ((), 0),
    }


def test_compute_pool_nodes_carry_their_pool_taint_and_other_nodes_stand_as_one(small):
    nodes = _nodes(small, "site-t-compute")
    assert {name: [t["value"] for t in n.taints] for name, n in nodes.items()} == {
        "compute-batch-1": ["batch"], "compute-interactive-1": ["interactive"], "(other compute nodes)": []
    }


def test_fails_when_a_gpu_cluster_declares_no_system_node():
    raw = small_site()
    raw["gpu"]["gpu"]["system_nodes"] = []
    assert config_errors(raw) == ["fab-platform:site.gpu.gpu.system_nodes: List should have at least 1 item after validation, not 0 (got [])"]


def test_fails_when_a_system_node_is_also_a_gpu_node():
    raw = small_site()
    raw["gpu"]["gpu"]["system_nodes"] = ["gpu-trn-1"]
    assert config_errors(raw) == [
        "fab-platform:site.gpu.gpu.system_nodes[0]: 'gpu-trn-1' is also a GPU node of gpu.gpu.nodes; system nodes are "
        "the untainted nodes without GPUs"
    ]


def test_fails_when_system_pods_have_only_gpu_nodes(small):
    raw = small_site()
    raw["gpu"]["gpu"]["system_nodes"] = ["gpu-sys-1"]
    site = parse_site(raw)
    small.site = site.model_copy(update={"gpu": {"gpu": site.gpu["gpu"].model_copy(update={"system_nodes": []})}})
    assert ("error [scheduling.fit] site-t-gpu Deployment kueue-system/kueue-controller-manager (training-gpu-kueue (Helm "
            "release kueue)): its pods fit no node (gpu-inf-1: taint fab.internal/gpu-pool=inference:NoSchedule not tolerated; "
            "gpu-trn-1: taint fab.internal/gpu-pool=training:NoSchedule not tolerated). Fix: match its tolerations, node "
            "selector and resources to a declared node pool") in small.lines("scheduling.fit")


def test_fails_when_a_model_server_does_not_tolerate_its_pool(small):
    _vllm(small)["tolerations"] = [t for t in _vllm(small)["tolerations"] if t.get("key") != POOL_LABEL]
    assert small.lines("scheduling.fit") == [
        "error [scheduling.fit] site-t-gpu Deployment inference/vllm-qwen3-8b (inference-vllm-qwen3-8b): its pods fit no node "
        "(gpu-inf-1: taint fab.internal/gpu-pool=inference:NoSchedule not tolerated; gpu-trn-1: taint "
        "fab.internal/gpu-pool=training:NoSchedule not tolerated; gpu-sys-1: nodeSelector fab.internal/gpu-pool=inference "
        "not matched). "
        "Fix: match its tolerations, node selector and resources to a declared node pool"
    ]


def test_fails_when_a_model_server_needs_more_gpus_than_a_node_has(small):
    (container,) = _vllm(small)["containers"]
    container["resources"]["limits"]["nvidia.com/gpu"] = "16"
    container["resources"]["requests"]["nvidia.com/gpu"] = "16"
    (finding,) = small.findings("scheduling.fit")
    assert "gpu-inf-1: needs nvidia.com/gpu: 16, offers 8" in finding.problem


def test_fails_when_gpus_are_requested_where_no_device_plugin_runs(small):
    (policy,) = small.plan.objects("ClusterPolicy", "site-t-gpu")
    policy["spec"]["daemonsets"]["tolerations"] = []
    lines = small.lines("scheduling.fit") + small.lines("scheduling.node-agent")
    assert [line.split(" (", 1)[0] for line in lines] == [
        "error [scheduling.fit] site-t-gpu Deployment inference/vllm-qwen3-8b",
        "error [scheduling.node-agent] site-t-gpu ClusterPolicy cluster-policy",
    ]


def test_fails_when_the_network_operator_operands_do_not_tolerate_the_pools(small):
    (policy,) = small.plan.objects("NicClusterPolicy", "site-t-gpu")
    del policy["spec"]["tolerations"]
    assert [line for line in small.lines("scheduling.node-agent")] == [
        "error [scheduling.node-agent] site-t-gpu NicClusterPolicy nic-cluster-policy (gpu-gpu-nic-cluster-policy): Network "
        "Operator operands (NicClusterPolicy) do not reach GPU nodes gpu-inf-1, gpu-trn-1 (gpu-inf-1: taint "
        "fab.internal/gpu-pool=inference:NoSchedule not tolerated; gpu-trn-1: taint fab.internal/gpu-pool=training:NoSchedule "
        "not tolerated). Fix: give the policy tolerations of both GPU pools (components.gpu.pool_tolerations)"
    ]


def test_fails_when_the_nfd_worker_does_not_tolerate_the_pools(small, chart_dir, helm):
    rendered = small.release("gpu-operator", "site-t-gpu")
    del rendered.release["inputs"]["values"]["node-feature-discovery"]["worker"]
    rendered.objects = template(rendered.release, ChartPackages(chart_dir).find(ChartRef.of(rendered.release)), helm, PROJECT_DIR)
    assert small.lines("scheduling.node-agent") == [
        "error [scheduling.node-agent] site-t-gpu DaemonSet gpu-operator/gpu-operator-node-feature-discovery-worker "
        "(gpu-gpu-gpu-operator (Helm release gpu-operator)): it does not reach nodes gpu-inf-1, gpu-trn-1 (gpu-inf-1: taint "
        "fab.internal/gpu-pool=inference:NoSchedule not tolerated; gpu-trn-1: taint fab.internal/gpu-pool=training:NoSchedule "
        "not tolerated). Fix: tolerate the taints of the nodes it must serve"
    ]


def test_a_pod_that_tolerates_a_pool_and_selects_it_fits_that_pool_only(small):
    pod = {"nodeSelector": {POOL_LABEL: "training"},
           "tolerations": [{"key": POOL_LABEL, "operator": "Equal", "value": "training", "effect": "NoSchedule"}]}
    assert sorted(name for name, node in _nodes(small).items() if fits(pod, node)) == ["gpu-trn-1"]


def test_fails_when_gpus_are_requested_on_compute(small):
    (job,) = small.plan.objects("Job", "site-t-compute")
    job["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = "1"
    (finding,) = small.findings("scheduling.fit")
    assert finding.problem == (
        "its pods fit no node (compute-batch-1: taint fab.internal/compute-pool=batch:NoSchedule not tolerated; "
        "compute-interactive-1: needs nvidia.com/gpu: 1, offers 0; (other compute nodes): nodeSelector "
        "fab.internal/compute-pool=interactive not matched)"
    )


def test_fails_when_a_resource_flavor_admits_to_no_gpu_node(small):
    flavor = next(o for o in small.plan.objects("ResourceFlavor", "site-t-gpu") if o["spec"].get("nodeLabels"))
    flavor["spec"]["nodeLabels"] = {POOL_LABEL: "trainig"}
    assert [f.problem.split(" (", 1)[0] for f in small.findings("scheduling.fit")] == ["it admits workloads to no GPU node"]


def _agent(**pod):
    return {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "agent", "namespace": "kube-system"},
            "spec": {"template": {"spec": {"containers": [{"name": "a", "image": "example/agent:1.0"}], **pod}}}}


def test_fails_when_a_node_agent_meant_for_every_node_misses_tainted_ones(small):
    small.release("cilium", "site-t-gpu").objects.append(_agent(nodeSelector={"kubernetes.io/os": "linux"}))
    assert [f.problem for f in small.findings("scheduling.node-agent")] == [
        "it does not reach nodes gpu-inf-1, gpu-trn-1 (gpu-inf-1: taint fab.internal/gpu-pool=inference:NoSchedule not "
        "tolerated; gpu-trn-1: taint fab.internal/gpu-pool=training:NoSchedule not tolerated)"
    ]


def test_a_node_agent_that_selects_some_nodes_notes_the_others(small):
    small.release("cilium", "site-t-gpu").objects.append(_agent(nodeSelector={"kubernetes.io/hostname": "gpu-sys-1"}))
    (finding,) = small.findings("scheduling.node-agent")
    assert (finding.severity, finding.problem) == ("note", "by its node selection it does not run on gpu-inf-1, gpu-trn-1")


def test_an_init_container_needs_its_gpus_alone_and_containers_theirs_together():
    from fabctl.check.scheduling import requested

    pod = {"initContainers": [{"resources": {"limits": {"nvidia.com/gpu": "4"}}}],
           "containers": [{"resources": {"limits": {"nvidia.com/gpu": "1"}}}, {"resources": {"limits": {"nvidia.com/gpu": "2"}}}]}
    assert requested(pod) == {"nvidia.com/gpu": 4}


def test_a_node_affinity_by_name_fits_only_the_named_node(small):
    pod = {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["gpu-sys-1"]}]}]}}}}
    assert sorted(name for name, node in _nodes(small).items() if fits(pod, node)) == ["gpu-sys-1"]
