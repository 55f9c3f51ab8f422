"""`fabctl access`, network area: which Services, namespaces and outside destinations a seat's pods reach, and which
Services a vendor's ranges reach from outside, by Cilium's policy semantics over the rendered policies
(CiliumNetworkPolicy, CiliumClusterwideNetworkPolicy, Kubernetes NetworkPolicy; docs/security.md).

The semantics of the policies, as Cilium 1.18 enforces them, are fabctl/access/cilium.py's.

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

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from components.cilium import ADVERTISE_LABEL
from fabctl.access.cilium import (
    ANY_PORT,
    WORLD,
    Endpoint,
    Outside,
    PolicySet,
    chosen_labels,
    cidr_contains,
    direction_verdict,
    matches,
    pod_labels,
    site_policies,
)
from fabctl.access.model import Access, Principal
from fabctl.render import Plan

AREA = "network"
ENVOY_GATEWAY_NAMESPACE = "envoy-gateway-system"
"""Where Envoy Gateway runs a Gateway's proxies (the controller's namespace, the chart's default)."""
ENVOY_PRIVILEGED_PORT_OFFSET = 10000
"""Envoy Gateway's proxies listen on `port + 10000` for a listener port below 1024 (they run unprivileged)."""


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
        chosen = chosen_labels(selector, fixed)
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
                egress = direction_verdict(site.policies, source, "egress", backend, pod, destination.service)
                if not egress.allowed:
                    continue
                ingress = direction_verdict(site.policies, backend, "ingress", source, pod)
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
            if destination.source_ranges and not any(cidr_contains(r, cidr) for r in destination.source_ranges):
                continue
            peer = Outside(cidr)
            ports: set[tuple[str, str]] = set()
            via: set[str] = set()
            for backend, backend_ports in destination.backends:
                for protocol, client_port, pod_port in backend_ports:
                    verdict = direction_verdict(site.policies, backend, "ingress", peer, (protocol, pod_port))
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
