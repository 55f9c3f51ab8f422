"""CrossClusterNetwork: Cilium native routing, BGP, LB-IPAM, ClusterMesh and default-deny flows (DESIGN section 2).

Per cluster: the pinned Cilium release (unless Cilium is pre-installed), LB-IPAM pools, the BGP
control plane objects that advertise Pod CIDRs and internal VIPs to private peers only and external
VIPs to public peers only, and the cross-cluster policy: remote clusters are denied by default and
each flow of the site's flow table is allowed by one rule. This is the only component that spans
clusters, so every child names its cluster's provider explicitly. Cilium's values, pools and BGP objects are
components/cilium.py's; the policies components/network_policies.py's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import pulumi_tls as tls

from components import versions
from components.cilium import (
    CILIUM_NAMESPACE,
    CLUSTERMESH_PORT,
    POOL_LABEL,
    MeshCluster,
    bgp_objects,
    cilium_values,
    pool_objects,
)
from components.config import WORLD, AdoptConfig, ClusterConfig, Flow
from components.constants import AFFINITY_SERVICE_ANNOTATION, GLOBAL_SERVICE_ANNOTATION, SHARED_SERVICE_ANNOTATION
from components.kube import Adoption, FlatCustomResource, helm_release, namespace, pull_secret
from components.network_policies import (
    OutsideCalls,
    Tenants,
    clustermesh_policy,
    default_deny_policy,
    flow_apiserver_policy,
    flow_egress_policies,
    flow_ingress_policy,
    hubble_fences,
    namespace_egress_policy,
    tenant_isolation_policy,
)
from components.providers import ClusterRef, SiteRef

CLUSTERMESH_SERVICE = "clustermesh-apiserver-vip"


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
