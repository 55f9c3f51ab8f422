"""Clusters and the flows allowed between them: the site's topology (DESIGN section 2, topology and network rules)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from components.config.fields import WORLD, Address, Asn, Cidr, DnsLabel, Flag, Labels, Port, Role, Unique, _Model


class BgpPeer(_Model):
    """A BGP neighbour of every node of the cluster, usually a top-of-rack switch."""

    address: Address = Field(description="Peer IPv4 address, in the cluster's `node_cidr` (single-hop eBGP); not the API server, not another peer's.")
    asn: Asn = Field(description="Peer autonomous system number.")
    kind: Literal["private", "public"] = Field(
        "private",
        description="private peers receive Pod CIDRs and internal LoadBalancer IPs; public peers receive external "
        "LoadBalancer IPs only. Defaults to private.",
    )


class LbPool(_Model):
    """A Cilium LB-IPAM pool; a Service takes addresses from it by the label `lb.fab.internal/pool: <name>`."""

    cidrs: Annotated[list[Cidr], Unique] = Field(min_length=1, description="Address blocks of the pool.")
    visibility: Literal["internal", "external"] = Field(
        "internal",
        description="internal pools must be RFC1918 and are advertised to private peers only; external pools are "
        "advertised to public peers only and are not allowed on GPU clusters. Defaults to internal.",
    )


class CiliumSettings(_Model):
    """How Cilium itself is handled on a cluster."""

    managed: Flag = Field(
        True,
        description="Install and upgrade Cilium with its pinned Helm chart; on a running cluster, adopt its existing "
        "release (`adopt.helm_releases`). Set false where Cilium is installed by other means: only its BGP, LB-IPAM and "
        "policy objects are then managed, and joining the ClusterMesh is up to that installation. Defaults to true.",
    )
    operator_replicas: int = Field(2, ge=1, le=5, strict=True, description="cilium-operator replicas. Defaults to 2.")
    hubble_ui: Flag = Field(True, description="Deploy the Hubble UI next to Hubble Relay. Defaults to true.")
    encryption: Literal["wireguard", "off"] = Field(
        "wireguard",
        description="Transparent encryption of pod traffic between nodes, within the cluster and across the ClusterMesh: "
        "wireguard (each node's key pair made by its agent, the public keys shared through CiliumNode objects, which the "
        "ClusterMesh carries to the other clusters; nodes need the kernel's WireGuard module, Linux 5.6 or later, and reach "
        "each other on UDP 51871) or off. Every managed cluster of the site must agree: traffic between an encrypting and "
        "a plain cluster is not encrypted. Defaults to wireguard.",
    )


CILIUM_RELEASE = "kube-system/cilium"
"""Where the program installs Cilium (namespace/release): what an existing installation is adopted as."""


class ClusterConfig(_Model):
    """One Kubernetes cluster of the site."""

    role: Role = Field(description="What runs on the cluster: storage, compute, gpu (inference and training) or gpu-train.")
    kubeconfig_context: str | None = Field(
        None, min_length=1, description="kubeconfig context of the cluster. Defaults to `<site>-<cluster key>`."
    )
    cluster_id: int = Field(ge=1, le=255, strict=True, description="Cilium ClusterMesh id, unique in the site.")
    pod_cidr: Cidr = Field(description="Pod range, routed natively and advertised over BGP; holds a /24 (Cilium's per-node share) for every address of `node_cidr`. Disjoint from every other range of the site.")
    node_cidr: Cidr = Field(description="Node addresses; remote clusters' agents reach ClusterMesh from here. Disjoint from every other range of the site.")
    api_server: Address = Field(
        description="kube-apiserver VIP. An address, not a name: Cilium's kube-proxy replacement needs it before DNS works. "
        "Unique in the site, in no pod range, LoadBalancer pool or other cluster's node range."
    )
    api_server_port: Port = Field(6443, description="kube-apiserver port. Defaults to 6443.")
    bgp_asn: Asn = Field(description="Local autonomous system number of the cluster's nodes, unique in the site.")
    bgp_peers: dict[DnsLabel, BgpPeer] = Field(min_length=1, description="BGP peers by name.")
    lb_pools: dict[DnsLabel, LbPool] = Field(min_length=1, description="LB-IPAM pools by name.")
    clustermesh_pool: DnsLabel = Field(
        "internal", description="Internal pool that exposes the ClusterMesh API server. Defaults to `internal`."
    )
    clustermesh_vip: Address = Field(
        description="Fixed address of the ClusterMesh API server in `clustermesh_pool`; the other clusters dial it. A host address "
        "of the pool, used by no other endpoint."
    )
    host_network_namespaces: Annotated[list[DnsLabel], Unique] = Field(
        default_factory=list,
        description="The cluster's host-access allow-list: the only namespaces where pods may use the node's network, PID or "
        "IPC namespace or run privileged containers, and that may be Pod Security privileged (operators, RDMA). Such pods "
        "are invisible to Cilium policy, so they are named here; the policy pack reads this list from the stack and "
        "refuses host access anywhere else on this cluster. A GPU cluster lists gpu-operator and nvidia-network-operator, "
        "where the program runs the NVIDIA operators. Defaults to none.",
    )
    cilium: CiliumSettings = Field(default_factory=CiliumSettings, description="Cilium installation settings.")


class Flow(_Model):
    """One allowed cross-cluster flow. Everything between clusters that is not a flow is denied."""

    description: str = Field("", description="Why the flow exists, shown on the generated policy.")
    sources: Annotated[list[str], Unique] = Field(
        default_factory=list, alias="from",
        description=f"Source cluster keys, or `{WORLD}` for clients outside the site's clusters. A flow needs `from`, "
        "`from_cidrs` or both.",
    )
    world_reason: str = Field(
        "",
        description=f"Why every address outside the site may reach the object store's S3 endpoint: a flow to S3 from "
        f"`{WORLD}` is refused without it (admit the clients' ranges in `from_cidrs` instead). The MinIO admin API answers "
        "on the same port, so it is exposed with S3 (docs/security.md, external S3). Only for flows from "
        f"`{WORLD}`. Defaults to none.",
    )
    from_cidrs: Annotated[list[Cidr], Unique] = Field(
        default_factory=list,
        description="Source ranges outside the site's clusters (another site's, for federation), admitted by address. "
        "Defaults to none.",
    )
    to: Annotated[list[str], Unique] = Field(
        min_length=1, description=f"Destination cluster keys, or `{WORLD}` for a `{WORLD}` flow."
    )
    to_cidrs: Annotated[list[Cidr], Unique] = Field(
        default_factory=list,
        description=f"Destination ranges outside the site (`{WORLD}` flows only). Defaults to none.",
    )
    port: Port = Field(description="Service port the clients dial.")
    target_port: Port | None = Field(
        None,
        description="Port of the pods behind the Service, which is what Cilium policy sees after load balancing. "
        "Defaults to `port`.",
    )
    protocol: Literal["TCP", "UDP"] = Field("TCP", description="Transport protocol. Defaults to TCP.")
    target: Literal["pods", "kube-apiserver", "world"] = Field(
        "pods",
        description="pods: an ingress rule on the destination's pods in `to_namespace`. kube-apiserver: the "
        "destination's API server VIP, enforced as an egress rule on the source pods in `from_namespace`, "
        f"since the API server is not a Cilium endpoint. {WORLD}: addresses outside the site (`to_cidrs`), allowed as an "
        "egress rule on the source pods in `from_namespace` and denied to every other pod of the source clusters; the "
        "program derives these flows (`compute.trino.external_catalogs`), a stack's table does not list them. "
        "Defaults to pods.",
    )
    to_namespace: DnsLabel | None = Field(None, description="Destination namespace (pods flows).")
    to_labels: Labels = Field(default_factory=dict, description="Destination pod labels (pods flows). Defaults to every pod of the namespace.")
    from_namespace: DnsLabel | None = Field(
        None, description="Source namespace: optional for pods flows, required for kube-apiserver flows."
    )
    from_labels: Labels = Field(default_factory=dict, description="Source pod labels. Defaults to every pod of the namespace.")

    @property
    def pod_port(self) -> int:
        return self.target_port or self.port
