"""Every pod of a GPU cluster has a node, and every node agent reaches every GPU node (fabctl.scheduling).

GPU nodes are labelled and tainted by pool (NFD, from the plan's NodeFeatureRule); the system pods of
the cluster (Kueue, Envoy Gateway, Cilium's operator, Hubble and ClusterMesh API server, the
operators' controllers) do not tolerate those taints and run on the declared system nodes.
"""

from __future__ import annotations

import copy


from components.config import parse_site
from fabctl.helm import ChartPackages, ChartRef, RenderedRelease, template
from fabctl.render import PROJECT_DIR
from fabctl.scheduling import fits, gpu_cluster_nodes, scheduling_problems
from helpers import config_errors, site_raw


def site(stack: str):
    return parse_site(site_raw(stack))


def test_every_pod_of_a_gpu_cluster_has_a_node(plan, releases_of):
    done, _ = releases_of(plan.stack)
    assert gpu_cluster_nodes(plan, site(plan.stack)), "the site has no GPU cluster"
    assert scheduling_problems(plan, site(plan.stack), done) == []


def test_gpu_nodes_carry_their_pool_taint_and_system_nodes_none(plan_b):
    nodes = {n.name: n.taints for n in gpu_cluster_nodes(plan_b, site("site-b"))["site-b-gpu"]}
    assert nodes == {
        "gpu-b-inf-01": ({"key": "fab.internal/gpu-pool", "value": "inference", "effect": "NoSchedule"},),
        "gpu-b-inf-02": ({"key": "fab.internal/gpu-pool", "value": "inference", "effect": "NoSchedule"},),
        "gpu-b-trn-01": ({"key": "fab.internal/gpu-pool", "value": "training", "effect": "NoSchedule"},),
        "gpu-b-trn-02": ({"key": "fab.internal/gpu-pool", "value": "training", "effect": "NoSchedule"},),
        "gpu-b-sys-01": (),
        "gpu-b-sys-02": (),
    }


def test_fails_when_a_gpu_cluster_declares_no_system_node():
    raw = site_raw("site-b")
    raw["gpu"]["gpu"]["system_nodes"] = []
    assert config_errors(raw) == ["fab-platform:site.gpu.gpu.system_nodes: List should have at least 1 item after validation, not 0 (got [])"]


def test_fails_when_a_system_node_is_also_a_gpu_node():
    raw = site_raw("site-b")
    raw["gpu"]["gpu"]["system_nodes"] = ["gpu-b-trn-01"]
    assert config_errors(raw) == [
        "fab-platform:site.gpu.gpu.system_nodes[0]: 'gpu-b-trn-01' is also a GPU node of gpu.gpu.nodes; system nodes are "
        "the untainted nodes without GPUs"
    ]


def test_fails_when_system_pods_have_only_gpu_nodes(plan_b, releases_of):
    done, _ = releases_of("site-b")
    spec = site("site-b")
    without = spec.model_copy(update={"gpu": {"gpu": spec.gpu["gpu"].model_copy(update={"system_nodes": []})}})
    problems = scheduling_problems(plan_b, without, done)
    assert ("Deployment kueue-system/kueue-controller-manager (Helm release kueue) on site-b-gpu fits no node "
            "(nodes: gpu-b-inf-01, gpu-b-inf-02, gpu-b-trn-01, gpu-b-trn-02)") in problems


def test_fails_when_the_network_operator_operands_do_not_tolerate_the_pools(plan_b):
    broken = copy.deepcopy(plan_b)
    (policy,) = broken.objects("NicClusterPolicy", "site-b-gpu")
    del policy["spec"]["tolerations"]
    assert scheduling_problems(broken, site("site-b"), []) == [
        "Network Operator operands (NicClusterPolicy) on site-b-gpu does not reach GPU nodes gpu-b-inf-01, gpu-b-inf-02, "
        "gpu-b-trn-01, gpu-b-trn-02"
    ]


def test_fails_when_the_nfd_worker_does_not_tolerate_the_pools(plan_b, chart_dir, helm):
    broken = copy.deepcopy(plan_b)
    (release,) = [r for r in broken.of_type("kubernetes:helm.sh/v3:Release") if r["name"] == "gpu-gpu-gpu-operator"]
    del release["inputs"]["values"]["node-feature-discovery"]["worker"]
    objects = template(release, ChartPackages(chart_dir).find(ChartRef.of(release)), helm, PROJECT_DIR)
    rendered = RenderedRelease(release, "site-b-gpu", ChartRef.of(release), objects)
    assert scheduling_problems(broken, site("site-b"), [rendered]) == [
        "DaemonSet gpu-operator/gpu-operator-node-feature-discovery-worker (Helm release gpu-operator) on site-b-gpu does "
        "not reach GPU nodes gpu-b-inf-01, gpu-b-inf-02, gpu-b-trn-01, gpu-b-trn-02"
    ]


def test_a_pod_that_tolerates_a_pool_and_selects_it_fits_that_pool_only(plan_b):
    nodes = {n.name: n for n in gpu_cluster_nodes(plan_b, site("site-b"))["site-b-gpu"]}
    pod = {"nodeSelector": {"fab.internal/gpu-pool": "training"},
           "tolerations": [{"key": "fab.internal/gpu-pool", "operator": "Equal", "value": "training", "effect": "NoSchedule"}]}
    assert sorted(name for name, node in nodes.items() if fits(pod, node)) == ["gpu-b-trn-01", "gpu-b-trn-02"]
