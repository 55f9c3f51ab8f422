"""Rules on cross-cluster traffic: default deny everywhere, allow rules only for the flows of the design's table (by
direction, cluster roles and port), credentials only where a flow reaches their port, local traffic policy,
authenticated routes."""

from __future__ import annotations

from collections import defaultdict
from typing import Any, NamedTuple

from pulumi_policy import ReportViolation, ResourceValidationArgs, StackValidationArgs

from rules._k8s import (
    HELM_RELEASE,
    UNKNOWN,
    field,
    gpu_providers,
    k8s_object,
    label,
    name_of,
    namespace_of,
    objects,
    provider_name,
    top_component,
    undecided,
    unknown_paths,
)
from rules._policy import resource_rule, stack_rule
from rules._stack import ExternalDatabase, external_databases, in_site_ranges, keycloak_endpoint, routes_from_git

S3_PORT, POLARIS_PORT, PROMETHEUS_PORT, RAY_CLIENT_PORT = 9000, 8181, 9090, 10001
ENVOY_HTTPS_POD_PORT, KUBE_APISERVER_PORT, CLUSTERMESH_PORT = 10443, 6443, 2379
NOTEBOOKS_PROXY_POD_PORT = 8000
K8S_PROVIDER = "pulumi:providers:kubernetes"
TRINO_NAMESPACE = "trino"
"""Where Trino runs on compute: its pods alone may reach the external databases of its catalogs (DESIGN section 1, supply
chain: Trino federates external databases), each on the one port its catalog declares."""
NAMESPACE_SELECTOR = "k8s:io.kubernetes.pod.namespace"
NETWORK_POLICY = "CiliumClusterwideNetworkPolicy"
NETWORK_POLICIES = {NETWORK_POLICY, "CiliumNetworkPolicy"}
CLUSTER_LABEL = "io.cilium.k8s.policy.cluster"
"""Cilium's label of a pod's cluster: a flow rule names each source cluster with it (`<site>-<key>`, the provider's name)."""

ROLE_COMPONENTS = {"fab:compute:ComputeCluster": "compute", "fab:gpu:GpuCluster": "gpu"}
"""A cluster's role is what the program runs there: ComputeCluster on compute, GpuCluster on every GPU cluster (gpu and
gpu-train alike), and StorageCluster's Helm releases (the object store, Polaris) on storage."""
STORAGE_COMPONENT = "fab:storage:StorageCluster"

WORLD, RANGES, REMOTE_NODES, API_SERVERS = "world", "ranges", "remote-node", "api-server"
LOCAL_ENTITIES = {"host", "health", "kube-apiserver", "ingress", "init", "unmanaged", "cluster"}
"""Cilium entities of a pod's own cluster; `world`, `all` and `remote-node` (every node of every remote cluster) are not."""
DESIGN_FLOWS = [
    {"name": "s3", "from": ["compute", "gpu", WORLD, RANGES], "to": "storage", "port": S3_PORT},
    {"name": "polaris", "from": ["compute", "gpu", RANGES], "to": "storage", "port": POLARIS_PORT},
    {"name": "inference", "from": ["compute"], "to": "gpu", "port": ENVOY_HTTPS_POD_PORT},
    {"name": "compute-ingress", "from": [WORLD, RANGES], "to": "compute", "port": ENVOY_HTTPS_POD_PORT},
    {"name": "multikueue", "from": ["compute"], "to": API_SERVERS, "port": KUBE_APISERVER_PORT},
    {"name": "argocd", "from": ["compute"], "to": API_SERVERS, "port": KUBE_APISERVER_PORT},
    {"name": "clustermesh", "from": [RANGES, REMOTE_NODES], "to": "*", "port": CLUSTERMESH_PORT},
    {"name": "metrics", "from": ["gpu", "storage"], "to": "compute", "port": PROMETHEUS_PORT},
    {"name": "gpu-notebooks", "from": ["compute"], "to": "gpu", "port": NOTEBOOKS_PROXY_POD_PORT},
    {"name": "ray", "from": ["compute"], "to": "gpu", "port": RAY_CLIENT_PORT},
]
"""DESIGN section 2, by the ports Cilium sees (the pods' ports): compute and GPU pods to S3 and Polaris on storage (and
other sites by their ranges; outside S3 clients through the external endpoint), compute to the inference gateway,
outside users to the compute ingress, the MultiKueue manager to the GPU clusters' API servers, Argo CD on compute to the
serving cluster's (issue 18: one Argo CD on compute, the serving clusters its destinations), every cluster's agents
to each ClusterMesh API server, and every other cluster's Prometheus to compute's remote-write receiver (issue 19, while
the site keeps its metrics in-cluster), and the compute ingress to the GPU notebooks hub's proxy (issue 20, configurable-http-proxy's
port), and Jupyter on compute to its team's Ray heads on the GPU clusters (issue 20: Ray
Client, one flow per team, token-authenticated). The two API server flows have the same roles and port, as the rule sees them (egress
to addresses from compute): each is listed so that a pack configured without MultiKueue still admits Argo CD's."""
FLOWS_SETTING = {
    "type": "array", "default": DESIGN_FLOWS,
    "description": "the design's flow table: who (cluster roles compute, gpu, storage; world; ranges; remote-node) may "
                   "reach which role (or api-server, or * for any) on which pod port",
    "items": {"type": "object", "required": ["from", "to", "port"], "properties": {
        "name": {"type": "string"}, "from": {"type": "array", "items": {"type": "string"}},
        "to": {"type": "string"}, "port": {"type": "integer"}}},
}


def _ports(entry: dict[str, Any]) -> list[Any]:
    """The ports an ingress or egress entry of a cluster-wide policy allows (as written: strings or numbers); a port
    range (`endPort`) counts as its first port and the range itself as `<port>-<endPort>`."""
    return [port.get("port") if port.get("endPort") is None else f"{port.get('port')}-{port['endPort']}"
            for port_rule in entry.get("toPorts") or [] for port in port_rule.get("ports") or []]


def cluster_roles(resources: list[Any]) -> dict[str, set[str]]:
    """Provider name -> the roles of what the program runs on that cluster."""
    roles: dict[str, set[str]] = defaultdict(set)
    for resource in resources:
        top, cluster = top_component(resource), provider_name(resource)
        kind = getattr(top, "resource_type", "")
        role = ROLE_COMPONENTS.get(kind)
        if role is None and kind == STORAGE_COMPONENT and resource.resource_type == HELM_RELEASE:
            role = "storage"
        if role and cluster:
            roles[cluster].add(role)
    return roles


@stack_rule("fab-cross-cluster-default-deny", "Each cluster has the default-deny rule for remote clusters.",
            place=150,
            docs="each cluster has the default-deny rule for remote clusters")
def cross_cluster_default_deny(args: StackValidationArgs, report: ReportViolation) -> None:
    """Unknown values: a cluster-wide policy whose label or spec is unknown does not count as the default deny (the
    rule fails closed)."""
    clusters = {r.name: r for r in args.resources if r.resource_type == K8S_PROVIDER}
    denied = set()
    for resource, obj in objects(args.resources):
        if obj["kind"] != NETWORK_POLICY or unknown_paths({"labels": label(obj, "fab.internal/rule"), "spec": obj.get("spec")}):
            continue
        spec = obj.get("spec") or {}
        if label(obj, "fab.internal/rule") == "default-deny" and spec.get("endpointSelector") == {} and spec.get("ingress"):
            denied.add(provider_name(resource))
    for cluster in sorted(set(clusters) - denied):
        report(f"cluster {cluster} has no default-deny rule for remote clusters (a {NETWORK_POLICY} labelled "
               "fab.internal/rule=default-deny selecting every endpoint)", clusters[cluster].urn)


class _Source(NamedTuple):
    kind: str
    """A role, WORLD, RANGES, REMOTE_NODES, or "" for the pod's own cluster."""
    what: str


def _sources(entry: dict[str, Any], cluster: str, roles: dict[str, set[str]]) -> list[_Source]:
    """Who an ingress entry admits; a selector without a cluster label admits pods of every cluster (ClusterMesh)."""
    found: list[_Source] = []
    for selector in entry.get("fromEndpoints") or []:
        labels = (selector or {}).get("matchLabels") or {}
        named = labels.get(CLUSTER_LABEL) or labels.get(f"k8s:{CLUSTER_LABEL}")
        if named == cluster:
            found.append(_Source("", cluster))
        elif named is None:
            found.append(_Source("*", f"pods of every cluster (a selector without {CLUSTER_LABEL})"))
        elif named not in roles:
            found.append(_Source("?", f"{named}, which is not a cluster of this stack"))
        else:
            found += [_Source(role, f"{named} ({role})") for role in sorted(roles[named])]
    for entity in entry.get("fromEntities") or []:
        if entity in LOCAL_ENTITIES:
            found.append(_Source("", entity))
        elif entity == REMOTE_NODES:
            found.append(_Source(REMOTE_NODES, "remote nodes (remote-node)"))
        else:
            found.append(_Source(WORLD if entity == WORLD else "*", f"the {entity} entity"))
    for key in ("fromCIDR", "fromCIDRSet"):
        if entry.get(key):
            found.append(_Source(RANGES, f"address ranges ({key})"))
    for key in sorted(set(entry) - {"fromEndpoints", "fromEntities", "fromCIDR", "fromCIDRSet", "toPorts"}):
        found.append(_Source("*", f"sources by {key}"))
    return found


def _into(flow: dict[str, Any], destination: set[str]) -> bool:
    """Whether a flow of the table reaches a cluster of these roles (`*`: every cluster, not the API servers)."""
    return flow["to"] in destination or (flow["to"] == "*" and API_SERVERS not in destination)


def _approved(flows: list[dict[str, Any]], source: str, destination: set[str], port: Any) -> bool:
    return any(source in flow["from"] and _into(flow, destination) and str(flow["port"]) == str(port) for flow in flows)


def _admitted(flows: list[dict[str, Any]], destination: set[str]) -> str:
    pairs = sorted({(str(flow["port"]), source) for flow in flows if _into(flow, destination) for source in flow["from"]},
                   key=lambda p: (int(p[0]) if p[0].isdigit() else 0, p[1]))
    by_port: dict[str, list[str]] = defaultdict(list)
    for port, source in pairs:
        by_port[port].append(source)
    return "; ".join(f"{port} from {', '.join(sources)}" for port, sources in by_port.items()) or "nothing"


@stack_rule("fab-flow-direction",
            "Every allow rule of a Cilium network policy admits only a flow of the design's table: its sources (cluster "
            "role, world, ranges) reach the destination cluster's role on that port, and nothing from another cluster on "
            "every port.",
            settings={"flows": FLOWS_SETTING},
            place=160,
            docs="every allow rule of a Cilium network policy (cluster-wide or namespaced) admits only a flow of the design's "
                 "table: each source (a cluster by its role, as the components running there give it; `world`; address ranges; "
                 "remote nodes) reaches the destination cluster's role on that pod port; a selector without a cluster label "
                 "(every cluster) or a remote source on every port is refused; egress to addresses (the API servers of a "
                 "kube-apiserver flow) only from the roles the table names, and from Trino's namespace on compute to an external "
                 "catalog's database only: within the `cidrs` and on the port the stack's `compute.trino.external_catalogs` "
                 "declares (read from the stack's config), one TCP port and nothing more, or to the stack's internal VIP pools "
                 "and federated peers' ranges on ports of the table; by name only to the site's Keycloak (`keycloak.url`'s host "
                 "and port), and never to an entity that includes the world")
def flow_direction(args: StackValidationArgs, report: ReportViolation) -> None:
    """Ingress entries are checked on the cluster that enforces them (the destination); egress entries to addresses
    (`toCIDR`, the remote API servers of a kube-apiserver flow) on the source. Unknown values: a policy with an
    unknown part fails closed."""
    flows = list(args.get_config().get("flows", DESIGN_FLOWS))
    roles = cluster_roles(args.resources)
    databases = external_databases()
    site_ranges = in_site_ranges()
    for resource, obj in objects(args.resources):
        if obj["kind"] not in NETWORK_POLICIES:
            continue
        cluster = provider_name(resource)
        where = f"{obj['kind']} {name_of(obj)} on {cluster}"
        if problem := undecided(where, obj.get("spec"), ".spec"):
            report(problem, resource.urn)
            continue
        spec = obj.get("spec") or {}
        mine = roles.get(cluster, set())
        role = "/".join(sorted(mine)) or "no role"
        for entry in spec.get("ingress") or []:
            ports = _ports(entry)
            for source in _sources(entry, cluster, roles):
                if source.kind == "":
                    continue
                if not ports:
                    report(f"{where} ({role}) admits {source.what} on every port; name the flow's port", resource.urn)
                for port in ports:
                    if not _approved(flows, source.kind, mine, port):
                        report(f"{where} ({role}) admits {source.what} on port {port}, which is not a flow of the design's "
                               f"table (into {role}: {_admitted(flows, mine)})", resource.urn)
        external = "compute" in mine and field(obj, "spec", "endpointSelector", "matchLabels") == {NAMESPACE_SELECTOR: TRINO_NAMESPACE}
        for entry in spec.get("egress") or []:
            if external and databases is not None and (problem := _beyond_by_name(entry)):
                report(f"{where} ({role}) lets Trino's pods reach {problem}: outside the site they may reach only an "
                       "external catalog's database, by its ranges, and the site's Keycloak "
                       f"({_keycloak()}), by name", resource.urn)
                continue
            if not (entry.get("toCIDR") or entry.get("toCIDRSet")):
                continue
            if external and _to_database(entry, databases):
                continue  # an external catalog's database, on its port
            if external and databases is not None and _in_site(entry, flows, mine, site_ranges):
                continue  # S3 and Polaris by their VIPs, or a federated peer's, on the table's ports (fab-egress-trino)
            if external and databases is not None:
                report(f"{where} ({role}) lets Trino's pods reach {_destination(entry)}, which is not an external "
                       "catalog's database (compute.trino.external_catalogs: "
                       f"{'; '.join(d.describe() for d in databases) or 'none'}), nor an internal VIP pool or federated "
                       "peer's range of the stack on a port of the flow table", resource.urn)
                continue
            for port in _ports(entry) or ["every port"]:
                if not any(_approved(flows, own, {API_SERVERS}, port) for own in mine) or not mine:
                    report(f"{where} ({role}) lets its pods reach addresses outside the cluster on port {port}, which is "
                           f"not a flow of the design's table (to API servers: {_admitted(flows, {API_SERVERS})})",
                           resource.urn)


OUTSIDE_ENTITIES = frozenset({"world", "world-ipv4", "world-ipv6", "all"})
"""Cilium entities that include addresses outside the site."""


def _keycloak() -> str:
    endpoint = keycloak_endpoint()
    return f"{endpoint[0]} on {endpoint[1]}" if endpoint else "not configured"


def _beyond_by_name(entry: dict[str, Any]) -> str | None:
    """What an egress entry of Trino's pods reaches outside the site other than by address: an entity that includes
    the world, or a name other than the site's Keycloak on its port."""
    outside = sorted(OUTSIDE_ENTITIES & set(entry.get("toEntities") or []))
    if outside:
        return f"the entities {', '.join(outside)}"
    names = entry.get("toFQDNs") or []
    if not names:
        return None
    endpoint = keycloak_endpoint()
    ports = {str(port.get("port")) for rule in entry.get("toPorts") or [] for port in rule.get("ports") or []}
    if endpoint and all(item == {"matchName": endpoint[0]} for item in names) and ports == {endpoint[1]}:
        return None
    shown = ", ".join(str(item.get("matchName") or item.get("matchPattern")) for item in names)
    return f"{shown} on {', '.join(sorted(ports)) or 'every port'}"


def _cidrs(entry: dict[str, Any]) -> list[str]:
    """The ranges of an egress entry (`toCIDR`, `toCIDRSet`; an `except` only narrows one)."""
    return [*map(str, entry.get("toCIDR") or []), *(str(item.get("cidr")) for item in entry.get("toCIDRSet") or [])]


def _destination(entry: dict[str, Any]) -> str:
    ports = [f"{port.get('port')}/{port.get('protocol', 'ANY')}" for rule in entry.get("toPorts") or [] for port in rule.get("ports") or []]
    return f"{', '.join(_cidrs(entry))} on {', '.join(ports) or 'every port'}"


def _in_site(entry: dict[str, Any], flows: list[dict[str, Any]], mine: set[str], ranges: frozenset[str] | None = None) -> bool:
    """Whether an egress entry reaches only the site's internal VIP pools or federated peers' ranges (the stack's config),
    each port one the table lets the cluster's role reach another cluster's on."""
    cidrs = set(_cidrs(entry))
    ports = _ports(entry)
    roles = ("storage", "gpu", "compute")
    return (not set(entry) - {"toCIDR", "toCIDRSet", "toPorts"} and bool(cidrs) and cidrs <= (ranges or in_site_ranges())
            and bool(ports) and all(any(_approved(flows, own, {role}, port) for own in mine for role in roles) for port in ports))


def _to_database(entry: dict[str, Any], databases: list[ExternalDatabase] | None) -> bool:
    """Whether an egress entry reaches one configured database exactly: within its ranges, on its one TCP port, with no
    other rule (an L7 rule or a server name would be no database's)."""
    if databases is None or set(entry) - {"toCIDR", "toCIDRSet", "toPorts"}:
        return False
    rules = entry.get("toPorts") or []
    ports = [port for rule in rules for port in rule.get("ports") or []]
    if len(rules) != 1 or set(rules[0]) != {"ports"} or len(ports) != 1 or set(ports[0]) - {"port", "protocol"}:
        return False
    port, protocol = str(ports[0].get("port")), ports[0].get("protocol", "TCP")
    cidrs = set(_cidrs(entry))
    return protocol == "TCP" and any(cidrs and cidrs <= db.cidrs and port == str(db.port) for db in databases)


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
                      for c in CREDENTIALS},
            place=170,
            docs="every cluster holding S3 or Polaris credentials (the `s3-<engine>` and `polaris-<engine>` Secrets "
                 "StorageCluster delivers) is a source of the flow to that port; the cluster serving it needs none")
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


@resource_rule("fab-gateway-local-traffic", "Every Envoy Gateway LoadBalancer Service uses externalTrafficPolicy: Local.",
               place=60,
               docs="every Envoy Gateway LoadBalancer Service (the inference gateway's, the compute ingress's) uses "
                    "`externalTrafficPolicy: Local`")
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


@stack_rule("fab-routes-authenticated", "Every HTTPRoute on a GPU cluster, in the plan or applied by Argo CD from Git, is covered "
            "by a JWT SecurityPolicy and a rate limit.",
            place=70,
            docs="every HTTPRoute on a GPU cluster, in the plan or applied by Argo CD from Git, is covered by a JWT "
                 "SecurityPolicy and a rate limit; with routes from Git, the gateway itself carries both")
def routes_authenticated(args: StackValidationArgs, report: ReportViolation) -> None:
    """A route Argo CD applies (`inference.delivery: argocd`) is not in the plan: the policies that name it stand for it,
    and since the repository may hold a route the stack does not know, the gateway itself must carry both policies.
    Unknown values: a route or a policy whose identity or targets are unknown fails closed."""
    gpu = gpu_providers(args.resources)
    routes, named, gateways = {}, {}, {}
    jwt: set[tuple[str, str, str]] = set()
    limited: set[tuple[str, str, str]] = set()
    for resource, obj in objects(args.resources):
        cluster = provider_name(resource)
        if obj["kind"] == "Gateway" and cluster in gpu:
            gateways[("Gateway", namespace_of(obj), name_of(obj))] = (resource, cluster)
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
        if obj["kind"] == "HTTPRoute":
            if cluster in gpu:
                routes[("HTTPRoute", key_ns, name_of(obj))] = (resource, cluster)
            continue
        targets = {(t.get("kind"), key_ns, t.get("name")) for t in spec.get("targetRefs") or [] if t.get("kind") in ("HTTPRoute", "Gateway")}
        if cluster in gpu:
            named.update({t: (resource, cluster) for t in targets if t[0] == "HTTPRoute"})
        if obj["kind"] == "SecurityPolicy" and (spec.get("jwt") or {}).get("providers"):
            jwt |= targets
        if obj["kind"] == "BackendTrafficPolicy" and spec.get("rateLimit"):
            limited |= targets
    covered = {**{key: found for key, found in named.items() if key not in routes}, **routes}
    from_git = routes_from_git()
    covered.update({key: found for key, found in gateways.items() if found[1] == from_git})
    for key, (resource, cluster) in sorted(covered.items(), key=lambda item: item[0]):
        kind, namespace, name = key
        why = " (its routes come from Git: inference.delivery is argocd)" if kind == "Gateway" else ""
        if key not in jwt:
            report(f"{kind} {namespace}/{name} on {cluster} has no JWT SecurityPolicy{why}", resource.urn)
        if key not in limited:
            report(f"{kind} {namespace}/{name} on {cluster} has no rate limit (BackendTrafficPolicy){why}", resource.urn)
