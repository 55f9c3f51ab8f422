"""Rules on cross-cluster traffic: default deny everywhere, allow rules only on approved ports, credentials only where a flow
reaches their port, local traffic policy, authenticated routes."""

from __future__ import annotations

from collections import defaultdict
from typing import Any, NamedTuple

from pulumi_policy import ReportViolation, ResourceValidationArgs, StackValidationArgs

from rules._k8s import (
    UNKNOWN,
    field,
    gpu_providers,
    k8s_object,
    label,
    name_of,
    namespace_of,
    objects,
    provider_name,
    undecided,
)
from rules._policy import resource_rule, stack_rule

S3_PORT, POLARIS_PORT = 9000, 8181
APPROVED_PORTS = [S3_PORT, POLARIS_PORT, 10443, 6443, 2379, 53]
"""S3, Polaris REST, Envoy's 443 listener, kube-apiserver, ClusterMesh etcd, cluster DNS."""
K8S_PROVIDER = "pulumi:providers:kubernetes"
NETWORK_POLICY = "CiliumClusterwideNetworkPolicy"
CLUSTER_LABEL = "io.cilium.k8s.policy.cluster"
"""Cilium's label of a pod's cluster: a flow rule names each source cluster with it (`<site>-<key>`, the provider's name)."""


def _ports(entry: dict[str, Any]) -> list[Any]:
    """The ports an ingress or egress entry of a cluster-wide policy allows (as written: strings or numbers)."""
    return [port.get("port") for port_rule in entry.get("toPorts") or [] for port in port_rule.get("ports") or []]


@stack_rule("fab-cross-cluster-default-deny",
            "Each cluster has the default-deny rule for remote clusters; every allow rule is on an approved port of the flow "
            "table.",
            settings={"approvedPorts": {"type": "array", "items": {"type": "integer"}, "default": APPROVED_PORTS}})
def cross_cluster_default_deny(args: StackValidationArgs, report: ReportViolation) -> None:
    """Unknown values: a cluster-wide policy with an unknown part fails closed (its ports and selectors decide)."""
    approved = {str(p) for p in args.get_config().get("approvedPorts", APPROVED_PORTS)}
    clusters = {r.name: r for r in args.resources if r.resource_type == K8S_PROVIDER}
    denied = set()
    for resource, obj in objects(args.resources):
        if obj["kind"] != NETWORK_POLICY:
            continue
        if problem := undecided(f"{NETWORK_POLICY} {name_of(obj)} on {provider_name(resource)}",
                                {"labels": label(obj, "fab.internal/rule"), "spec": obj.get("spec")}):
            report(problem, resource.urn)
            continue
        spec = obj.get("spec") or {}
        rule = label(obj, "fab.internal/rule")
        if rule == "default-deny" and spec.get("endpointSelector") == {} and spec.get("ingress"):
            denied.add(provider_name(resource))
        for entry in [*(spec.get("ingress") or []), *(spec.get("egress") or [])]:
            for port in _ports(entry):
                if str(port) not in approved:
                    report(f"{NETWORK_POLICY} {name_of(obj)} on {provider_name(resource)} allows port {port}, which is not an "
                           f"approved cross-cluster port ({', '.join(sorted(approved, key=int))})", resource.urn)
    for cluster in sorted(set(clusters) - denied):
        report(f"cluster {cluster} has no default-deny rule for remote clusters (a {NETWORK_POLICY} labelled "
               "fab.internal/rule=default-deny selecting every endpoint)", clusters[cluster].urn)


class Credential(NamedTuple):
    """A kind of credential Secret that StorageCluster delivers to a cluster, and the port its holder must reach."""

    prefix: str
    """The Secret's name is `<prefix><engine>`, and it carries the label ENGINE_LABEL."""
    what: str
    setting: str
    port: int


ENGINE_LABEL = "fab.internal/engine"
CREDENTIALS = (Credential("s3-", "S3", "s3Port", S3_PORT), Credential("polaris-", "Polaris", "polarisPort", POLARIS_PORT))


def _credential(name: str) -> Credential | None:
    return next((c for c in CREDENTIALS if name.startswith(c.prefix)), None)


def _flow_sources(resources: list[Any], report: ReportViolation) -> dict[str, dict[str, set[str]]]:
    """Port -> cluster serving it (the cluster enforcing an ingress rule to it) -> the source clusters that rule names."""
    reaching: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for resource, obj in objects(resources):
        if obj["kind"] != NETWORK_POLICY:
            continue
        ingress = field(obj, "spec", "ingress")
        if problem := undecided(f"{NETWORK_POLICY} {name_of(obj)} on {provider_name(resource)}", ingress, ".spec.ingress"):
            report(problem, resource.urn)
            continue
        for entry in ingress or []:
            sources = {(selector.get("matchLabels") or {}).get(CLUSTER_LABEL) for selector in entry.get("fromEndpoints") or []}
            for port in _ports(entry):
                reaching[str(port)][provider_name(resource)] |= sources - {None}
    return reaching


@stack_rule("fab-credentials-have-flow",
            "Every cluster holding S3 or Polaris credentials is a source of the flow to the S3 or Polaris REST port.",
            settings={c.setting: {"type": "integer", "default": c.port, "description": f"the port serving {c.what}"}
                      for c in CREDENTIALS})
def credentials_have_flow(args: StackValidationArgs, report: ReportViolation) -> None:
    """A Secret on the cluster that serves the port (the one enforcing the flow's rule) needs no flow. Sources are whole
    clusters: a flow narrowed to some namespaces or labels of a cluster still counts that cluster.

    Unknown values: a Secret whose name or engine label is unknown, or a cluster-wide policy whose ingress is unknown,
    fails closed."""
    reaching = _flow_sources(args.resources, report)
    for resource, obj in objects(args.resources):
        name = field(obj, "metadata", "name")
        credential = None if name is UNKNOWN else _credential(str(name))
        if obj["kind"] != "Secret" or (name is not UNKNOWN and credential is None):
            continue
        where, cluster = f"Secret {namespace_of(obj)}/{name_of(obj)}", provider_name(resource) or "an unknown cluster"
        if problem := undecided(where, {"name": name, "engine": label(obj, ENGINE_LABEL)}):
            report(problem, resource.urn)
            continue
        if credential is None or label(obj, ENGINE_LABEL) is None:  # not delivered by StorageCluster (another site's, a root key)
            continue
        port = args.get_config().get(credential.setting, credential.port)
        serving = reaching.get(str(port), {})
        if cluster in serving or any(cluster in sources for sources in serving.values()):
            continue
        if serving:
            report(f"{where} on {cluster} holds {credential.what} credentials, but {cluster} is not a source of the flow to port "
                   f"{port} on {', '.join(sorted(serving))}; add it to that flow's sources", resource.urn)
        else:
            report(f"{where} on {cluster} holds {credential.what} credentials, but no flow reaches port {port} on any cluster; "
                   f"add a flow from {cluster} to the cluster serving {credential.what}", resource.urn)


@resource_rule("fab-gateway-local-traffic", "Every Envoy Gateway LoadBalancer Service uses externalTrafficPolicy: Local.")
def gateway_local_traffic(args: ResourceValidationArgs, report: ReportViolation) -> None:
    """The design's network rule: the gateway keeps the caller's address (Cluster would SNAT it to a node's), which the
    cross-cluster flow rules match on. Unknown values: an EnvoyProxy whose Service type or traffic policy is unknown
    fails closed."""
    obj = k8s_object(args.resource_type, args.props)
    if obj is None or obj["kind"] != "EnvoyProxy":
        return
    service = field(obj, "spec", "provider", "kubernetes", "envoyService")
    deciding = service if service is UNKNOWN else {k: (service or {}).get(k) for k in ("type", "externalTrafficPolicy")}
    if problem := undecided(f"EnvoyProxy {name_of(obj)}", deciding, ".spec.provider.kubernetes.envoyService"):
        report(problem)
        return
    service = service or {}
    if service.get("type", "LoadBalancer") == "LoadBalancer" and service.get("externalTrafficPolicy") != "Local":
        report(f"EnvoyProxy {name_of(obj)}: the gateway Service must use externalTrafficPolicy Local (got "
               f"{service.get('externalTrafficPolicy')!r}) so that flow rules see the caller's address")


ROUTE_KINDS = {"HTTPRoute", "SecurityPolicy", "BackendTrafficPolicy"}


@stack_rule("fab-routes-authenticated", "Every HTTPRoute on a GPU cluster is covered by a JWT SecurityPolicy and a rate limit.")
def routes_authenticated(args: StackValidationArgs, report: ReportViolation) -> None:
    """Unknown values: a route or a policy whose identity or targets are unknown fails closed."""
    gpu = gpu_providers(args.resources)
    routes, jwt, limited = [], set(), set()
    for resource, obj in objects(args.resources):
        if obj["kind"] not in ROUTE_KINDS:
            continue
        # Whether a JWT provider or a rate limit is there decides, not what they say (the gateway rules check that).
        present = lambda value: value if value is UNKNOWN else bool(value)
        deciding = {"metadata": obj.get("metadata"), "targetRefs": field(obj, "spec", "targetRefs"),
                    "jwt": present(field(obj, "spec", "jwt", "providers")), "rateLimit": present(field(obj, "spec", "rateLimit"))}
        if problem := undecided(f"{obj['kind']} {namespace_of(obj)}/{name_of(obj)}", deciding):
            report(problem, resource.urn)
            continue
        key_ns = namespace_of(obj)
        spec = obj.get("spec") or {}
        if obj["kind"] == "HTTPRoute" and provider_name(resource) in gpu:
            routes.append((resource, obj))
        targets = {(key_ns, t.get("name")) for t in spec.get("targetRefs") or [] if t.get("kind") == "HTTPRoute"}
        if obj["kind"] == "SecurityPolicy" and (spec.get("jwt") or {}).get("providers"):
            jwt |= targets
        if obj["kind"] == "BackendTrafficPolicy" and spec.get("rateLimit"):
            limited |= targets
    for resource, obj in routes:
        key = (namespace_of(obj), name_of(obj))
        if key not in jwt:
            report(f"HTTPRoute {key[0]}/{key[1]} on {provider_name(resource)} has no JWT SecurityPolicy", resource.urn)
        if key not in limited:
            report(f"HTTPRoute {key[0]}/{key[1]} on {provider_name(resource)} has no rate limit (BackendTrafficPolicy)", resource.urn)
