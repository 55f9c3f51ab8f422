"""Where pods can run: every pod of a GPU cluster has a node, read from a plan and the site's declared nodes.

A GPU cluster's nodes are known: its GPU nodes, labelled and tainted by pool through the plan's
NodeFeatureRules, and its untainted system nodes. Node agents (DaemonSets, and the operands the GPU
and Network Operators start from their ClusterPolicy and NicClusterPolicy) must reach every GPU node;
every other pod (the program's own, and every object a Helm release installs) must fit on at least
one node: its tolerations cover the node's taints and its node selector and required affinity match.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from components.config import SiteConfig
from components.gpu import GPU_TOLERATION
from fabctl.helm import RenderedRelease
from fabctl.render import Plan

WORKLOADS = {"Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job", "CronJob", "Pod"}


@dataclass(frozen=True)
class Node:
    name: str
    labels: dict[str, str] = field(default_factory=dict)
    taints: tuple[dict[str, str], ...] = ()
    gpu: bool = False


def _standard_labels(name: str) -> dict[str, str]:
    return {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"}


def _rule_nodes(rule: dict[str, Any]) -> list[str]:
    """Node names a NodeFeatureRule rule matches by `system.name` `nodename In [...]` (the only form the program writes)."""
    names: list[str] = []
    for match in rule.get("matchFeatures") or []:
        expression = (match.get("matchExpressions") or {}).get("nodename") or {}
        if match.get("feature") == "system.name" and expression.get("op") == "In":
            names += expression.get("value") or []
    return names


def gpu_cluster_nodes(plan: Plan, site: SiteConfig) -> dict[str, list[Node]]:
    """Cluster name -> its nodes, for every GPU cluster: GPU nodes as the plan's NodeFeatureRules make them, system nodes."""
    out: dict[str, list[Node]] = {}
    for key, spec in sorted(site.gpu.items()):
        cluster = site.cluster_name(key)
        labels: dict[str, dict[str, str]] = {name: _standard_labels(name) for name in spec.nodes}
        taints: dict[str, list[dict[str, str]]] = {name: [] for name in spec.nodes}
        for rule_object in plan.objects("NodeFeatureRule", cluster):
            for rule in rule_object["spec"].get("rules") or []:
                for name in _rule_nodes(rule):
                    labels.setdefault(name, _standard_labels(name)).update(rule.get("labels") or {})
                    taints.setdefault(name, []).extend(rule.get("taints") or [])
        nodes = [Node(name, labels[name], tuple(taints[name]), gpu=name in spec.nodes) for name in sorted(labels)]
        out[cluster] = nodes + [Node(name, _standard_labels(name)) for name in spec.system_nodes]
    return out


def tolerates(tolerations: Iterable[dict[str, Any]], taint: dict[str, Any]) -> bool:
    """Kubernetes toleration matching (an empty key with Exists tolerates everything)."""
    for toleration in tolerations:
        if toleration.get("effect") and toleration["effect"] != taint.get("effect"):
            continue
        if toleration.get("operator") == "Exists":
            if not toleration.get("key") or toleration["key"] == taint.get("key"):
                return True
        elif toleration.get("key") == taint.get("key") and (toleration.get("value") or "") == (taint.get("value") or ""):
            return True
    return False


def _expression(expression: dict[str, Any], labels: dict[str, str]) -> bool:
    key, operator, values = expression.get("key"), expression.get("operator"), expression.get("values") or []
    if operator == "In":
        return labels.get(key) in values
    if operator == "NotIn":
        return labels.get(key) not in values
    if operator == "Exists":
        return key in labels
    if operator == "DoesNotExist":
        return key not in labels
    return False  # Gt and Lt are not used on node labels here


def fits(pod: dict[str, Any], node: Node) -> bool:
    """Whether the scheduler may place the pod on the node (taints, node selector, required node affinity)."""
    tolerations = pod.get("tolerations") or []
    if any(t.get("effect") in ("NoSchedule", "NoExecute") and not tolerates(tolerations, t) for t in node.taints):
        return False
    if any(node.labels.get(k) != v for k, v in (pod.get("nodeSelector") or {}).items()):
        return False
    required = (((pod.get("affinity") or {}).get("nodeAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution") or {})
    terms = required.get("nodeSelectorTerms") or []
    return not terms or any(all(_expression(e, node.labels) for e in term.get("matchExpressions") or []) for term in terms)


def pod_spec(obj: dict[str, Any]) -> dict[str, Any] | None:
    spec = obj.get("spec") or {}
    if obj.get("kind") == "Pod":
        return spec
    if obj.get("kind") == "CronJob":
        return (((spec.get("jobTemplate") or {}).get("spec") or {}).get("template") or {}).get("spec")
    return (spec.get("template") or {}).get("spec") if obj.get("kind") in WORKLOADS else None


def _workloads(plan: Plan, releases: Iterable[RenderedRelease], cluster: str) -> Iterator[tuple[str, dict[str, Any], dict[str, Any]]]:
    """(where, object, pod spec) of every workload applied to the cluster, the program's own and its releases'."""
    for c, obj, _ in plan.manifests():
        if c == cluster and (pod := pod_spec(obj)) is not None:
            yield "", obj, pod
    for rendered in releases:
        if rendered.cluster == cluster:
            for obj in rendered.objects:
                if (pod := pod_spec(obj)) is not None:
                    yield f" (Helm release {rendered.release['inputs'].get('name')})", obj, pod


def _operands(plan: Plan, cluster: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """The node agents the operators start at run time, as the tolerations their policies give them."""
    for policy in plan.objects("ClusterPolicy", cluster):
        yield "GPU Operator operands (ClusterPolicy daemonsets)", {"tolerations": ((policy.get("spec") or {}).get("daemonsets") or {}).get("tolerations") or []}
    for policy in plan.objects("NicClusterPolicy", cluster):
        # The Network Operator appends the nvidia.com/gpu toleration to every operand DaemonSet.
        yield "Network Operator operands (NicClusterPolicy)", {"tolerations": [*((policy.get("spec") or {}).get("tolerations") or []), GPU_TOLERATION]}


def scheduling_problems(plan: Plan, site: SiteConfig, releases: Iterable[RenderedRelease]) -> list[str]:
    """Pods of a GPU cluster that no node would take, and node agents that miss a GPU node."""
    releases = list(releases)
    problems = []
    for cluster, nodes in gpu_cluster_nodes(plan, site).items():
        gpu_nodes = [n for n in nodes if n.gpu]
        agents = [(f"DaemonSet {o['metadata'].get('namespace', '')}/{o['metadata']['name']}{where}", pod)
                  for where, o, pod in _workloads(plan, releases, cluster) if o["kind"] == "DaemonSet"]
        for name, pod in [*agents, *_operands(plan, cluster)]:
            missed = [n.name for n in gpu_nodes if not fits(pod, n)]
            if missed:
                problems.append(f"{name} on {cluster} does not reach GPU nodes {', '.join(missed)}")
        for where, obj, pod in _workloads(plan, releases, cluster):
            if obj["kind"] != "DaemonSet" and not any(fits(pod, n) for n in nodes):
                problems.append(f"{obj['kind']} {obj['metadata'].get('namespace', '')}/{obj['metadata']['name']}{where} on {cluster} "
                                f"fits no node (nodes: {', '.join(n.name for n in nodes)})")
        for flavor in plan.objects("ResourceFlavor", cluster):
            spec = flavor.get("spec") or {}
            if spec.get("nodeLabels") and not any(
                fits({"nodeSelector": spec["nodeLabels"], "tolerations": spec.get("tolerations") or []}, n) for n in gpu_nodes
            ):
                problems.append(f"ResourceFlavor {flavor['metadata']['name']} on {cluster} admits workloads to no node")
    return problems
