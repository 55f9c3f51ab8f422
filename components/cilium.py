"""Cilium on each cluster of the site: its chart values (native routing, WireGuard, ClusterMesh, Hubble), its LB-IPAM
pools and the BGP control plane objects that advertise Pod CIDRs and internal VIPs to private peers only and external
VIPs to public peers only (DESIGN section 2). CrossClusterNetwork (components/network.py) applies them."""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any

import pulumi

from components import versions
from components.config import CILIUM_RELEASE, ClusterConfig
from components.metrics_sources import cilium_metrics_values
from components.providers import ClusterRef

POOL_LABEL = "lb.fab.internal/pool"
"""Service label that picks the LB-IPAM pool (and so the BGP advertisement) of a LoadBalancer Service."""
ADVERTISE_LABEL = "bgp.fab.internal/advertise"
"""CiliumBGPAdvertisement label that a CiliumBGPPeerConfig selects: private or public."""

CILIUM_NAMESPACE = CILIUM_RELEASE.split("/")[0]
CLUSTERMESH_PORT = 2379


@dataclass(frozen=True)
class MeshCluster:
    """One cluster of the site as the network builds it: its reference and its config (`clusters.<key>`)."""

    ref: ClusterRef
    config: ClusterConfig

    @property
    def name(self) -> str:
        return self.ref.name



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


def cilium_object(kind: str, name: str, spec: dict[str, Any] | None, labels: dict[str, str] | None = None,
        specs: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """A Cilium object with its `spec`, or a policy with a list of rules (`specs`) instead."""
    body = {"spec": spec} if specs is None else {"specs": specs}
    return {"apiVersion": versions.CILIUM_API, "kind": kind, "metadata": _meta(name, labels), **body}


def pool_objects(cluster: ClusterConfig) -> list[dict[str, Any]]:
    return [
        cilium_object(
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
        objects.append(cilium_object("CiliumBGPAdvertisement", f"fab-{cls}", {"advertisements": adverts},
                                     labels={ADVERTISE_LABEL: cls}))
        objects.append(
            cilium_object(
                "CiliumBGPPeerConfig",
                f"fab-{cls}",
                {
                    "gracefulRestart": {"enabled": True},
                    "families": [{"afi": "ipv4", "safi": "unicast", "advertisements": {"matchLabels": {ADVERTISE_LABEL: cls}}}],
                },
            )
        )
    objects.append(
        cilium_object(
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
