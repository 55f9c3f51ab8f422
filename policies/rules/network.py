"""Rules on cross-cluster traffic: default deny everywhere, allow rules only on approved ports, local traffic policy."""

from __future__ import annotations

from typing import Any

from pulumi_policy import EnforcementLevel, ReportViolation, ResourceValidationArgs, StackValidationArgs

from rules._k8s import (
    field,
    gpu_providers,
    k8s_object,
    label,
    name_of,
    namespace_of,
    objects,
    provider_name,
    skip_unknown,
    undecided,
)
from rules._policy import resource_rule, stack_rule

APPROVED_PORTS = [9000, 8181, 10443, 6443, 2379, 53]
"""S3, Polaris REST, Envoy's 443 listener, kube-apiserver, ClusterMesh etcd, cluster DNS."""
K8S_PROVIDER = "pulumi:providers:kubernetes"
NETWORK_POLICY = "CiliumClusterwideNetworkPolicy"


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


@resource_rule("fab-gateway-local-traffic", "The inference gateway Service uses externalTrafficPolicy: Local.",
               EnforcementLevel.ADVISORY)
def gateway_local_traffic(args: ResourceValidationArgs, report: ReportViolation) -> None:
    """Advisory; unknown fields count as absent."""
    obj = skip_unknown(k8s_object(args.resource_type, args.props))
    if obj is None or obj["kind"] != "EnvoyProxy":
        return
    service = (((obj.get("spec") or {}).get("provider") or {}).get("kubernetes") or {}).get("envoyService") or {}
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
        deciding = {"metadata": obj.get("metadata"), "targetRefs": field(obj, "spec", "targetRefs"),
                    "jwt": field(obj, "spec", "jwt"), "rateLimit": field(obj, "spec", "rateLimit")}
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
