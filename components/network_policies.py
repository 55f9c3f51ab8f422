"""The site's Cilium policies (DESIGN section 2): remote clusters denied by default, each flow of the flow table allowed
by one rule, the ClusterMesh API server reached by the other clusters' agents only, tenants kept apart, fences around
endpoints of one cluster, and default-deny egress for the source namespaces of world flows. CrossClusterNetwork
(components/network.py) applies the cluster-wide ones; components fence their own endpoints with `fence_policy`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from components import versions
from components.cilium import CILIUM_NAMESPACE, CLUSTERMESH_PORT, MeshCluster, cilium_object
from components.config import WORLD, Flow, names

RULE_LABEL = "fab.internal/rule"
"""Label on every generated Cilium policy: default-deny, flow or clustermesh."""
FLOW_LABEL = "fab.internal/flow"

CLUSTER_LABEL = "io.cilium.k8s.policy.cluster"
NAMESPACE_LABEL = "k8s:io.kubernetes.pod.namespace"
NAMESPACE_LABELS_PREFIX = "k8s:io.cilium.k8s.namespace.labels."
"""The prefix of a pod's identity labels that carry its namespace's labels: set by the platform, never by a pod's creator."""
DEFAULT_DENY_NAME = "fab-default-deny-remote"
CLUSTERMESH_RULE_NAME = "fab-clustermesh-apiserver"
TENANT_RULE_NAME = "fab-team-isolation"
LOCAL_ENTITIES = ["host", "health", "kube-apiserver", "ingress"]
"""What a pod accepts besides its own cluster's pods: its node (kubelet probes), cilium-health, the
API server (webhooks) and Cilium's own ingress. `remote-node` is left out on purpose: in a
ClusterMesh it covers every node of every remote cluster, including their host-network pods."""


@dataclass(frozen=True)
class OutsideCalls:
    """What the pods of a world flow's source namespace (Trino's) call outside their own cluster besides their world flows:
    the site's flows they use (by name), services outside the site by DNS name, and federated sites' ranges."""

    flows: tuple[str, ...] = ()
    """Flows of the table whose destinations the pods call (Trino: S3 and Polaris): the destination pods (a global
    service's remote backends) on the pods' port, and the destination clusters' internal VIPs on the flow's port."""
    hosts: tuple[tuple[str, int], ...] = ()
    """(DNS name, port) outside the site (Trino: the site's Keycloak, for its OAuth2 sign-in)."""
    peer_ranges: tuple[str, ...] = ()
    """Federated sites' ranges (`federation.ranges` of the peers it reads), reached on the ports of `flows`: a peer is a
    site of this program, its Polaris and S3 on the same ports."""


Tenants = dict[str, dict[str, str]]
"""The site's tenants (its teams, and linked peers' teams that train here), by name: the namespace labels, set by the
platform (components/training.py `tenant_labels`), that mark each tenant's namespaces."""


def _pod_selector(namespace: str | None, labels: dict[str, str], cluster_name: str | None = None) -> dict[str, Any]:
    match = dict(labels)
    if namespace:
        match[NAMESPACE_LABEL] = namespace
    if cluster_name:
        match[CLUSTER_LABEL] = cluster_name
    return {"matchLabels": match}


def _ports(port: int, protocol: str) -> list[dict[str, Any]]:
    return [{"ports": [{"port": str(port), "protocol": protocol}]}]


def default_deny_policy(cluster: MeshCluster) -> dict[str, Any]:
    return cilium_object(
        "CiliumClusterwideNetworkPolicy",
        DEFAULT_DENY_NAME,
        {
            "description": "Default deny from remote clusters and outside the site: pods accept their own cluster's "
            "pods and local infrastructure only; every cross-cluster flow is allowed by a fab-flow-* rule.",
            "endpointSelector": {},
            "ingress": [
                {"fromEndpoints": [{"matchLabels": {CLUSTER_LABEL: cluster.name}}]},
                {"fromEntities": list(LOCAL_ENTITIES)},
            ],
        },
        labels={RULE_LABEL: "default-deny"},
    )


def clustermesh_policy(clusters: dict[str, MeshCluster], key: str) -> dict[str, Any]:
    """Let the other clusters' agents reach this cluster's ClusterMesh API server, and nothing else of it."""
    others = [other for other_key, other in sorted(clusters.items()) if other_key != key]
    return cilium_object(
        "CiliumClusterwideNetworkPolicy",
        CLUSTERMESH_RULE_NAME,
        {
            "description": "ClusterMesh: remote cluster agents (by node range until the mesh knows them, then as "
            "remote nodes) reach the clustermesh-apiserver etcd port; no pod does (the local agents run on the host "
            "network).",
            "endpointSelector": _pod_selector(CILIUM_NAMESPACE, {"k8s-app": "clustermesh-apiserver"}),
            "ingress": [
                {
                    "fromCIDRSet": [{"cidr": str(other.config.node_cidr)} for other in others],
                    "toPorts": _ports(CLUSTERMESH_PORT, "TCP"),
                },
                {"fromEntities": ["remote-node"], "toPorts": _ports(CLUSTERMESH_PORT, "TCP")},
            ],
            # The default deny admits every pod of the cluster, and an allow cannot take that back: the etcd port is
            # denied to every pod (a namespace label: pods only; agents, nodes and the remote ranges are no pods).
            "ingressDeny": [
                {"fromEndpoints": [{"matchExpressions": [{"key": NAMESPACE_LABEL, "operator": "Exists"}]}],
                 "toPorts": _ports(CLUSTERMESH_PORT, "TCP")},
            ],
        },
        labels={RULE_LABEL: "clustermesh"},
    )


def flow_ingress_policy(clusters: dict[str, MeshCluster], name: str, flow: Flow) -> dict[str, Any]:
    """A pods flow, enforced on the destination cluster's pods."""
    ingress: list[dict[str, Any]] = []
    sources = [source for source in flow.sources if source != WORLD]
    if sources:
        ingress.append(
            {
                "fromEndpoints": [
                    _pod_selector(flow.from_namespace, flow.from_labels, clusters[source].name) for source in sources
                ],
                "toPorts": _ports(flow.pod_port, flow.protocol),
            }
        )
    if WORLD in flow.sources:
        ingress.append({"fromEntities": [WORLD], "toPorts": _ports(flow.pod_port, flow.protocol)})
    if flow.from_cidrs:
        ingress.append({"fromCIDRSet": [{"cidr": str(cidr)} for cidr in flow.from_cidrs], "toPorts": _ports(flow.pod_port, flow.protocol)})
    return cilium_object(
        "CiliumClusterwideNetworkPolicy",
        names.FLOW_POLICY(name),
        {
            "description": flow.description or f"Allowed cross-cluster flow {name}.",
            "endpointSelector": _pod_selector(flow.to_namespace, flow.to_labels),
            "ingress": ingress,
        },
        labels={RULE_LABEL: "flow", FLOW_LABEL: name},
    )


def flow_apiserver_policy(clusters: dict[str, MeshCluster], name: str, flow: Flow, key: str) -> dict[str, Any]:
    """A kube-apiserver flow, enforced as egress on the client pods: the remote API server is not a Cilium endpoint.

    The client pods (on cluster `key`) then reach only their own API server, cluster DNS, the pods of their own namespace
    on their own cluster (Argo CD's controller works through its repo server and Redis) and the destinations' API VIPs.
    """
    return cilium_object(
        "CiliumClusterwideNetworkPolicy",
        names.FLOW_POLICY(name),
        {
            "description": flow.description or f"Allowed cross-cluster flow {name}.",
            "endpointSelector": _pod_selector(flow.from_namespace, flow.from_labels),
            "egress": [
                {"toEntities": ["kube-apiserver"]},
                {
                    "toEndpoints": [_pod_selector(CILIUM_NAMESPACE, {"k8s-app": "kube-dns"})],
                    "toPorts": [{"ports": [{"port": "53", "protocol": "UDP"}, {"port": "53", "protocol": "TCP"}]}],
                },
                {
                    "toCIDR": [f"{clusters[dest].config.api_server}/32" for dest in flow.to],
                    "toPorts": _ports(flow.pod_port, flow.protocol),
                },
                {"toEndpoints": [_pod_selector(flow.from_namespace, {}, clusters[key].name)]},
            ],
        },
        labels={RULE_LABEL: "flow", FLOW_LABEL: name},
    )


FenceSources = dict[str, dict[str, list[str]]]
"""Who a fenced endpoint admits, by namespace: the pods of the namespace whose label `key` is one of its values, for
every key given (an empty dict: every pod of the namespace)."""


def fence_spec(description: str, selector: dict[str, str], sources: FenceSources) -> dict[str, Any]:
    """The spec of a namespaced CiliumNetworkPolicy that refuses the selected pods to every pod of their cluster but
    `sources`, on every port.

    The cluster-wide default deny (`default_deny_policy`) admits every pod of a pod's own cluster, and Cilium adds allow
    rules up: another allow could not narrow it. A deny wins over any allow, so the fence is a list of `ingressDeny`
    selectors: every pod of another namespace (the namespace key `Exists`, so Cilium adds no namespace of its own and the
    node, health checks and the API server, which are no pods, stay admitted), and per source namespace, every pod whose
    label lacks the allowed values (`NotIn` also matches a pod without the label). Selectors name no cluster: under
    `clustermesh.policyDefaultLocalCluster` they select this cluster's pods, and other clusters' reach it only by a flow.
    """
    others = [{"key": NAMESPACE_LABEL, "operator": "Exists"},
              *([{"key": NAMESPACE_LABEL, "operator": "NotIn", "values": sorted(sources)}] if sources else [])]
    deny: list[dict[str, Any]] = [{"fromEndpoints": [{"matchExpressions": others}]}]
    for ns, labels in sorted(sources.items()):
        for key, values in sorted(labels.items()):
            deny.append({"fromEndpoints": [{"matchLabels": {NAMESPACE_LABEL: ns},
                                            "matchExpressions": [{"key": f"k8s:{key}", "operator": "NotIn", "values": sorted(values)}]}]})
    return {"description": description, "endpointSelector": {"matchLabels": dict(selector)}, "ingressDeny": deny}


def fence_policy(name: str, namespace_: str, description: str, selector: dict[str, str], sources: FenceSources) -> dict[str, Any]:
    """`fence_spec` as a CiliumNetworkPolicy `name` in `namespace_`, labelled `fab.internal/rule: fence`."""
    return {"apiVersion": versions.CILIUM_API, "kind": "CiliumNetworkPolicy",
            "metadata": {"name": name, "namespace": namespace_, "labels": {RULE_LABEL: "fence"}},
            "spec": fence_spec(description, selector, sources)}


def tenant_isolation_spec(name: str, labels: dict[str, str], keys: list[str]) -> dict[str, Any]:
    """The rule that refuses a tenant's pods (those of namespaces carrying all of `labels`) to every other tenant's pods
    of the same cluster, on every port.

    Another tenant's pod is one whose namespace carries a tenant key (`keys`: every key that marks a tenant) with another
    value, or a key this tenant's namespaces lack; a namespace's labels are the platform's, which a pod's creator cannot
    choose (and a team cannot relabel its namespace). The same test on the pod's own labels refuses pods the platform
    labels with another tenant in a namespace tenants share (a notebook server carries its team); a pod that drops or
    forges that label is still refused by its namespace. Deny rules only, and no default deny of their own: whatever else
    reaches the tenant's pods (their own tenant's pods in every namespace of it, the platform's controllers, Prometheus,
    the notebooks hub) is left as the other rules say, and selectors without a cluster key match this cluster's pods only
    (`policyDefaultLocalCluster`): other clusters' pods reach a tenant by the flow table alone.
    """
    others: list[dict[str, Any]] = []
    for prefix in (NAMESPACE_LABELS_PREFIX, "k8s:"):
        for key in sorted(keys):
            expressions = [{"key": NAMESPACE_LABEL, "operator": "Exists"}, {"key": f"{prefix}{key}", "operator": "Exists"}]
            if key in labels:
                expressions.append({"key": f"{prefix}{key}", "operator": "NotIn", "values": [labels[key]]})
            others.append({"matchExpressions": expressions})
    return {
        "description": f"Tenant {name}: no pod of another tenant on this cluster reaches its pods.",
        "endpointSelector": {"matchLabels": {f"{NAMESPACE_LABELS_PREFIX}{key}": value for key, value in sorted(labels.items())}},
        "enableDefaultDeny": dict(NO_DEFAULT_DENY),
        "ingressDeny": [{"fromEndpoints": others}],
    }


def tenant_isolation_policy(tenants: Tenants) -> dict[str, Any] | None:
    """One rule per tenant (`tenant_isolation_spec`) in one CiliumClusterwideNetworkPolicy; None without tenants."""
    if not tenants:
        return None
    for name, labels in sorted(tenants.items()):
        if not labels:
            raise ValueError(f"tenant {name!r} has no namespace labels: its rule would select every pod of the cluster")
    keys = sorted({key for labels in tenants.values() for key in labels})
    return cilium_object("CiliumClusterwideNetworkPolicy", TENANT_RULE_NAME, None, labels={RULE_LABEL: "tenant"},
               specs=[tenant_isolation_spec(name, labels, keys) for name, labels in sorted(tenants.items())])


HUBBLE_RELAY_FENCE = "fab-hubble-relay"
HUBBLE_UI_FENCE = "fab-hubble-ui"


def hubble_fences(hubble_ui: bool) -> list[dict[str, Any]]:
    """Hubble Relay answers the flows of every pod of the cluster, and the UI shows them: Relay admits the UI's pods only
    (the agents' Hubble servers are called by Relay, not the other way round), and the UI no pod at all (an admin reaches
    it with `kubectl port-forward`, which enters the pod's own network namespace and no policy sees)."""
    fences = [fence_policy(HUBBLE_RELAY_FENCE, CILIUM_NAMESPACE, "Hubble Relay: only the Hubble UI reaches it.",
                           {"k8s-app": "hubble-relay"}, {CILIUM_NAMESPACE: {"k8s-app": ["hubble-ui"]}})]
    if hubble_ui:
        fences.append(fence_policy(HUBBLE_UI_FENCE, CILIUM_NAMESPACE, "Hubble UI: no pod reaches it (admins port-forward).",
                                   {"k8s-app": "hubble-ui"}, {}))
    return fences


NO_DEFAULT_DENY = {"ingress": False, "egress": False}
"""A policy that only adds an allow or a deny, without turning on default-deny for the pods it selects: egress is not
default-denied on the site's clusters, and a world flow's rules must not cut the selected pods off from anything else."""


def flow_egress_policies(name: str, flow: Flow) -> list[dict[str, Any]]:
    """A world flow, enforced on the source cluster: the source pods may reach the flow's ranges on its port, and every
    other pod of the cluster is denied them (a deny wins over any allow)."""
    to = [{"toCIDRSet": [{"cidr": str(cidr)} for cidr in flow.to_cidrs], "toPorts": _ports(flow.pod_port, flow.protocol)}]
    description = flow.description or f"Allowed flow {name} to addresses outside the site."
    others: dict[str, Any] = {"matchExpressions": [{"key": NAMESPACE_LABEL, "operator": "NotIn", "values": [flow.from_namespace]}]}
    labels = {RULE_LABEL: "flow", FLOW_LABEL: name}
    return [
        cilium_object("CiliumClusterwideNetworkPolicy", names.FLOW_POLICY(name), {
            "description": description,
            "endpointSelector": _pod_selector(flow.from_namespace, flow.from_labels),
            "enableDefaultDeny": dict(NO_DEFAULT_DENY),
            "egress": to,
        }, labels=labels),
        cilium_object("CiliumClusterwideNetworkPolicy", names.WORLD_DENY_POLICY(name), {
            "description": f"Only the pods of {flow.from_namespace} reach this address: {description}",
            "endpointSelector": others,
            "enableDefaultDeny": dict(NO_DEFAULT_DENY),
            "egressDeny": to,
        }, labels=labels),
    ]


DNS_PORTS = [{"ports": [{"port": "53", "protocol": "UDP"}, {"port": "53", "protocol": "TCP"}],
              "rules": {"dns": [{"matchPattern": "*"}]}}]
"""Cluster DNS through Cilium's DNS proxy, which a `toFQDNs` rule needs to learn the addresses a name resolves to."""


def api_caller_egress(labels: dict[str, str], hosts: tuple[tuple[str, int], ...]) -> dict[str, Any]:
    """The spec of a namespaced CiliumNetworkPolicy for the pods with `labels` that call their own cluster's API server
    and a few DNS names outside the site (a sync job: Trino's groups from Keycloak): egress to the API server, cluster DNS
    (through Cilium's DNS proxy, which `toFQDNs` needs) and `hosts` (DNS name, port). Cilium adds allow rules up across
    policies: where the namespace's own egress policy also selects these pods (`namespace_egress_policy`, which admits
    no API server), they reach what it allows as well; this policy adds what the job needs, it narrows nothing."""
    return {
        "description": "Egress of the sync job: its cluster's API server, cluster DNS and its outside hosts.",
        "endpointSelector": {"matchLabels": dict(labels)},
        "egress": [
            {"toEntities": ["kube-apiserver"]},
            {"toEndpoints": [_pod_selector(CILIUM_NAMESPACE, {"k8s-app": "kube-dns"})], "toPorts": DNS_PORTS},
            *({"toFQDNs": [{"matchName": host}], "toPorts": _ports(port, "TCP")} for host, port in hosts),
        ],
    }


def namespace_egress_policy(clusters: dict[str, MeshCluster], key: str, source_namespace: str, flows: dict[str, Flow],
                            calls: OutsideCalls) -> dict[str, Any]:
    """Default-deny egress for the pods of a world flow's source namespace on cluster `key`: they reach cluster DNS, the
    pods of their own cluster, the destinations of the flows they use (pods across the mesh, the destination clusters'
    internal VIPs), their DNS names outside the site, federated sites' ranges, and their world flows (`fab-flow-<name>`,
    whose allow rules add to this policy's); nothing else leaves the cluster."""
    egress: list[dict[str, Any]] = [
        {"toEndpoints": [_pod_selector(CILIUM_NAMESPACE, {"k8s-app": "kube-dns"}, clusters[key].name)], "toPorts": DNS_PORTS},
        {"toEndpoints": [{"matchLabels": {CLUSTER_LABEL: clusters[key].name}}]},
    ]
    used = [flows[name] for name in calls.flows if name in flows and key in flows[name].sources and flows[name].target == "pods"]
    for flow in used:
        for dest in flow.to:
            egress.append({"toEndpoints": [_pod_selector(flow.to_namespace, flow.to_labels, clusters[dest].name)],
                           "toPorts": _ports(flow.pod_port, flow.protocol)})
            vips = [str(cidr) for _, pool in sorted(clusters[dest].config.lb_pools.items()) if pool.visibility == "internal"
                    for cidr in pool.cidrs]
            if vips:
                egress.append({"toCIDRSet": [{"cidr": cidr} for cidr in vips], "toPorts": _ports(flow.port, flow.protocol)})
    for host, port in calls.hosts:
        egress.append({"toFQDNs": [{"matchName": host}], "toPorts": _ports(port, "TCP")})
    if calls.peer_ranges and used:
        ports = sorted({(flow.port, flow.protocol) for flow in used})
        egress.append({"toCIDRSet": [{"cidr": cidr} for cidr in calls.peer_ranges],
                       "toPorts": [{"ports": [{"port": str(port), "protocol": protocol} for port, protocol in ports]}]})
    return cilium_object("CiliumClusterwideNetworkPolicy", names.EGRESS_POLICY(source_namespace), {
        "description": f"Default-deny egress of {source_namespace}: DNS, its own cluster, the site's flows it uses, its outside "
                       "services and its world flows only.",
        "endpointSelector": _pod_selector(source_namespace, {}),
        "egress": egress,
    }, labels={RULE_LABEL: "egress"})
