"""A small evaluator of rendered Cilium ingress policy, the way the agent decides a connection to an endpoint.

What it models (Cilium 1.18, cilium.io/v2): the policies that select the destination (`endpointSelector`; a namespaced
CiliumNetworkPolicy selects pods of its own namespace only), `ingressDeny` before `ingress` (a deny wins over any allow),
default deny once a selecting policy has ingress or ingressDeny rules (unless `enableDefaultDeny.ingress` is false), and
per rule the peers (`fromEndpoints` with `matchLabels`/`matchExpressions`, `fromEntities`, `fromCIDR`/`fromCIDRSet`) and
`toPorts`. A `fromEndpoints` selector of a namespaced policy without a namespace key gets the policy's namespace; one
without a cluster key selects the destination's cluster only (`clustermesh.policyDefaultLocalCluster`, which the program
sets). Label keys are compared without their source prefix (`k8s:`). A pod's identity carries its namespace's labels
(`io.cilium.k8s.namespace.labels.<key>`, and `kubernetes.io/metadata.name`, which Kubernetes sets): `in_plan` takes them
from the plan's Namespace. Not modelled: L7 rules (none is rendered), named ports, egress, and Kubernetes NetworkPolicy
(under the cluster-wide default deny, which admits every pod of the cluster, an allow of one adds nothing for a pod).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from ipaddress import ip_address, ip_network
from typing import Any, Iterable, Mapping

NAMESPACE = "io.kubernetes.pod.namespace"
NAMESPACE_LABELS = "io.cilium.k8s.namespace.labels."
CLUSTER = "io.cilium.k8s.policy.cluster"
KINDS = ("CiliumNetworkPolicy", "CiliumClusterwideNetworkPolicy")


@dataclass(frozen=True)
class Peer:
    """One end of a connection: a pod (cluster, namespace, labels) or an address outside the clusters (`ip`, entity world)."""

    cluster: str | None = None
    namespace: str | None = None
    labels: Mapping[str, str] = field(default_factory=dict)
    ip: str | None = None
    namespace_labels: Mapping[str, str] = field(default_factory=dict)
    """The labels of the pod's namespace (the platform's: its creator cannot choose them)."""

    @property
    def pod(self) -> bool:
        return self.namespace is not None

    def identity(self) -> dict[str, str]:
        if not self.pod:
            return {}
        namespace_labels = {"kubernetes.io/metadata.name": str(self.namespace), **self.namespace_labels}
        return {**{_key(k): v for k, v in self.labels.items()}, **{NAMESPACE_LABELS + k: v for k, v in namespace_labels.items()},
                NAMESPACE: str(self.namespace), CLUSTER: str(self.cluster)}


def pod(cluster: str, namespace: str, labels: Mapping[str, str] | None = None,
        namespace_labels: Mapping[str, str] | None = None) -> Peer:
    return Peer(cluster, namespace, dict(labels or {}), namespace_labels=dict(namespace_labels or {}))


def in_plan(plan: Any, cluster: str, namespace: str, labels: Mapping[str, str] | None = None) -> Peer:
    """A pod of `namespace` on `cluster` with `labels`, its namespace's labels as the plan sets them (none if the plan
    makes no such Namespace)."""
    found = [obj for obj in plan.objects("Namespace", cluster) if obj["metadata"]["name"] == namespace]
    return pod(cluster, namespace, labels, (found[0]["metadata"].get("labels") or {}) if found else {})


def outside(ip: str) -> Peer:
    return Peer(ip=ip)


def _key(key: str) -> str:
    for prefix in ("k8s:", "any:"):
        if key.startswith(prefix):
            return key[len(prefix):]
    return key


def selects(selector: Mapping[str, Any] | None, labels: Mapping[str, str], *, namespace: str | None = None,
            cluster: str | None = None) -> bool:
    """Whether a label selector selects an identity; `namespace`/`cluster` are added where the selector names none."""
    selector = selector or {}
    match = {_key(k): str(v) for k, v in (selector.get("matchLabels") or {}).items()}
    expressions = [(_key(e["key"]), e["operator"], [str(v) for v in e.get("values") or []]) for e in selector.get("matchExpressions") or []]
    keys = set(match) | {key for key, _, _ in expressions}
    if namespace is not None and NAMESPACE not in keys:
        match[NAMESPACE] = namespace
    if cluster is not None and CLUSTER not in keys:
        match[CLUSTER] = cluster
    if any(labels.get(key) != value for key, value in match.items()):
        return False
    for key, operator, values in expressions:
        present = key in labels
        ok = {"In": present and labels.get(key) in values, "NotIn": not present or labels.get(key) not in values,
              "Exists": present, "DoesNotExist": not present}[operator]
        if not ok:
            return False
    return True


def _entities(peer: Peer, local: str) -> set[str]:
    if not peer.pod:
        return {"world", "world-ipv4", "all"}
    return {"cluster", "all"} if peer.cluster == local else {"all"}


def _in_cidrs(peer: Peer, rule: Mapping[str, Any]) -> bool:
    if peer.pod or peer.ip is None:
        return False
    address = ip_address(peer.ip)
    for cidr in rule.get("fromCIDR") or []:
        if address in ip_network(cidr):
            return True
    for item in rule.get("fromCIDRSet") or []:
        if "cidr" in item and address in ip_network(item["cidr"]) and not any(address in ip_network(e) for e in item.get("except") or []):
            return True
    return False


def _port_matches(rule: Mapping[str, Any], port: int, protocol: str) -> bool:
    port_rules = rule.get("toPorts")
    if not port_rules:
        return True
    for port_rule in port_rules:
        for item in port_rule.get("ports") or []:
            first = int(item.get("port", 0))
            last = int(item.get("endPort") or first)
            if item.get("protocol", "ANY") in ("ANY", protocol) and (first == 0 or first <= port <= last):
                return True
    return False


def _rule_matches(rule: Mapping[str, Any], source: Peer, local: str, namespace: str | None, port: int, protocol: str) -> bool:
    peers = [key for key in ("fromEndpoints", "fromEntities", "fromCIDR", "fromCIDRSet") if key in rule]
    unknown = set(rule) - {"fromEndpoints", "fromEntities", "fromCIDR", "fromCIDRSet", "toPorts"}
    assert not unknown, f"the evaluator does not model {sorted(unknown)}"
    if peers:
        identity = source.identity()
        l3 = (source.pod and any(selects(s, identity, namespace=namespace, cluster=local) for s in rule.get("fromEndpoints") or [])) \
            or bool(_entities(source, local) & set(rule.get("fromEntities") or [])) or _in_cidrs(source, rule)
        if not l3:
            return False
    return _port_matches(rule, port, protocol)


@dataclass(frozen=True)
class Verdict:
    admitted: bool
    why: str


def decide(policies: Iterable[Mapping[str, Any]], destination: Peer, source: Peer, port: int, protocol: str = "TCP") -> Verdict:
    """Whether `source` may open a connection to `destination` (a pod) on `port`, under the policies of the destination's
    cluster (Cilium objects as rendered: kind, metadata, spec or specs)."""
    local = str(destination.cluster)
    target = destination.identity()
    selecting: list[tuple[str, str | None, Mapping[str, Any]]] = []
    for policy in policies:
        if policy["kind"] not in KINDS:
            continue
        namespace = policy["metadata"].get("namespace") if policy["kind"] == "CiliumNetworkPolicy" else None
        for spec in [policy["spec"]] if "spec" in policy else policy.get("specs") or []:
            if selects(spec.get("endpointSelector"), target, namespace=namespace):
                selecting.append((policy["metadata"]["name"], namespace, spec))
    for name, namespace, spec in selecting:
        for rule in spec.get("ingressDeny") or []:
            if _rule_matches(rule, source, local, namespace, port, protocol):
                return Verdict(False, f"denied by {name}")
    enforced = [spec for _, _, spec in selecting if (spec.get("ingress") is not None or spec.get("ingressDeny") is not None)
                and (spec.get("enableDefaultDeny") or {}).get("ingress", True)]
    if not enforced:
        return Verdict(True, "no policy enforces ingress")
    for name, namespace, spec in selecting:
        for rule in spec.get("ingress") or []:
            if _rule_matches(rule, source, local, namespace, port, protocol):
                return Verdict(True, f"allowed by {name}")
    return Verdict(False, "default deny")


def cluster_policies(plan: Any, cluster: str) -> list[dict[str, Any]]:
    """Every Cilium policy the plan applies to a cluster (by its provider name, `<site>-<key>`)."""
    return [obj for kind in KINDS for obj in plan.objects(kind, cluster)]


def admitted(plan: Any, destination: Peer, source: Peer, port: int, protocol: str = "TCP") -> Verdict:
    return decide(cluster_policies(plan, str(destination.cluster)), destination, source, port, protocol)
