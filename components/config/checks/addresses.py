"""Cross-field checks of the site's addresses: pod ranges large enough for their nodes, and every host address (API
servers, BGP peers, fixed VIPs) unique, usable by one host and where it belongs (DESIGN section 2, network rules:
native routing, BGP to the ToRs, LB-IPAM pools).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from ipaddress import IPv4Address, IPv4Network
from typing import TYPE_CHECKING

from components.config.checks.network import fixed_vips, site_ranges
from components.config.fields import CILIUM_POD_MASK
from components.config.problems import Problem, format_path

if TYPE_CHECKING:
    from components.config.views import SiteViews

Path = tuple[str | int, ...]


def _hosts(network: IPv4Network) -> int:
    """Addresses of a range that can be a host's: all but the network and broadcast addresses, except in a /31 or /32."""
    return network.num_addresses - (2 if network.prefixlen <= 30 else 0)


def _edge(address: IPv4Address, network: IPv4Network) -> str | None:
    """'network' or 'broadcast' when `address` is that address of `network` (a range of more than two addresses)."""
    if network.prefixlen > 30:
        return None
    return "network" if address == network.network_address else "broadcast" if address == network.broadcast_address else None


def pod_range_problems(site: SiteViews) -> Iterator[Problem]:
    """Cilium's cluster-pool IPAM gives every node a /24 of the pod range: the range needs one per possible node."""
    for key, cluster in site.clusters.items():
        pod, nodes = cluster.pod_cidr, cluster.node_cidr
        path = ("clusters", key, "pod_cidr")
        if pod.prefixlen > CILIUM_POD_MASK:
            yield path, (
                f"{pod} is smaller than one node's pod range: Cilium gives each node a /{CILIUM_POD_MASK} of it; "
                f"use a /{CILIUM_POD_MASK - math.ceil(math.log2(max(_hosts(nodes), 1)))} or larger"
            )
            continue
        blocks, needed = 2 ** (CILIUM_POD_MASK - pod.prefixlen), _hosts(nodes)
        if blocks < needed:
            prefix = CILIUM_POD_MASK - math.ceil(math.log2(needed))
            yield path, (
                f"{pod} holds {blocks} node pod ranges (a /{CILIUM_POD_MASK} per node, Cilium's cluster-pool IPAM) but "
                f"clusters.{key}.node_cidr {nodes} holds up to {needed} nodes; use a /{prefix} or larger"
            )


def _placement(site: SiteViews, address: IPv4Address, own: Path) -> str | None:
    """The first range of the site, other than the node range `own`, that holds `address`, as `path (range)`."""
    for path, network in site_ranges(site):
        if path != own and address in network:
            return f"{format_path(path)} ({network})"
    return None


def host_address_problems(site: SiteViews) -> Iterator[Problem]:
    """API servers and BGP peers: on the nodes' side of the site, never a pod, VIP or another host's address."""
    api_servers: dict[IPv4Address, str] = {}
    ranges = list(site_ranges(site))
    for key, cluster in site.clusters.items():
        node_path: Path = ("clusters", key, "node_cidr")
        if any(path != node_path and cluster.node_cidr.overlaps(network) for path, network in ranges):
            continue  # the node range itself is refused by the overlap check
        api, path = cluster.api_server, ("clusters", key, "api_server")
        inside = _placement(site, api, node_path)
        if inside:
            yield path, f"{api} is inside {inside}; an API server's address is never in a pod range, a LoadBalancer pool or another cluster's node range"
        elif api in api_servers:
            yield path, f"{api} is already the api_server of clusters.{api_servers[api]}; every cluster has its own API server address"
        elif edge := _edge(api, cluster.node_cidr):
            yield path, f"{api} is the {edge} address of clusters.{key}.node_cidr ({cluster.node_cidr}); give a host address"
        else:
            api_servers[api] = key
        peers: dict[IPv4Address, str] = {}
        for name, peer in cluster.bgp_peers.items():
            address, peer_path = peer.address, ("clusters", key, "bgp_peers", name, "address")
            inside = _placement(site, address, node_path)
            if inside:
                yield peer_path, f"{address} is inside {inside}; a BGP peer is a router on clusters.{key}.node_cidr ({cluster.node_cidr}), never a pod, a VIP or another cluster's node"
            elif address not in cluster.node_cidr:
                yield peer_path, (
                    f"{address} is not in clusters.{key}.node_cidr ({cluster.node_cidr}): Cilium peers over single-hop eBGP, so "
                    "the peer is a router on the nodes' network"
                )
            elif address == api:
                yield peer_path, f"{address} is the api_server of clusters.{key}; a BGP peer is a router, not the API server"
            elif address in peers:
                yield peer_path, f"{address} is already the address of peer {peers[address]!r}; each peer is another router"
            elif edge := _edge(address, cluster.node_cidr):
                yield peer_path, f"{address} is the {edge} address of clusters.{key}.node_cidr ({cluster.node_cidr}); give the router's address"
            peers.setdefault(address, name)


def vip_edge_problems(site: SiteViews) -> Iterator[Problem]:
    """A fixed VIP is a host address of its pool's block, not the block's network or broadcast address."""
    blocks = [network for path, network in site_ranges(site) if "lb_pools" in path]
    for path, vip in fixed_vips(site):
        for block in blocks:
            if vip in block and (edge := _edge(vip, block)):
                yield path, f"{vip} is the {edge} address of the pool block {block}, which routers drop or broadcast; pick a host address of it"
