"""CrossClusterNetwork: Cilium native routing, BGP, LB-IPAM, ClusterMesh and default-deny flows (DESIGN section 2).

Per cluster: the pinned Cilium release (unless Cilium is pre-installed), LB-IPAM pools, the BGP
control plane objects that advertise Pod CIDRs and internal VIPs to private peers only and external
VIPs to public peers only, and the cross-cluster policy: remote clusters are denied by default and
each flow of the site's flow table is allowed by one rule. This is the only component that spans
clusters, so every child names its cluster's provider explicitly.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import pulumi_tls as tls

from components import versions
from components.config import CILIUM_RELEASE, WORLD, AdoptConfig, ClusterConfig, Flow, names
from components.constants import AFFINITY_SERVICE_ANNOTATION, GLOBAL_SERVICE_ANNOTATION, SHARED_SERVICE_ANNOTATION
from components.kube import Adoption, FlatCustomResource, helm_release, namespace, pull_secret
from components.monitors import cilium_metrics_values
from components.providers import ClusterRef, SiteRef

POOL_LABEL = "lb.fab.internal/pool"
"""Service label that picks the LB-IPAM pool (and so the BGP advertisement) of a LoadBalancer Service."""
ADVERTISE_LABEL = "bgp.fab.internal/advertise"
"""CiliumBGPAdvertisement label that a CiliumBGPPeerConfig selects: private or public."""
RULE_LABEL = "fab.internal/rule"
"""Label on every generated Cilium policy: default-deny, flow or clustermesh."""
FLOW_LABEL = "fab.internal/flow"

CILIUM_NAMESPACE = CILIUM_RELEASE.split("/")[0]
CLUSTERMESH_PORT = 2379
CLUSTERMESH_SERVICE = "clustermesh-apiserver-vip"
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
class MeshCluster:
    """One cluster of the site as the network builds it: its reference and its config (`clusters.<key>`)."""

    ref: ClusterRef
    config: ClusterConfig

    @property
    def name(self) -> str:
        return self.ref.name


@dataclass(frozen=True)
class GlobalService:
    """A ClusterMesh global service: the Service `name` in `namespace` on the cluster that runs its backends, repeated
    with the same name, namespace and ports (Cilium pairs backends by port name) on every cluster whose clients call it.

    `local_first` adds Cilium's `affinity: local` on every cluster: a cluster's load balancer prefers its own healthy
    backends and uses remote ones only when it has none, so clients of the cluster that runs the backends stay there.
    """

    name: str
    namespace: str
    ports: tuple[tuple[str, int], ...]
    """(port name, port) of every port, as the backends' Service declares them."""
    local_first: bool = False

    @property
    def host(self) -> str:
        """The cluster-local name clients in every cluster of the site call."""
        return f"{self.name}.{self.namespace}.svc"

    def backend_annotations(self) -> dict[str, str]:
        """Annotations of the Service that selects the backends: global, its backends shared with the other clusters."""
        return {GLOBAL_SERVICE_ANNOTATION: "true", **({AFFINITY_SERVICE_ANNOTATION: "local"} if self.local_first else {})}

    def consumer_annotations(self) -> dict[str, str]:
        """Annotations of a consumer cluster's Service: global, and sharing nothing (it has no backends of its own)."""
        return {**self.backend_annotations(), SHARED_SERVICE_ANNOTATION: "false"}


def consumer_service(service: GlobalService) -> dict[str, Any]:
    """The Service of a consumer cluster: no selector, so no local endpoints; Cilium fills in the remote backends."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": service.name, "namespace": service.namespace, "annotations": service.consumer_annotations()},
        "spec": {
            "type": "ClusterIP",
            "ports": [{"name": port_name, "port": port, "protocol": "TCP"} for port_name, port in service.ports],
        },
    }


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


@dataclass(frozen=True)
class CrossClusterNetworkArgs:
    site: SiteRef
    """The site, whose name the ClusterMesh CA carries."""
    clusters: dict[str, ClusterRef]
    """Every cluster of the site, by key: the network spans them all."""
    cluster_configs: dict[str, ClusterConfig]
    """The `clusters` section: each cluster's ranges, LB pools, BGP peers and Cilium settings, by key."""
    flows: dict[str, Flow]
    """The flow table in force, by flow name."""
    adopt: AdoptConfig
    """Declares the Cilium releases (and the namespaces of consumer Services) that are installed already."""
    outside_calls: dict[str, OutsideCalls] = field(default_factory=dict)
    """Per source namespace of a world flow (Trino's), what else it calls: its egress is default-denied to everything but
    that, its own cluster, DNS and its world flows (`namespace_egress_policy`)."""
    tenants: Tenants = field(default_factory=dict)
    """The site's tenants by name, each with the namespace labels that mark its namespaces: on every cluster, no pod of one
    reaches another's pods (`tenant_isolation_policy`)."""
    global_services: bool = False
    """Polaris and the inference gateway are ClusterMesh global services (`global_services`): their components annotate
    their Services, and `consume_global_service` repeats them on the client clusters."""


class CrossClusterNetwork(pulumi.ComponentResource):
    """The site's network: Cilium on every cluster, BGP, LB-IPAM pools, ClusterMesh and cross-cluster policy."""

    clusters: pulumi.Output[dict[str, Any]]
    """Per cluster key: its pools, BGP peers and the flows allowed into and out of it."""
    flows: pulumi.Output[dict[str, Any]]
    """The flow table in force, by flow name."""

    def __init__(self, name: str, args: CrossClusterNetworkArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("fab:network:CrossClusterNetwork", name, None, opts)
        self._clusters = clusters = {key: MeshCluster(ref, args.cluster_configs[key]) for key, ref in sorted(args.clusters.items())}
        self._name, self._adopt = name, args.adopt
        self.global_services = args.global_services
        """Whether the site announces its shared endpoints as ClusterMesh global services."""
        flows = args.flows
        ca_cert, ca_key = self._clustermesh_ca(name, args.site)

        self.cilium_releases: dict[str, k8s.helm.v3.Release] = {}
        self._pools: dict[tuple[str, str], k8s.apiextensions.CustomResource] = {}
        for key, cluster in clusters.items():
            opts_k = pulumi.ResourceOptions(parent=self, provider=cluster.ref.provider)
            prefix = f"{name}-{key}"
            # kube-system exists on every cluster, so no namespace() brings the site's pull Secret there: Cilium's pods
            # name it, and `fabctl verify` copies it from there into the namespaces of its acceptance jobs.
            secret = pull_secret(f"{prefix}-kube-system-pull-secret", CILIUM_NAMESPACE, cluster.ref.registry, opts_k)
            if cluster.config.cilium.managed:
                # The release waits for Cilium's pods to be ready, and they pull their images with that Secret.
                self.cilium_releases[key] = helm_release(
                    f"{prefix}-cilium", versions.CILIUM, name="cilium", namespace=CILIUM_NAMESPACE,
                    values=cilium_values(clusters, key, ca_cert, ca_key),
                    opts=pulumi.ResourceOptions.merge(opts_k, pulumi.ResourceOptions(depends_on=[secret] if secret else [])),
                    adopt=Adoption(args.adopt, key), registry=cluster.ref.registry,
                )
            # The operator registers Cilium's CRDs when it starts, so the objects wait for the release.
            release = self.cilium_releases.get(key)
            crs = pulumi.ResourceOptions.merge(opts_k, pulumi.ResourceOptions(depends_on=[release] if release else []))
            for obj in cluster_objects(clusters, key, flows, args.outside_calls, args.tenants):
                if "specs" in obj:  # a policy of several rules: CustomResource carries `spec` only
                    FlatCustomResource(f"{prefix}-{_logical_suffix(obj)}", obj["apiVersion"], obj["kind"], obj["metadata"],
                                       {"specs": obj["specs"]}, opts=crs)
                    continue
                resource = k8s.apiextensions.CustomResource(
                    f"{prefix}-{_logical_suffix(obj)}",
                    api_version=obj["apiVersion"],
                    kind=obj["kind"],
                    metadata=obj["metadata"],
                    spec=obj["spec"],
                    opts=crs,
                )
                if obj["kind"] == "CiliumLoadBalancerIPPool":
                    self._pools[key, obj["metadata"]["name"]] = resource
            if release is not None:
                self._clustermesh_service(prefix, key, opts_k, release)

        self.clusters = pulumi.Output.from_input({key: cluster_summary(cluster, flows) for key, cluster in clusters.items()})
        self.flows = pulumi.Output.from_input({n: f.model_dump(mode="json", by_alias=True, exclude_defaults=True) for n, f in sorted(flows.items())})
        self.register_outputs({"clusters": self.clusters, "flows": self.flows})

    def lb_service_labels(self, cluster_key: str, pool: str) -> dict[str, str]:
        """Labels that give a LoadBalancer Service an address from `pool` of `cluster_key` (and its BGP route)."""
        return lb_service_labels(cluster_key, self._clusters[cluster_key].config, pool)

    def lb_pool(self, cluster_key: str, pool: str) -> k8s.apiextensions.CustomResource:
        """The LB-IPAM pool object: a LoadBalancer Service that Pulumi waits on (for its address) depends on it."""
        self.lb_service_labels(cluster_key, pool)  # the same error for an unknown pool
        return self._pools[cluster_key, pool]

    def consume_global_service(self, service: GlobalService, consumers: list[str],
                               after: dict[str, list[pulumi.Resource]] | None = None) -> dict[str, k8s.core.v1.Service]:
        """The consumer Service of `service` on each cluster of `consumers`, by cluster key. On a cluster that `after`
        names, the namespace exists already and the Service waits for those resources; elsewhere it gets its namespace."""
        after = after or {}
        created = {}
        for key in consumers:
            cluster = self._clusters[key].ref
            opts = pulumi.ResourceOptions(parent=self, provider=cluster.provider)
            prefix = f"{self._name}-{key}-global-{service.namespace}-{service.name}"
            waits = after.get(key)
            if waits is None:
                waits = [namespace(f"{prefix}-ns", service.namespace, opts, registry=cluster.registry, adopt=Adoption(self._adopt, key))]
            obj = consumer_service(service)
            # The namespace must exist before the Service is created in it.
            created[key] = k8s.core.v1.Service(
                prefix, metadata=obj["metadata"], spec=obj["spec"],
                opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=waits)),
            )
        return created

    def _clustermesh_service(self, prefix: str, key: str, opts: pulumi.ResourceOptions, release: pulumi.Resource) -> None:
        """The ClusterMesh API server at its fixed VIP, beside the chart's ClusterIP Service.

        A Helm release waits until its LoadBalancer Services have an address, and the only pool that can
        give this one its address is created after the release (Cilium registers the pool's CRD when it
        starts): the chart's Service stays ClusterIP and this one waits for the release and the pool.
        """
        cluster = self._clusters[key].config
        k8s.core.v1.Service(
            f"{prefix}-clustermesh-apiserver",
            metadata={
                "name": CLUSTERMESH_SERVICE,
                "namespace": CILIUM_NAMESPACE,
                "labels": self.lb_service_labels(key, cluster.clustermesh_pool),
                "annotations": {"lbipam.cilium.io/ips": str(cluster.clustermesh_vip)},
            },
            spec={
                "type": "LoadBalancer",
                # Local keeps the remote agents' node addresses, which the clustermesh rule allows.
                "externalTrafficPolicy": "Local",
                # Each replica runs its own etcd: a client that changes replicas has to resync.
                "sessionAffinity": "ClientIP",
                "selector": {"k8s-app": "clustermesh-apiserver"},
                "ports": [{"name": "etcd", "port": CLUSTERMESH_PORT, "targetPort": CLUSTERMESH_PORT, "protocol": "TCP"}],
            },
            opts=pulumi.ResourceOptions.merge(
                opts, pulumi.ResourceOptions(depends_on=[release, self.lb_pool(key, cluster.clustermesh_pool)])
            ),
        )

    def _clustermesh_ca(self, name: str, site: SiteRef) -> tuple[pulumi.Output[str], pulumi.Output[str]]:
        """One CA per site so that every cluster's ClusterMesh certificates trust each other; its key is a Pulumi secret."""
        key = tls.PrivateKey(f"{name}-clustermesh-ca", algorithm="RSA", rsa_bits=4096, opts=pulumi.ResourceOptions(parent=self))
        cert = tls.SelfSignedCert(
            f"{name}-clustermesh-ca",
            private_key_pem=key.private_key_pem,
            is_ca_certificate=True,
            subject=tls.SelfSignedCertSubjectArgs(common_name=f"Cilium ClusterMesh CA {site.name}", organization="fab-platform"),
            validity_period_hours=10 * 365 * 24,
            early_renewal_hours=365 * 24,
            allowed_uses=["cert_signing", "crl_signing", "digital_signature", "key_encipherment"],
            opts=pulumi.ResourceOptions(parent=self),
        )
        return cert.cert_pem, pulumi.Output.secret(key.private_key_pem)


def lb_service_labels(cluster_key: str, cluster: ClusterConfig, pool: str) -> dict[str, str]:
    if pool not in cluster.lb_pools:
        raise ValueError(f"cluster {cluster_key!r} has no LB pool {pool!r}; pools: {', '.join(sorted(cluster.lb_pools))}")
    return {POOL_LABEL: pool}


def _logical_suffix(obj: dict[str, Any]) -> str:
    """Logical-name suffix of a Cilium object, derived from its kind and metadata.name (never a position)."""
    short = {
        "CiliumLoadBalancerIPPool": "pool",
        "CiliumBGPClusterConfig": "bgp",
        "CiliumBGPPeerConfig": "bgp-peer",
        "CiliumBGPAdvertisement": "bgp-adv",
        "CiliumClusterwideNetworkPolicy": "policy",
        "CiliumNetworkPolicy": "fence",
    }[obj["kind"]]
    return f"{short}-{obj['metadata']['name']}"


def _b64(text: pulumi.Input[str]) -> pulumi.Output[str]:
    return pulumi.Output.from_input(text).apply(lambda pem: base64.b64encode(pem.encode()).decode())


def cilium_values(clusters: dict[str, MeshCluster], key: str, ca_cert: pulumi.Input[str], ca_key: pulumi.Input[str]) -> dict[str, Any]:
    """Helm values of the Cilium 1.18 chart for one cluster of the site."""
    cluster = clusters[key].config
    metrics = cilium_metrics_values()
    peers = [
        {"name": other.name, "port": CLUSTERMESH_PORT, "ips": [str(other.config.clustermesh_vip)]}
        for other_key, other in sorted(clusters.items())
        if other_key != key
    ]
    return {
        "cluster": {"name": clusters[key].name, "id": cluster.cluster_id},
        "routingMode": "native",
        # Pod ranges are advertised over BGP, so pods are routable and keep their source address across
        # clusters: that is what lets a remote pod's identity (and so the flow rules) apply.
        "ipv4NativeRoutingCIDR": str(cluster.pod_cidr),
        "enableIPv4Masquerade": False,
        "autoDirectNodeRoutes": False,
        "kubeProxyReplacement": True,
        "k8sServiceHost": str(cluster.api_server),
        "k8sServicePort": cluster.api_server_port,
        "ipam": {"mode": "cluster-pool", "operator": {"clusterPoolIPv4PodCIDRList": [str(cluster.pod_cidr)]}},
        "bgpControlPlane": {"enabled": True},
        # WireGuard between every pair of nodes, the other clusters' included (ClusterMesh shares their CiliumNodes and so
        # their public keys): traffic between clusters crosses the site's network encrypted.
        "encryption": {"enabled": cluster.cilium.encryption == "wireguard", "type": "wireguard"},
        # Metrics of the agent, the operator and Hubble (components/monitors.py scrapes them; issue 19).
        "prometheus": metrics["prometheus"],
        "operator": {"replicas": cluster.cilium.operator_replicas, **metrics["operator"]},
        "tls": {"ca": {"cert": _b64(ca_cert), "key": _b64(ca_key)}},
        "clustermesh": {
            "useAPIServer": True,
            # Selectors without a cluster label match this cluster only; remote peers must be named.
            "policyDefaultLocalCluster": True,
            "apiserver": {
                # In-cluster only: the fixed VIP is CrossClusterNetwork's own Service (see _clustermesh_service).
                # null drops the chart's externalTrafficPolicy, which a ClusterIP Service may not carry.
                "service": {"type": "ClusterIP", "externalTrafficPolicy": None},
                "tls": {"auto": {"enabled": True, "method": "helm"}},
            },
            "config": {"enabled": True, "clusters": peers},
        },
        "hubble": {
            "enabled": True,
            "tls": {"auto": {"enabled": True, "method": "helm"}},
            "relay": {"enabled": True},
            "ui": {"enabled": cluster.cilium.hubble_ui},
            **metrics["hubble"],
        },
    }


def _meta(name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if labels:
        meta["labels"] = labels
    return meta


def _cr(kind: str, name: str, spec: dict[str, Any] | None, labels: dict[str, str] | None = None,
        specs: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """A Cilium object with its `spec`, or a policy with a list of rules (`specs`) instead."""
    body = {"spec": spec} if specs is None else {"specs": specs}
    return {"apiVersion": versions.CILIUM_API, "kind": kind, "metadata": _meta(name, labels), **body}


def pool_objects(cluster: ClusterConfig) -> list[dict[str, Any]]:
    return [
        _cr(
            "CiliumLoadBalancerIPPool",
            pool_name,
            {"blocks": [{"cidr": str(cidr)} for cidr in pool.cidrs], "serviceSelector": {"matchLabels": {POOL_LABEL: pool_name}}},
            labels={ADVERTISE_LABEL: _advertise_class(pool.visibility)},
        )
        for pool_name, pool in sorted(cluster.lb_pools.items())
    ]


def _advertise_class(visibility: str) -> str:
    return "private" if visibility == "internal" else "public"


def bgp_objects(mesh_cluster: MeshCluster) -> list[dict[str, Any]]:
    """BGP control plane objects: one instance, a peer config and an advertisement per peer class in use."""
    cluster = mesh_cluster.config
    pools_by_class: dict[str, list[str]] = {"private": [], "public": []}
    for pool_name, pool in sorted(cluster.lb_pools.items()):
        pools_by_class[_advertise_class(pool.visibility)].append(pool_name)
    classes = sorted({peer.kind for peer in cluster.bgp_peers.values()})
    objects = []
    for cls in classes:
        adverts: list[dict[str, Any]] = [{"advertisementType": "PodCIDR"}] if cls == "private" else []
        if pools_by_class[cls]:
            adverts.append(
                {
                    "advertisementType": "Service",
                    "service": {"addresses": ["LoadBalancerIP"]},
                    "selector": {"matchExpressions": [{"key": POOL_LABEL, "operator": "In", "values": pools_by_class[cls]}]},
                }
            )
        objects.append(_cr("CiliumBGPAdvertisement", f"fab-{cls}", {"advertisements": adverts}, labels={ADVERTISE_LABEL: cls}))
        objects.append(
            _cr(
                "CiliumBGPPeerConfig",
                f"fab-{cls}",
                {
                    "gracefulRestart": {"enabled": True},
                    "families": [{"afi": "ipv4", "safi": "unicast", "advertisements": {"matchLabels": {ADVERTISE_LABEL: cls}}}],
                },
            )
        )
    objects.append(
        _cr(
            "CiliumBGPClusterConfig",
            "fab-bgp",
            {
                "bgpInstances": [
                    {
                        "name": mesh_cluster.name,
                        "localASN": cluster.bgp_asn,
                        "peers": [
                            {
                                "name": peer_name,
                                "peerAddress": str(peer.address),
                                "peerASN": peer.asn,
                                "peerConfigRef": {"name": f"fab-{peer.kind}"},
                            }
                            for peer_name, peer in sorted(cluster.bgp_peers.items())
                        ],
                    }
                ]
            },
        )
    )
    return objects


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
    return _cr(
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
    return _cr(
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
    return _cr(
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
    return _cr(
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
    return _cr("CiliumClusterwideNetworkPolicy", TENANT_RULE_NAME, None, labels={RULE_LABEL: "tenant"},
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
        _cr("CiliumClusterwideNetworkPolicy", names.FLOW_POLICY(name), {
            "description": description,
            "endpointSelector": _pod_selector(flow.from_namespace, flow.from_labels),
            "enableDefaultDeny": dict(NO_DEFAULT_DENY),
            "egress": to,
        }, labels=labels),
        _cr("CiliumClusterwideNetworkPolicy", names.WORLD_DENY_POLICY(name), {
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
    return _cr("CiliumClusterwideNetworkPolicy", names.EGRESS_POLICY(source_namespace), {
        "description": f"Default-deny egress of {source_namespace}: DNS, its own cluster, the site's flows it uses, its outside "
                       "services and its world flows only.",
        "endpointSelector": _pod_selector(source_namespace, {}),
        "egress": egress,
    }, labels={RULE_LABEL: "egress"})


def cluster_objects(clusters: dict[str, MeshCluster], key: str, flows: dict[str, Flow],
                    outside_calls: dict[str, OutsideCalls] | None = None, tenants: Tenants | None = None) -> list[dict[str, Any]]:
    """Every Cilium object of one cluster, in a stable order."""
    cluster = clusters[key]
    isolation = tenant_isolation_policy(tenants or {})
    objects = [*pool_objects(cluster.config), *bgp_objects(cluster), default_deny_policy(cluster), clustermesh_policy(clusters, key),
               *([isolation] if isolation else []), *hubble_fences(cluster.config.cilium.hubble_ui)]
    egress_namespaces = set()
    for name, flow in sorted(flows.items()):
        if flow.target == "pods" and key in flow.to:
            objects.append(flow_ingress_policy(clusters, name, flow))
        elif flow.target == "kube-apiserver" and key in flow.sources:
            objects.append(flow_apiserver_policy(clusters, name, flow, key))
        elif flow.target == WORLD and key in flow.sources:
            objects.extend(flow_egress_policies(name, flow))
            if flow.from_namespace:
                egress_namespaces.add(flow.from_namespace)
    for source_namespace in sorted(egress_namespaces):
        calls = (outside_calls or {}).get(source_namespace, OutsideCalls())
        objects.append(namespace_egress_policy(clusters, key, source_namespace, flows, calls))
    return objects


def cluster_summary(mesh_cluster: MeshCluster, flows: dict[str, Flow]) -> dict[str, Any]:
    cluster, key = mesh_cluster.config, mesh_cluster.ref.key
    return {
        "cluster_name": mesh_cluster.name,
        "pools": {n: {"cidrs": [str(c) for c in p.cidrs], "visibility": p.visibility} for n, p in sorted(cluster.lb_pools.items())},
        "peers": {n: {"address": str(p.address), "asn": p.asn, "kind": p.kind} for n, p in sorted(cluster.bgp_peers.items())},
        "flows_in": sorted(n for n, f in flows.items() if key in f.to),
        "flows_out": sorted(n for n, f in flows.items() if key in f.sources),
        "host_network_namespaces": list(cluster.host_network_namespaces),
    }
