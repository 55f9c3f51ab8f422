"""Cilium's policy semantics for `fabctl access` (fabctl/access/network.py): the rendered policies (CiliumNetworkPolicy,
CiliumClusterwideNetworkPolicy, Kubernetes NetworkPolicy) read into rules, and whether they let an endpoint talk with a
peer on a port.

The semantics, as Cilium 1.18 (components/versions.py) enforces them in the mode the program installs it in
(`policyEnforcementMode: default`, `clustermesh.policyDefaultLocalCluster: true`):
- a flow passes when the source's egress AND the destination's ingress allow it; an endpoint no rule selects in a
  direction allows everything in it, one that any rule with that direction's section (allow or deny) selects allows only
  what a rule allows, unless every such rule says `enableDefaultDeny: false` for that direction; a deny rule wins;
- a peer selector without `io.cilium.k8s.policy.cluster` matches the policy's own cluster only (ClusterMesh
  `policyDefaultLocalCluster`); a namespaced policy's selectors match its own namespace unless they name one;
- entities: `cluster` is every endpoint of the local cluster (not a remote cluster's pods), `all` every peer, `world`
  every peer outside the clusters, `host`/`remote-node`/`kube-apiserver`/`health`/`ingress`/`init`/`unmanaged` are
  reserved identities no pod has; CIDR rules match outside addresses, never a pod (Cilium keeps pod identities);
- toPorts: the destination pod's port (a Service's targetPort) and protocol (ANY by default), named ports by name;
  an L7 rule (`rules:`) admits the flow to Cilium's proxy, which then filters requests: said in the Access.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from typing import Any

from components.network_policies import CLUSTER_LABEL
from components.versions import CILIUM
from fabctl.render import HELM_RELEASE_TYPE, Plan

CNP, CCNP, NP = "CiliumNetworkPolicy", "CiliumClusterwideNetworkPolicy", "NetworkPolicy"
NS_LABEL = "io.kubernetes.pod.namespace"
NS_LABELS_PREFIX = "io.cilium.k8s.namespace.labels."
SA_LABEL = "io.cilium.k8s.policy.serviceaccount"
FIXED_KEYS = (NS_LABEL, CLUSTER_LABEL, SA_LABEL)
"""Labels a pod's creator cannot choose (with every `io.cilium.k8s.namespace.labels.*`)."""
ANY_PORT = ("ANY", "*")
"""A port no rule names: what "any port" is evaluated as."""
WORLD = "world"


# --- labels and selectors ----------------------------------------------------------------------------------------------

def _key(key: str) -> str:
    """A selector key without its source (`k8s:`, `any:`); `reserved:` keys are kept (no pod has them)."""
    for source in ("k8s:", "any:"):
        if key.startswith(source):
            return key[len(source):]
    return key


def _requirements(selector: dict[str, Any] | None) -> list[tuple[str, str, tuple[str, ...]]]:
    """(key, operator, values) of a label selector; an empty or missing selector has none (matches everything)."""
    selector = selector or {}
    found = [(_key(k), "In", (str(v),)) for k, v in (selector.get("matchLabels") or {}).items()]
    for expression in selector.get("matchExpressions") or []:
        found.append((_key(expression["key"]), expression["operator"], tuple(str(v) for v in expression.get("values") or ())))
    return found


def _satisfied(requirement: tuple[str, str, tuple[str, ...]], labels: dict[str, str]) -> bool:
    key, operator, values = requirement
    if operator == "In":
        return key in labels and labels[key] in values
    if operator == "NotIn":
        return key not in labels or labels[key] not in values
    if operator == "Exists":
        return key in labels
    if operator == "DoesNotExist":
        return key not in labels
    raise ValueError(f"label selector operator {operator!r} is not one of In, NotIn, Exists, DoesNotExist")


def matches(selector: dict[str, Any] | None, labels: dict[str, str]) -> bool:
    """Whether a Cilium endpoint selector (or a Kubernetes label selector) selects an endpoint with `labels`."""
    return all(_satisfied(r, labels) for r in _requirements(selector))


def _free(key: str) -> bool:
    return key not in FIXED_KEYS and not key.startswith(NS_LABELS_PREFIX) and not key.startswith("reserved:")


def chosen_labels(selector: dict[str, Any] | None, fixed: dict[str, str]) -> dict[str, str] | None:
    """Labels a pod with `fixed` labels could add to be selected by `selector` (None: it cannot be)."""
    chosen: dict[str, str] = {}
    requirements = _requirements(selector)
    for key, operator, values in requirements:
        if _free(key) and operator in ("In", "Exists") and key not in chosen:
            chosen[key] = values[0] if values else "x"
    return chosen if all(_satisfied(r, {**fixed, **chosen}) for r in requirements) else None


# --- endpoints and peers ------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Endpoint:
    """A pod as Cilium sees it: its cluster and security labels (keys without source)."""

    cluster: str
    labels: tuple[tuple[str, str], ...]

    def __post_init__(self) -> None:
        # An answer looks endpoints up millions of times: hash them once.
        object.__setattr__(self, "_hash", hash((self.cluster, self.labels)))

    def __hash__(self) -> int:
        return self._hash  # type: ignore[attr-defined]

    @property
    def namespace(self) -> str:
        return dict(self.labels).get(NS_LABEL, "")

    def as_dict(self) -> dict[str, str]:
        return dict(self.labels)


@dataclass(frozen=True)
class Outside:
    """A peer outside every cluster (`world`), by address range, or a named FQDN."""

    cidr: str = "0.0.0.0/0"


Peer = Endpoint | Outside


def pod_labels(cluster: str, namespace: str, namespace_labels: dict[str, str], labels: dict[str, str] | None = None,
               service_account: str = "default") -> Endpoint:
    """The endpoint of a pod of `namespace` on `cluster` with its own `labels`."""
    full = {**(labels or {}), NS_LABEL: namespace, CLUSTER_LABEL: cluster, SA_LABEL: service_account}
    full.update({f"{NS_LABELS_PREFIX}{k}": v for k, v in namespace_labels.items()})
    full.setdefault(f"{NS_LABELS_PREFIX}kubernetes.io/metadata.name", namespace)
    return Endpoint(cluster, tuple(sorted(full.items())))


def cidr_contains(outer: str, inner: str) -> bool:
    a, b = ipaddress.ip_network(outer, strict=False), ipaddress.ip_network(inner, strict=False)
    return a.version == b.version and b.subnet_of(a)


def _overlaps(outer: str, inner: str) -> bool:
    a, b = ipaddress.ip_network(outer, strict=False), ipaddress.ip_network(inner, strict=False)
    return a.version == b.version and a.overlaps(b)


# --- rules --------------------------------------------------------------------------------------------------------------

@dataclass
class Rule:
    """One direction's entry of a policy: the peers and ports it allows (or denies)."""

    policy: str
    """`Kind namespace/name` of the policy, for `via`."""
    deny: bool
    selectors: list[dict[str, Any]] | None = None
    """Peer endpoint selectors (None: the entry names no endpoints)."""
    entities: tuple[str, ...] = ()
    cidrs: tuple[tuple[str, tuple[str, ...]], ...] = ()
    """(cidr, except) pairs."""
    fqdns: tuple[str, ...] = ()
    services: tuple[tuple[str, str], ...] = ()
    """(namespace, name) of `toServices` k8sService entries."""
    any_peer: bool = False
    """The entry names no peer at all (a Kubernetes NetworkPolicy rule without `from`/`to`): every peer."""
    ports: list[tuple[str, str, str | None]] | None = None
    """(protocol, port, endPort) it admits; None: every port."""
    l7: str = ""
    matched: dict[Endpoint, bool] = field(default_factory=dict, repr=False, compare=False)
    """Which endpoints its selectors name, as evaluated (an answer asks about the same few endpoints many times)."""


@dataclass
class Policy:
    name: str
    cluster: str
    selector: dict[str, Any]
    namespace: str | None
    """The namespace a namespaced policy selects in (None: cluster-wide)."""
    ingress: list[Rule] = field(default_factory=list)
    egress: list[Rule] = field(default_factory=list)
    has_ingress: bool = False
    has_egress: bool = False
    default_deny: dict[str, bool] = field(default_factory=lambda: {"ingress": True, "egress": True})
    selected: dict[Endpoint, bool] = field(default_factory=dict, repr=False, compare=False)
    """Which endpoints it selects, as evaluated (an answer asks about the same few endpoints many times)."""

    def selects(self, endpoint: Endpoint) -> bool:
        found = self.selected.get(endpoint)
        if found is None:
            found = self.selected[endpoint] = (
                endpoint.cluster == self.cluster and (self.namespace is None or endpoint.namespace == self.namespace)
                and matches(self.selector, endpoint.as_dict()))
        return found


def _scoped(selector: dict[str, Any], namespace: str | None, cluster: str | None) -> dict[str, Any]:
    """A peer selector as Cilium applies it: in the policy's namespace unless it names one, in the policy's cluster
    unless it names one (policyDefaultLocalCluster)."""
    keys = {key for key, _, _ in _requirements(selector)}
    labels = dict(selector.get("matchLabels") or {})
    if namespace is not None and NS_LABEL not in keys:
        labels[NS_LABEL] = namespace
    if cluster is not None and CLUSTER_LABEL not in keys:
        labels[CLUSTER_LABEL] = cluster
    return {**selector, "matchLabels": labels}


def _port_rules(entry: dict[str, Any]) -> tuple[list[tuple[str, str, str | None]] | None, str]:
    port_rules = entry.get("toPorts")
    if not port_rules:
        return None, ""
    ports: list[tuple[str, str, str | None]] = []
    l7 = []
    for port_rule in port_rules:
        for port in port_rule.get("ports") or [{"port": "0"}]:
            end = port.get("endPort")
            ports.append((str(port.get("protocol") or "ANY").upper(), str(port.get("port", "0")), str(end) if end else None))
        if port_rule.get("rules"):
            l7 += sorted(port_rule["rules"])
    return ports, (f"L7 rules ({', '.join(sorted(set(l7)))}) filter requests in Cilium's proxy" if l7 else "")


def _cilium_rule(entry: dict[str, Any], direction: str, deny: bool, policy: str, namespace: str | None, cluster: str | None) -> Rule:
    peer = "from" if direction == "ingress" else "to"
    selectors = entry.get(f"{peer}Endpoints")
    cidrs = [(c, ()) for c in entry.get(f"{peer}CIDR") or []]
    cidrs += [(c["cidr"], tuple(c.get("except") or ())) for c in entry.get(f"{peer}CIDRSet") or [] if "cidr" in c]
    services = tuple((s["k8sService"].get("namespace") or namespace or "", s["k8sService"]["serviceName"])
                     for s in entry.get("toServices") or [] if "k8sService" in s) if direction == "egress" else ()
    ports, l7 = _port_rules(entry)
    return Rule(policy=policy, deny=deny,
                selectors=None if selectors is None else [_scoped(s or {}, namespace, cluster) for s in selectors],
                entities=tuple(entry.get(f"{peer}Entities") or ()), cidrs=tuple(cidrs),
                fqdns=tuple(f.get("matchName") or f.get("matchPattern") or "" for f in entry.get("toFQDNs") or []),
                services=services, ports=ports, l7=l7)


def cilium_policies(obj: dict[str, Any], cluster: str, local_only: bool = True) -> list[Policy]:
    """The policies of a CiliumNetworkPolicy or CiliumClusterwideNetworkPolicy (`spec` and each of `specs`);
    `local_only`: the cluster's agents run with `policyDefaultLocalCluster`."""
    scope = cluster if local_only else None
    namespace = obj["metadata"].get("namespace") if obj["kind"] == CNP else None
    name = f"{obj['kind']} {namespace + '/' if namespace else ''}{obj['metadata']['name']}"
    found = []
    for spec in [obj["spec"]] if obj.get("spec") else []:
        found.append(spec)
    found += obj.get("specs") or []
    policies = []
    for spec in found:
        if "endpointSelector" not in spec:  # a host policy (nodeSelector) selects nodes, not pods
            continue
        policy = Policy(name, cluster, spec["endpointSelector"] or {}, namespace)
        for direction in ("ingress", "egress"):
            allow, deny = spec.get(direction), spec.get(f"{direction}Deny")
            rules = [_cilium_rule(e or {}, direction, False, name, namespace, scope) for e in allow or []]
            rules += [_cilium_rule(e or {}, direction, True, name, namespace, scope) for e in deny or []]
            setattr(policy, direction, rules)
            setattr(policy, f"has_{direction}", allow is not None or deny is not None)
            policy.default_deny[direction] = (spec.get("enableDefaultDeny") or {}).get(direction, True) is not False
        policies.append(policy)
    return policies


def _np_peer(peer: dict[str, Any], namespace: str, cluster: str | None) -> tuple[dict[str, Any] | None, tuple[str, tuple[str, ...]] | None]:
    if "ipBlock" in peer:
        return None, (peer["ipBlock"]["cidr"], tuple(peer["ipBlock"].get("except") or ()))
    requirements = _requirements(peer.get("podSelector"))
    selector: dict[str, Any] = {"matchLabels": {}, "matchExpressions": []}
    for key, operator, values in requirements:
        selector["matchExpressions"].append({"key": key, "operator": operator, "values": list(values)})
    if "namespaceSelector" in peer:
        for key, operator, values in _requirements(peer["namespaceSelector"]):
            selector["matchExpressions"].append({"key": NS_LABELS_PREFIX + key, "operator": operator, "values": list(values)})
        selector["matchExpressions"].append({"key": NS_LABEL, "operator": "Exists", "values": []})
    else:
        selector["matchLabels"][NS_LABEL] = namespace
    if cluster is not None:
        selector["matchLabels"][CLUSTER_LABEL] = cluster
    return selector, None


def network_policies(obj: dict[str, Any], cluster: str, local_only: bool = True) -> list[Policy]:
    """A Kubernetes NetworkPolicy as Cilium enforces it."""
    scope = cluster if local_only else None
    spec, namespace = obj["spec"], obj["metadata"].get("namespace", "default")
    name = f"NetworkPolicy {namespace}/{obj['metadata']['name']}"
    types = spec.get("policyTypes") or (["Ingress"] + (["Egress"] if "egress" in spec else []))
    policy = Policy(name, cluster, spec.get("podSelector") or {}, namespace)
    for direction, peer_key in (("ingress", "from"), ("egress", "to")):
        if direction.capitalize() not in types:
            continue
        setattr(policy, f"has_{direction}", True)
        rules = []
        for entry in spec.get(direction) or []:
            ports = None
            if entry.get("ports"):
                ports = [(str(p.get("protocol") or "TCP").upper(), str(p.get("port", "0")), str(p["endPort"]) if p.get("endPort") else None)
                         for p in entry["ports"]]
            peers = entry.get(peer_key)
            if not peers:
                rules.append(Rule(policy=name, deny=False, any_peer=True, ports=ports))
                continue
            selectors, cidrs = [], []
            for peer in peers:
                selector, cidr = _np_peer(peer, namespace, scope)
                if selector is not None:
                    selectors.append(selector)
                if cidr is not None:
                    cidrs.append(cidr)
            rules.append(Rule(policy=name, deny=False, selectors=selectors, cidrs=tuple(cidrs), ports=ports))
        setattr(policy, direction, rules)
    return [policy]


def local_only(plan: Plan) -> dict[str, bool]:
    """Cluster -> whether its Cilium release sets `clustermesh.policyDefaultLocalCluster` (Cilium 1.18's default: off,
    selectors match every cluster of the mesh). A cluster without a Cilium release in the plan counts as set, as the
    program installs it (components/network.py)."""
    found = {}
    for release in plan.of_type(HELM_RELEASE_TYPE):
        if release["inputs"].get("chart") == CILIUM.chart and (cluster := plan.cluster(release)):
            values = release["inputs"].get("values") or {}
            found[cluster] = (values.get("clustermesh") or {}).get("policyDefaultLocalCluster") is True
    return found


def site_policies(plan: Plan) -> list[Policy]:
    policies = []
    local = local_only(plan)
    for cluster, obj, _ in plan.manifests():
        if obj["kind"] in (CNP, CCNP) and obj.get("apiVersion", "").startswith("cilium.io/"):
            policies += cilium_policies(obj, cluster, local.get(cluster, True))
        elif obj["kind"] == NP and obj.get("apiVersion") == "networking.k8s.io/v1":
            policies += network_policies(obj, cluster, local.get(cluster, True))
    return policies


# --- evaluation ---------------------------------------------------------------------------------------------------------

class PolicySet(list):
    """A site's policies, remembering which of them select an endpoint in a direction."""

    def __init__(self, policies: list[Policy]):
        super().__init__(policies)
        self._selecting: dict[tuple[Endpoint, str], list[Policy]] = {}

    def selecting(self, endpoint: Endpoint, direction: str) -> list[Policy]:
        key = (endpoint, direction)
        if key not in self._selecting:
            self._selecting[key] = [p for p in self if p.selects(endpoint) and getattr(p, f"has_{direction}")]
        return self._selecting[key]


def _peer_matches(rule: Rule, peer: Peer, local_cluster: str, service: tuple[str, str] | None) -> bool:
    """Whether an entry names `peer` (seen from an endpoint of `local_cluster`)."""
    if rule.any_peer:
        return True
    if "all" in rule.entities:
        return True
    if isinstance(peer, Outside):
        if WORLD in rule.entities:
            return True
        return any(cidr_contains(cidr, peer.cidr) and not any(_overlaps(e, peer.cidr) for e in excepted) for cidr, excepted in rule.cidrs)
    if "cluster" in rule.entities and peer.cluster == local_cluster:
        return True
    if service is not None and service in rule.services:
        return True
    found = rule.matched.get(peer)
    if found is None:
        found = rule.matched[peer] = any(matches(s, peer.as_dict()) for s in rule.selectors or [])
    return found


def _port_matches(rule: Rule, port: tuple[str, str]) -> bool:
    """Whether an entry admits `port` ((protocol, number); ANY_PORT stands for a port no rule names)."""
    if rule.ports is None:
        return True
    protocol, number = port
    if number == "*":
        return False
    for r_protocol, r_port, r_end in rule.ports:
        if r_protocol not in ("ANY", protocol):
            continue
        if r_port in ("0", number):
            return True
        if r_end and r_port.isdigit() and number.isdigit() and int(r_port) <= int(number) <= int(r_end):
            return True
    return False


@dataclass
class Verdict:
    allowed: bool
    via: list[str]
    l7: list[str]


def direction_verdict(policies: list[Policy], endpoint: Endpoint, direction: str, peer: Peer, port: tuple[str, str],
               service: tuple[str, str] | None = None) -> Verdict:
    """Whether `endpoint`'s policies in `direction` let it talk with `peer` on `port`."""
    if isinstance(policies, PolicySet):
        selecting = policies.selecting(endpoint, direction)
    else:
        selecting = [p for p in policies if p.selects(endpoint) and getattr(p, f"has_{direction}")]
    for policy in selecting:
        for rule in getattr(policy, direction):
            if rule.deny and _peer_matches(rule, peer, endpoint.cluster, service) and _port_matches(rule, port):
                return Verdict(False, [f"denied by {policy.name}"], [])
    if not any(p.default_deny[direction] for p in selecting):
        return Verdict(True, [f"no {direction} policy" if not selecting else f"no default-deny {direction} policy"], [])
    via, l7 = [], []
    for policy in selecting:
        for rule in getattr(policy, direction):
            if not rule.deny and _peer_matches(rule, peer, endpoint.cluster, service) and _port_matches(rule, port):
                via.append(policy.name)
                if rule.l7:
                    l7.append(rule.l7)
    return Verdict(bool(via), sorted(set(via)), sorted(set(l7)))
