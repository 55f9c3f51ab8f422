"""Scheduling: every pod the picture starts fits a node of its cluster, and node agents reach the nodes they serve.

The nodes are what the site declares. A GPU cluster declares all of them: its GPU nodes, labelled and tainted by
pool through the plan's NodeFeatureRule (and offering `nvidia.com/gpu` and the RDMA resource only where the
operators' device plugins run), and its untainted system nodes. Compute declares its batch and interactive nodes
(labelled by the program, registered with their pool's taint); its other nodes, and the storage cluster's, are
not declared and stand as one untainted node without GPUs. A pod fits a node when its tolerations cover the node's taints, its
node selector and required node affinity match the node's labels, and the node offers the extended resources it
requests. Operators' operands are modelled as the DaemonSets they start from their ClusterPolicy and
NicClusterPolicy, with the tolerations those policies give them.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from components.config import SiteConfig
from components.engines import POOLS
from components.gpu import GPU_TOLERATION
from fabctl.check.findings import Finding
from fabctl.check.picture import Picture
from fabctl.check.placed import Placed

WORKLOADS = {"Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job", "CronJob", "Pod"}
GPU_RESOURCE = "nvidia.com/gpu"
GPU_PRESENT = "nvidia.com/gpu.present"
"""The label NFD (with the GPU Operator's rules) puts on nodes with an NVIDIA GPU; the operands select it."""


@dataclass(frozen=True)
class Node:
    name: str
    labels: dict[str, str] = field(default_factory=dict)
    taints: tuple[dict[str, str], ...] = ()
    gpus: int = 0
    stand_in: bool = False
    """A node standing for the cluster's undeclared nodes (untainted, no GPUs)."""
    offers: tuple[tuple[str, int], ...] = ()
    """Extended resources the node offers (set once the device plugins that would advertise them are placed)."""

    @property
    def gpu(self) -> bool:
        return self.gpus > 0


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


def _gpu_nodes(picture: Picture, key: str) -> list[Node]:
    spec, cluster = picture.site.gpu[key], picture.site.cluster_name(key)
    labels: dict[str, dict[str, str]] = {name: {**_standard_labels(name), GPU_PRESENT: "true"} for name in spec.nodes}
    taints: dict[str, list[dict[str, str]]] = {name: [] for name in spec.nodes}
    for placed in picture.placed:
        if placed.cluster == cluster and placed.kind == "NodeFeatureRule" and placed.release is None:
            for rule in (placed.obj.get("spec") or {}).get("rules") or []:
                for name in _rule_nodes(rule):
                    labels.setdefault(name, _standard_labels(name)).update(rule.get("labels") or {})
                    taints.setdefault(name, []).extend(rule.get("taints") or [])
    nodes = [Node(name, labels[name], tuple(taints[name]), gpus=spec.nodes[name].gpus if name in spec.nodes else 0) for name in sorted(labels)]
    return nodes + [Node(name, _standard_labels(name)) for name in spec.system_nodes]


def declared_nodes(picture: Picture) -> dict[str, list[Node]]:
    """Cluster provider name -> its nodes as the site declares them (before extended resources are placed)."""
    site: SiteConfig = picture.site
    out: dict[str, list[Node]] = {}
    for key in sorted(site.clusters):
        cluster = site.cluster_name(key)
        if key in site.gpu:
            out[cluster] = _gpu_nodes(picture, key)
            continue
        patched = {p.name: (p.obj.get("metadata") or {}).get("labels") or {} for p in picture.placed if p.cluster == cluster and p.kind == "Node"}
        nodes = []
        if site.clusters[key].role == "compute":
            # Pool nodes register with their pool's taint (docs/operations.md, "Node pools").
            for pool in POOLS:
                for name in getattr(site.compute, f"{pool.name}_nodes"):
                    nodes.append(Node(name, {**_standard_labels(name), **patched.pop(name, {})}, (pool.taint,)))
        nodes += [Node(name, {**_standard_labels(name), **labels}) for name, labels in sorted(patched.items())]
        stand_in = f"(other {key} nodes)"
        out[cluster] = [*nodes, Node(stand_in, _standard_labels(stand_in), stand_in=True)]
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


def label_expression(expression: dict[str, Any], labels: dict[str, str]) -> bool:
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


def _extended(container: dict[str, Any]) -> dict[str, int]:
    resources = container.get("resources") or {}
    out = {}
    for name, amount in {**(resources.get("requests") or {}), **(resources.get("limits") or {})}.items():
        if "/" in name and not name.startswith(("hugepages-", "kubernetes.io/")):
            try:
                out[name] = int(str(amount))
            except ValueError:
                continue
    return out


def requested(pod: dict[str, Any]) -> dict[str, int]:
    """Extended resources (`vendor/name`) the pod needs, as the scheduler counts them: the containers' sum, or
    the largest init container's if that is more (init containers run one at a time)."""
    total: dict[str, int] = {}
    for container in pod.get("containers") or []:
        for name, amount in _extended(container).items():
            total[name] = total.get(name, 0) + amount
    for container in pod.get("initContainers") or []:
        for name, amount in _extended(container).items():
            total[name] = max(total.get(name, 0), amount)
    return total


def misfit(pod: dict[str, Any], node: Node) -> str | None:
    """Why the scheduler would not place the pod on the node (taints, node selector, required node affinity,
    extended resources), or None if it may."""
    tolerations = pod.get("tolerations") or []
    for taint in node.taints:
        if taint.get("effect") in ("NoSchedule", "NoExecute") and not tolerates(tolerations, taint):
            return f"taint {taint.get('key')}={taint.get('value', '')}:{taint.get('effect')} not tolerated"
    for key, value in (pod.get("nodeSelector") or {}).items():
        if node.labels.get(key) != value:
            return f"nodeSelector {key}={value} not matched"
    required = (((pod.get("affinity") or {}).get("nodeAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution") or {})
    terms = required.get("nodeSelectorTerms") or []
    if terms and not any(_term_matches(term, node) for term in terms):
        return "required node affinity not matched"
    offers = dict(node.offers)
    for resource, amount in requested(pod).items():
        if offers.get(resource, 0) < amount:
            return f"needs {resource}: {amount}, offers {offers.get(resource, 0)}"
    return None


def _term_matches(term: dict[str, Any], node: Node) -> bool:
    """A node selector term: all its label expressions and all its field expressions (nodes have one field,
    `metadata.name`) match; a term with neither matches no node."""
    expressions, fields = term.get("matchExpressions") or [], term.get("matchFields") or []
    if not expressions and not fields:
        return False
    return all(label_expression(e, node.labels) for e in expressions) and all(
        f.get("key") == "metadata.name" and label_expression({**f, "key": "name"}, {"name": node.name}) for f in fields
    )


def fits(pod: dict[str, Any], node: Node) -> bool:
    return misfit(pod, node) is None


def pod_spec(obj: dict[str, Any]) -> dict[str, Any] | None:
    spec = obj.get("spec") or {}
    if obj.get("kind") == "Pod":
        return spec
    if obj.get("kind") == "CronJob":
        return (((spec.get("jobTemplate") or {}).get("spec") or {}).get("template") or {}).get("spec")
    return (spec.get("template") or {}).get("spec") if obj.get("kind") in WORKLOADS else None


def operator_pods(placed: Placed) -> Iterator[tuple[str, dict[str, Any]]]:
    """(component, pod placement) of the pods an operator starts from a custom resource whose shape is known."""
    spec = placed.obj.get("spec") or {}
    if placed.kind == "StarRocksCluster":
        for component in ("starRocksFeSpec", "starRocksBeSpec", "starRocksCnSpec"):
            if component in spec:
                part = spec[component] or {}
                yield component, {k: part[k] for k in ("nodeSelector", "tolerations", "affinity") if k in part}
    if placed.kind == "Cluster" and placed.group == "postgresql.cnpg.io":
        affinity = spec.get("affinity") or {}
        yield "instances", {"nodeSelector": affinity.get("nodeSelector") or {}, "tolerations": affinity.get("tolerations") or [],
                            "affinity": {"nodeAffinity": affinity["nodeAffinity"]} if affinity.get("nodeAffinity") else {}}


def operands(picture: Picture, cluster: str) -> Iterator[tuple[Placed, str, dict[str, Any]]]:
    """The node agents the GPU and Network Operators start at run time, with the tolerations their policies give them:
    each runs on every node with a GPU (`nvidia.com/gpu.present`)."""
    for placed in picture.placed:
        if placed.cluster != cluster:
            continue
        spec = placed.obj.get("spec") or {}
        if placed.kind == "ClusterPolicy":
            yield placed, "GPU Operator operands (ClusterPolicy daemonsets)", {
                "tolerations": (spec.get("daemonsets") or {}).get("tolerations") or [], "nodeSelector": {GPU_PRESENT: "true"}}
        if placed.kind == "NicClusterPolicy":
            # The Network Operator appends the nvidia.com/gpu toleration to every operand DaemonSet.
            yield placed, "Network Operator operands (NicClusterPolicy)", {
                "tolerations": [*(spec.get("tolerations") or []), GPU_TOLERATION], "nodeSelector": {GPU_PRESENT: "true"}}


def _rdma_resources(policy: Placed) -> list[str]:
    config = ((policy.obj.get("spec") or {}).get("rdmaSharedDevicePlugin") or {}).get("config")
    try:
        entries = json.loads(config).get("configList") or [] if config else []
    except (ValueError, AttributeError):
        return []
    return [f"rdma/{e['resourceName']}" for e in entries if isinstance(e, dict) and e.get("resourceName")]


def with_device_plugins(picture: Picture, cluster: str, nodes: list[Node]) -> list[Node]:
    """The nodes with the extended resources the device plugins advertise: GPUs where the ClusterPolicy's operands
    run, the RDMA resource where the NicClusterPolicy's do."""
    out = []
    for node in nodes:
        offers: dict[str, int] = {}
        for placed, _, pod in operands(picture, cluster):
            if node.gpu and fits(pod, node):
                if placed.kind == "ClusterPolicy":
                    offers[GPU_RESOURCE] = node.gpus
                else:
                    offers.update({name: 1_000 for name in _rdma_resources(placed)})
        out.append(Node(node.name, node.labels, node.taints, node.gpus, node.stand_in, tuple(sorted(offers.items()))))
    return out


def _selective(pod: dict[str, Any], nodes: list[Node]) -> bool:
    """Whether the pod chooses some of the nodes (its node selector or required affinity leaves one out), rather
    than meaning to run everywhere (`kubernetes.io/os: linux` selects every node)."""
    selection = {"nodeSelector": pod.get("nodeSelector") or {}, "affinity": pod.get("affinity") or {}}
    return any(not fits(selection, Node(node.name, node.labels)) for node in nodes)  # labels only, no taints


def _misfits(pod: dict[str, Any], nodes: list[Node]) -> str:
    reasons: dict[str, list[str]] = {}
    for node in nodes:
        reasons.setdefault(misfit(pod, node) or "", []).append(node.name)
    return "; ".join(f"{', '.join(names)}: {reason}" for reason, names in reasons.items() if reason)


def scheduling_findings(picture: Picture) -> Iterator[Finding]:
    # A MultiKueue manager's flavors only account quota: its workloads run on the workers, whose flavors select nodes.
    managers = {placed.cluster for placed in picture.placed if placed.kind == "MultiKueueConfig"}
    for cluster, declared in declared_nodes(picture).items():
        nodes = with_device_plugins(picture, cluster, declared)
        real = [n for n in nodes if not n.stand_in]
        gpu_nodes = [n for n in nodes if n.gpu]
        for placed, name, pod in operands(picture, cluster):
            missed = [n.name for n in gpu_nodes if not fits(pod, n)]
            if missed:
                yield Finding.of("scheduling.node-agent", placed, f"{name} do not reach GPU nodes {', '.join(missed)} ({_misfits(pod, gpu_nodes)})",
                                 "give the policy tolerations of both GPU pools (components.gpu.pool_tolerations)")
        for placed in picture.placed:
            if placed.cluster != cluster:
                continue
            pod = pod_spec(placed.obj)
            if pod is not None and placed.kind == "DaemonSet":
                missed = [n for n in real if not fits(pod, n)]
                if missed and not _selective(pod, real):
                    yield Finding.of("scheduling.node-agent", placed, f"it does not reach nodes {', '.join(n.name for n in missed)} "
                                     f"({_misfits(pod, missed)})", "tolerate the taints of the nodes it must serve")
                elif missed and real:
                    yield Finding.of("scheduling.node-agent", placed, f"by its node selection it does not run on {', '.join(n.name for n in missed)}",
                                     "", severity="note")
                continue
            pods = [("", pod)] if pod is not None else [(f" ({component})", p) for component, p in operator_pods(placed)]
            for component, one in pods:
                if not any(fits(one, n) for n in nodes):
                    yield Finding.of("scheduling.fit", placed, f"its pods{component} fit no node ({_misfits(one, nodes)})",
                                     "match its tolerations, node selector and resources to a declared node pool")
            if placed.kind == "ResourceFlavor" and cluster not in managers:
                spec = placed.obj.get("spec") or {}
                flavor = {"nodeSelector": spec.get("nodeLabels") or {}, "tolerations": spec.get("tolerations") or []}
                if spec.get("nodeLabels") and not any(fits(flavor, n) for n in gpu_nodes):
                    yield Finding.of("scheduling.fit", placed, f"it admits workloads to no GPU node ({_misfits(flavor, gpu_nodes)})",
                                     "match its nodeLabels and tolerations to a GPU pool's labels and taint")
