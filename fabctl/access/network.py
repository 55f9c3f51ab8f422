"""`fabctl access`, network area: which Services, namespaces and outside destinations a seat's pods reach, and which
Services a vendor's ranges reach from outside, by Cilium's policy semantics over the rendered policies
(CiliumNetworkPolicy, CiliumClusterwideNetworkPolicy, Kubernetes NetworkPolicy; docs/security.md).

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

What a seat's pod is: one in each namespace of `principal.pod_namespaces`, with the labels it cannot choose (namespace,
namespace labels, cluster, service account `default`) and any others it likes: a tenant who may create pods sets
their labels, so the answer is the union over the label sets that the policies' selectors ask for (one selector at a
time; an Access reached only through such labels names them).

Limits: Services and pods that Helm charts create are not in the plan; the destinations are the rendered Services
(their backends' labels from a rendered workload whose template matches the selector, else the selector alone), the
proxies Envoy Gateway creates for each rendered Gateway (its labels and the EnvoyProxy's Service), and "any pod" of
each rendered Namespace (labels it cannot choose only). Node-level (host firewall), FQDN resolution, and
`fromRequires`/`fromNodes`/`fromGroups` are not evaluated; an FQDN destination is listed as written.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from typing import Any, Iterable

from components.cilium import ADVERTISE_LABEL
from components.network_policies import CLUSTER_LABEL
from fabctl.access.model import Access, Principal
from components.versions import CILIUM
from fabctl.render import HELM_RELEASE_TYPE, Plan

AREA = "network"
CNP, CCNP, NP = "CiliumNetworkPolicy", "CiliumClusterwideNetworkPolicy", "NetworkPolicy"
NS_LABEL = "io.kubernetes.pod.namespace"
NS_LABELS_PREFIX = "io.cilium.k8s.namespace.labels."
SA_LABEL = "io.cilium.k8s.policy.serviceaccount"
FIXED_KEYS = (NS_LABEL, CLUSTER_LABEL, SA_LABEL)
"""Labels a pod's creator cannot choose (with every `io.cilium.k8s.namespace.labels.*`)."""
ANY_PORT = ("ANY", "*")
"""A port no rule names: what "any port" is evaluated as."""
ENVOY_GATEWAY_NAMESPACE = "envoy-gateway-system"
"""Where Envoy Gateway runs a Gateway's proxies (the controller's namespace, the chart's default)."""
ENVOY_PRIVILEGED_PORT_OFFSET = 10000
"""Envoy Gateway's proxies listen on `port + 10000` for a listener port below 1024 (they run unprivileged)."""
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


def _chosen(selector: dict[str, Any] | None, fixed: dict[str, str]) -> dict[str, str] | None:
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


def _contains(outer: str, inner: str) -> bool:
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

def _peer_matches(rule: Rule, peer: Peer, local_cluster: str, service: tuple[str, str] | None) -> bool:
    """Whether an entry names `peer` (seen from an endpoint of `local_cluster`)."""
    if rule.any_peer:
        return True
    if "all" in rule.entities:
        return True
    if isinstance(peer, Outside):
        if WORLD in rule.entities:
            return True
        return any(_contains(cidr, peer.cidr) and not any(_overlaps(e, peer.cidr) for e in excepted) for cidr, excepted in rule.cidrs)
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


def _direction(policies: list[Policy], endpoint: Endpoint, direction: str, peer: Peer, port: tuple[str, str],
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


# --- destinations -------------------------------------------------------------------------------------------------------

@dataclass
class Destination:
    cluster: str
    """Where the client addresses it (a Service's cluster; the backends may be on another, ClusterMesh)."""
    scope: str
    """`namespace/service`, `namespace/*` (any pod), a gateway's Service."""
    backends: list[tuple[Endpoint, list[tuple[str, str, str]]]]
    """(backend endpoint, [(protocol, client port, pod port)]); a pod port of "*" is any port."""
    external: bool = False
    """A LoadBalancer Service advertised to the site's public peers."""
    source_ranges: tuple[str, ...] = ()
    note: str = ""
    service: tuple[str, str] | None = None


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


class Site:
    """The rendered objects the evaluation needs, read once."""

    def __init__(self, plan: Plan):
        self.policies = PolicySet(site_policies(plan))
        self.clusters = sorted({c for c, _, _ in plan.manifests() if c})
        self.namespace_labels: dict[tuple[str, str], dict[str, str]] = {}
        self.workloads: dict[tuple[str, str], list[dict[str, Any]]] = {}
        self.services: list[tuple[str, dict[str, Any]]] = []
        self.advertised: dict[str, list[dict[str, Any]]] = {}
        self.gateways: list[tuple[str, dict[str, Any]]] = []
        self.envoy_proxies: dict[tuple[str, str, str], dict[str, Any]] = {}
        for cluster, obj, _ in plan.manifests():
            kind, meta = obj["kind"], obj.get("metadata") or {}
            if kind == "Namespace":
                self.namespace_labels[(cluster, meta["name"])] = dict(meta.get("labels") or {})
            elif kind in ("Deployment", "StatefulSet", "DaemonSet"):
                self.workloads.setdefault((cluster, meta.get("namespace", "default")), []).append(obj)
            elif kind == "Service":
                self.services.append((cluster, obj))
            elif kind == "CiliumBGPAdvertisement" and (meta.get("labels") or {}).get(ADVERTISE_LABEL) == "public":
                self.advertised.setdefault(cluster, []).append(obj)
            elif kind == "Gateway":
                self.gateways.append((cluster, obj))
            elif kind == "EnvoyProxy":
                self.envoy_proxies[(cluster, meta.get("namespace", "default"), meta["name"])] = obj

        self.named_ports = sorted({("TCP" if protocol == "ANY" else protocol, port) for policy in self.policies
                                   for rule in policy.ingress + policy.egress for protocol, port, _ in rule.ports or []
                                   if port != "0"})
        """Every (protocol, port) a rule names: what "any port" of a pod is probed with besides ANY_PORT."""

    def ns_labels(self, cluster: str, namespace: str) -> dict[str, str]:
        return self.namespace_labels.get((cluster, namespace), {})

    def endpoint(self, cluster: str, namespace: str, labels: dict[str, str] | None = None, service_account: str = "default") -> Endpoint:
        return pod_labels(cluster, namespace, self.ns_labels(cluster, namespace), labels, service_account)

    def public(self, cluster: str, labels: dict[str, str]) -> bool:
        """Whether a LoadBalancer Service with `labels` is advertised to a public BGP peer."""
        for advertisement in self.advertised.get(cluster, []):
            for entry in advertisement["spec"].get("advertisements") or []:
                if entry.get("advertisementType") == "Service" and matches(entry.get("selector"), labels):
                    return True
        return False

    def _backends(self, cluster: str, namespace: str, selector: dict[str, str]) -> list[tuple[Endpoint, dict[str, int]]]:
        """The backends of a selector: each rendered workload whose pod labels it selects, else one pod with the
        selector's labels (its other labels unknown)."""
        found = []
        for workload in self.workloads.get((cluster, namespace), []):
            template = workload["spec"]["template"]
            labels = dict((template.get("metadata") or {}).get("labels") or {})
            if all(labels.get(k) == v for k, v in selector.items()):
                named = {p["name"]: int(p["containerPort"]) for c in template["spec"].get("containers") or []
                         for p in c.get("ports") or [] if p.get("name")}
                sa = template["spec"].get("serviceAccountName") or "default"
                found.append((self.endpoint(cluster, namespace, labels, sa), named))
        return found or [(self.endpoint(cluster, namespace, dict(selector)), {})]

    def _service_destination(self, cluster: str, obj: dict[str, Any]) -> Destination | None:
        spec, meta = obj.get("spec") or {}, obj["metadata"]
        namespace, name = meta.get("namespace", "default"), meta["name"]
        annotations = meta.get("annotations") or {}
        sources: list[tuple[str, dict[str, Any]]] = [(cluster, spec)] if spec.get("selector") else []
        note = ""
        if annotations.get("service.cilium.io/global") == "true":
            for other, other_obj in self.services:
                other_meta = other_obj["metadata"]
                if (other != cluster and other_meta["name"] == name and other_meta.get("namespace", "default") == namespace
                        and (other_meta.get("annotations") or {}).get("service.cilium.io/global") == "true"
                        and (other_meta.get("annotations") or {}).get("service.cilium.io/shared") != "false"
                        and (other_obj.get("spec") or {}).get("selector")):
                    sources.append((other, other_obj["spec"]))
            remote = sorted({c for c, _ in sources if c != cluster})
            note = f"global Service: backends on {', '.join(remote)}" if remote else ""
        backends = []
        for backend_cluster, backend_spec in sources:
            for endpoint, named in self._backends(backend_cluster, namespace, backend_spec["selector"]):
                ports = []
                for port in spec.get("ports") or []:
                    # the backend Service's port of the same number gives the pod port (global Services match by port)
                    match = next((p for p in backend_spec.get("ports") or [] if p.get("port") == port.get("port")), port)
                    target = match.get("targetPort", match.get("port"))
                    target = str(named.get(target, target)) if isinstance(target, str) else str(target)
                    ports.append((str(port.get("protocol") or "TCP"), str(port["port"]), target))
                backends.append((endpoint, ports))
        if not backends:
            return None
        labels = dict(meta.get("labels") or {})
        external = spec.get("type") == "LoadBalancer" and self.public(cluster, labels)
        return Destination(cluster, f"{namespace}/{name}", backends, external, tuple(spec.get("loadBalancerSourceRanges") or ()),
                           note, (namespace, name))

    def _gateway_destination(self, cluster: str, gateway: dict[str, Any]) -> Destination:
        """The proxies and Service Envoy Gateway creates for a rendered Gateway (not in the plan: derived)."""
        meta = gateway["metadata"]
        namespace, name = meta.get("namespace", "default"), meta["name"]
        labels = {"app.kubernetes.io/name": "envoy", "app.kubernetes.io/component": "proxy",
                  "gateway.envoyproxy.io/owning-gateway-name": name, "gateway.envoyproxy.io/owning-gateway-namespace": namespace}
        ref = (gateway["spec"].get("infrastructure") or {}).get("parametersRef") or {}
        proxy = self.envoy_proxies.get((cluster, namespace, ref.get("name", ""))) if ref.get("kind") == "EnvoyProxy" else None
        service = (((proxy or {}).get("spec") or {}).get("provider") or {}).get("kubernetes", {}).get("envoyService") or {}
        service_type = service.get("type", "LoadBalancer")
        ports = sorted({(str(l.get("port")), "TCP" if l.get("protocol") in ("HTTP", "HTTPS", "TLS", "TCP") else "UDP")
                        for l in gateway["spec"].get("listeners") or []})
        pod_ports = [(protocol, port, str(int(port) + ENVOY_PRIVILEGED_PORT_OFFSET if int(port) < 1024 else int(port))) for port, protocol in ports]
        external = service_type == "LoadBalancer" and self.public(cluster, dict(service.get("labels") or {}))
        return Destination(cluster, f"{ENVOY_GATEWAY_NAMESPACE}/<Gateway {namespace}/{name}>",
                           [(self.endpoint(cluster, ENVOY_GATEWAY_NAMESPACE, labels), pod_ports)], external,
                           tuple(service.get("loadBalancerSourceRanges") or ()),
                           f"Envoy Gateway's {service_type} Service for Gateway {namespace}/{name}")

    def destinations(self) -> list[Destination]:
        found = [d for c, obj in self.services if (d := self._service_destination(c, obj)) is not None]
        found += [self._gateway_destination(c, g) for c, g in self.gateways]
        for (cluster, namespace) in sorted(self.namespace_labels):
            found.append(Destination(cluster, f"{namespace}/*", [(self.endpoint(cluster, namespace), [("ANY", "*", "*")])],
                                     note="any pod of the namespace (labels it cannot choose only)"))
        return found


def _candidates(site: Site, base: Endpoint) -> list[tuple[Endpoint, dict[str, str]]]:
    """The label sets a pod of `base`'s namespace may carry that change what the policies say: none, and for each
    selector of a policy that the pod could satisfy by its own labels, those labels."""
    fixed = base.as_dict()
    found: dict[tuple[tuple[str, str], ...], dict[str, str]] = {(): {}}
    selectors: list[dict[str, Any]] = []
    for policy in site.policies:
        if policy.namespace in (None, base.namespace) and policy.cluster == base.cluster:
            selectors.append(policy.selector)
        for rule in policy.ingress + policy.egress:
            selectors += rule.selectors or []
    for selector in selectors:
        chosen = _chosen(selector, fixed)
        if chosen:
            found.setdefault(tuple(sorted(chosen.items())), chosen)
    return [(Endpoint(base.cluster, tuple(sorted({**fixed, **chosen}.items()))), chosen) for chosen in found.values()]


def _ports_text(ports: Iterable[tuple[str, str]]) -> str:
    ports = set(ports)
    if any(port == "*" for _, port in ports):
        return "any"
    return ",".join(sorted(f"{protocol}/{port}" for protocol, port in ports))


def _labels_text(chosen: dict[str, str]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(chosen.items()))


def reach(site: Site, source: Endpoint, destination: Destination) -> tuple[set[tuple[str, str]], list[str], list[str]]:
    """The client ports on which `source` reaches `destination` (any backend), and the policies that allow it."""
    allowed: set[tuple[str, str]] = set()
    via: set[str] = set()
    l7: set[str] = set()
    for backend, ports in destination.backends:
        for protocol, client_port, pod_port in ports:
            # any port: the one no rule names, and each port a rule names
            pods = [ANY_PORT, *site.named_ports] if pod_port == "*" else [(protocol, pod_port)]
            for pod in pods:
                egress = _direction(site.policies, source, "egress", backend, pod, destination.service)
                if not egress.allowed:
                    continue
                ingress = _direction(site.policies, backend, "ingress", source, pod)
                if not ingress.allowed:
                    continue
                allowed.add(pod if pod_port == "*" else (protocol, client_port))
                via.update(f"egress: {v}" for v in egress.via)
                via.update(f"ingress: {v}" for v in ingress.via)
                l7.update(egress.l7 + ingress.l7)
    return allowed, sorted(via), sorted(l7)


def _outside(site: Site, source: Endpoint) -> list[tuple[str, str, str, str]]:
    """(scope, ports, via, l7) of what `source` may send outside the clusters, by its egress policies."""
    selecting = [p for p in site.policies if p.selects(source) and p.has_egress]
    if not any(p.default_deny["egress"] for p in selecting):
        denied = sorted({f"{r.policy} denies {', '.join(c for c, _ in r.cidrs) or ', '.join(r.entities)}"
                         for p in selecting for r in p.egress if r.deny})
        return [(WORLD, "any", "no egress policy" + (f" ({'; '.join(denied)})" if denied else ""), "")]
    found = []
    for policy in selecting:
        for rule in policy.egress:
            if rule.deny:
                continue
            ports = "any" if rule.ports is None else ",".join(sorted(f"{p}/{n}" + (f"-{e}" if e else "") for p, n, e in rule.ports))
            outside = [e for e in rule.entities if e in (WORLD, "all")]
            outside += [c + (f" except {','.join(x)}" if x else "") for c, x in rule.cidrs]
            outside += [f"fqdn:{f}" for f in rule.fqdns]
            if rule.any_peer:
                outside.append(WORLD)
            for scope in outside:
                found.append((scope, ports, policy.name, rule.l7))
    return found


def _pod_accesses(site: Site, principal: Principal) -> list[Access]:
    accesses: dict[tuple[str, str, str, str], Access] = {}
    destinations = site.destinations()
    for cluster, namespaces in sorted(principal.pod_namespaces.items()):
        for namespace in namespaces:
            base = site.endpoint(cluster, namespace)
            origin = f"from {cluster} {namespace}"
            for source, chosen in _candidates(site, base):
                labels = f" with pod labels {_labels_text(chosen)}" if chosen else ""
                for destination in destinations:
                    ports, via, l7 = reach(site, source, destination)
                    if not ports:
                        continue
                    text = _ports_text(ports)
                    key = (destination.cluster, destination.scope, text, origin)
                    if key in accesses:  # reached without chosen labels (the first candidate) or through other ones
                        continue
                    notes = [n for n in [destination.note, *l7] if n]
                    accesses[key] = Access(AREA, destination.cluster, destination.scope, text,
                                           f"{origin}{labels}: {'; '.join(via)}" + (f" ({'; '.join(notes)})" if notes else ""))
                if not chosen:
                    for scope, ports_text, via, l7 in _outside(site, source):
                        key = (WORLD, scope, ports_text, origin)
                        accesses.setdefault(key, Access(AREA, WORLD, scope, ports_text, f"{origin}: egress: {via}" + (f" ({l7})" if l7 else "")))
    return list(accesses.values())


def _vendor_accesses(site: Site, principal: Principal) -> list[Access]:
    """The public LoadBalancer Services (and Gateways) whose pods admit the principal's ranges."""
    found = []
    for destination in site.destinations():
        if not destination.external:
            continue
        for cidr in principal.source_cidrs:
            if destination.source_ranges and not any(_contains(r, cidr) for r in destination.source_ranges):
                continue
            peer = Outside(cidr)
            ports: set[tuple[str, str]] = set()
            via: set[str] = set()
            for backend, backend_ports in destination.backends:
                for protocol, client_port, pod_port in backend_ports:
                    verdict = _direction(site.policies, backend, "ingress", peer, (protocol, pod_port))
                    if verdict.allowed:
                        ports.add((protocol, client_port))
                        via.update(verdict.via)
            if ports:
                note = f" ({destination.note})" if destination.note else ""
                found.append(Access(AREA, destination.cluster, destination.scope, _ports_text(ports),
                                    f"from {cidr}: ingress: {'; '.join(sorted(via))}{note}"))
    return found


def accesses(plan: Plan, principal: Principal) -> list[Access]:
    """What the principal's pods reach (Services, namespaces, outside), and what its outside ranges reach."""
    site = Site(plan)
    return sorted(_pod_accesses(site, principal) + _vendor_accesses(site, principal))
