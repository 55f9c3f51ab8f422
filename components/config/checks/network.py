"""Cross-field checks of the topology: roles, cluster ids and ASNs, pools and peers, disjoint ranges,
flows and fixed VIPs (DESIGN section 2, network rules).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from ipaddress import IPv4Network
from itertools import combinations, islice
from typing import TYPE_CHECKING, Any

from components.config.fields import GPU_ROLES, RFC1918, WORLD
from components.config.problems import Problem, format_path

if TYPE_CHECKING:
    from components.config.schema.network import ClusterConfig
    from components.config.views import SiteViews


def role_problems(site: SiteViews) -> Iterator[Problem]:
    for role in ("storage", "compute"):
        keys = site.keys_with_role(role)
        if len(keys) != 1:
            found = ", ".join(keys) if keys else "none"
            yield ("clusters",), f"a site needs exactly one {role} cluster, found {found}"
    if not site.keys_with_role("gpu"):
        yield ("clusters",), "a site needs at least one cluster with role gpu (inference runs there), found none"


def cluster_problems(site: SiteViews) -> Iterator[Problem]:
    ids: dict[int, str] = {}
    asns: dict[int, str] = {}
    for key, cluster in site.clusters.items():
        if cluster.cluster_id in ids:
            yield ("clusters", key, "cluster_id"), (
                f"{cluster.cluster_id} is already the cluster_id of clusters.{ids[cluster.cluster_id]}; "
                "every cluster of a ClusterMesh needs its own id 1-255"
            )
        ids.setdefault(cluster.cluster_id, key)
        if cluster.bgp_asn in asns:
            yield ("clusters", key, "bgp_asn"), (
                f"{cluster.bgp_asn} is already the bgp_asn of clusters.{asns[cluster.bgp_asn]}; "
                "give every cluster its own ASN so that routes between clusters are not dropped as loops"
            )
        asns.setdefault(cluster.bgp_asn, key)
        yield from _pool_problems(key, cluster)
        if cluster.role in GPU_ROLES:
            for peer_name, peer in cluster.bgp_peers.items():
                if peer.kind == "public":
                    yield ("clusters", key, "bgp_peers", peer_name, "kind"), (
                        f"'public' is not allowed on {cluster.role} cluster {key}: GPU clusters peer only with "
                        "private ToRs; use kind 'private'"
                    )


def encryption_problems(site: SiteViews) -> Iterator[Problem]:
    """Every cluster whose Cilium the program installs encrypts alike: between an encrypting and a plain cluster, the
    traffic of the flows crosses the site's network in the clear."""
    managed = {key: cluster.cilium.encryption for key, cluster in site.clusters.items() if cluster.cilium.managed}
    if len(set(managed.values())) > 1:
        first = next(iter(managed))
        for key, mode in managed.items():
            if mode != managed[first]:
                yield ("clusters", key, "cilium", "encryption"), (
                    f"{mode!r} differs from clusters.{first}.cilium.encryption ({managed[first]!r}); every cluster of the "
                    "site encrypts alike, or the traffic between them is not encrypted: use 'wireguard' on all of them"
                )


def _pool_problems(key: str, cluster: ClusterConfig) -> Iterator[Problem]:
    problems = list(_pool_range_problems(key, cluster))
    yield from problems
    if not problems:
        yield from _mesh_pool_problems(key, cluster)


def _pool_range_problems(key: str, cluster: ClusterConfig) -> Iterator[Problem]:
    for pool_name, pool in cluster.lb_pools.items():
        path = ("clusters", key, "lb_pools", pool_name)
        if pool.visibility == "external" and cluster.role in GPU_ROLES:
            yield (*path, "visibility"), (
                f"'external' is not allowed on {cluster.role} cluster {key}: nothing on a GPU cluster is exposed "
                "outside the site; use visibility 'internal' with an RFC1918 range"
            )
        if pool.visibility == "internal":
            for i, cidr in enumerate(pool.cidrs):
                if not any(cidr.subnet_of(block) for block in RFC1918):
                    yield (*path, "cidrs", i), (
                        f"{cidr} is not in RFC1918 (10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16) but the pool is "
                        "internal; use a private range or make the pool external"
                    )
        if pool.visibility == "external" and cluster.role not in GPU_ROLES and not any(p.kind == "public" for p in cluster.bgp_peers.values()):
            yield (*path, "visibility"), (
                f"'external' pool {pool_name!r} would never be advertised: clusters.{key} has no bgp peer of kind "
                "'public'; add one or make the pool internal"
            )


def _mesh_pool_problems(key: str, cluster: ClusterConfig) -> Iterator[Problem]:
    mesh_path = ("clusters", key, "clustermesh_pool")
    mesh_pool = cluster.lb_pools.get(cluster.clustermesh_pool)
    if mesh_pool is None:
        yield mesh_path, (
            f"{cluster.clustermesh_pool!r} is not a pool of clusters.{key}; pools: {', '.join(sorted(cluster.lb_pools))}"
        )
    elif mesh_pool.visibility != "internal":
        yield mesh_path, f"{cluster.clustermesh_pool!r} is an external pool; the ClusterMesh API server needs an internal one"
    elif not any(cluster.clustermesh_vip in cidr for cidr in mesh_pool.cidrs):
        yield ("clusters", key, "clustermesh_vip"), (
            f"{cluster.clustermesh_vip} is not in pool {cluster.clustermesh_pool!r} "
            f"({', '.join(map(str, mesh_pool.cidrs))}); pick an address of that pool"
        )


def site_ranges(site: SiteViews) -> Iterator[tuple[tuple[str | int, ...], IPv4Network]]:
    for key, cluster in site.clusters.items():
        yield ("clusters", key, "pod_cidr"), cluster.pod_cidr
        yield ("clusters", key, "node_cidr"), cluster.node_cidr
        for pool_name, pool in cluster.lb_pools.items():
            for i, cidr in enumerate(pool.cidrs):
                yield ("clusters", key, "lb_pools", pool_name, "cidrs", i), cidr
    for key, spec in site.gpu.items():
        if spec.infiniband.ipoib_range is not None:
            yield ("gpu", key, "infiniband", "ipoib_range"), spec.infiniband.ipoib_range


def overlap_problems(site: SiteViews) -> Iterator[Problem]:
    """One line per range to move: the range that overlaps the most others is named first (one bad range overlapping
    five is one mistake, not five); between two that overlap only each other, the later in the stack file."""
    ranges = list(site_ranges(site))
    pairs = [(a, b) for a, b in combinations(range(len(ranges)), 2) if ranges[a][1].overlaps(ranges[b][1])]
    while pairs:
        degree = Counter(i for pair in pairs for i in pair)
        worst = max(degree, key=lambda i: (degree[i], i))
        other = next(a if b == worst else b for a, b in pairs if worst in (a, b))
        (path, net), (other_path, other_net) = ranges[worst], ranges[other]
        yield path, f"{net} overlaps {format_path(other_path)} ({other_net}); every pod, node and pool range of a site must be disjoint"
        pairs = [pair for pair in pairs if worst not in pair]


def flow_problems(site: SiteViews) -> Iterator[Problem]:
    """The first problem of each flow: one mistake in a flow often breaks several of its checks."""
    for name in site.flows or {}:
        yield from islice(_flow_problems(site, name), 1)


def sound_flows(site: SiteViews) -> set[str]:
    """The flows of the stack's own table that the flow checks accept; the checks about what a flow carries judge only
    these, so that a broken flow is reported once."""
    return {name for name in site.flows or {} if not any(True for _ in _flow_problems(site, name))}


def _flow_problems(site: SiteViews, name: str) -> Iterator[Problem]:
    known = ", ".join(sorted(site.clusters))
    flow = site.flows[name]
    path = ("flows", name)
    if flow.target == WORLD:
        yield (*path, "target"), (
            f"{WORLD!r}: flows to addresses outside the site are derived from compute.trino.external_catalogs (one per "
            "catalog); remove this flow and declare the database there"
        )
        return
    if flow.to_cidrs:
        yield (*path, "to_cidrs"), f"is only for {WORLD!r} flows, which the program derives; remove it"
        return
    if not flow.sources and not flow.from_cidrs:
        yield (*path, "from"), "is empty and so is from_cidrs: name the source clusters or ranges"
    if flow.world_reason and WORLD not in flow.sources:
        yield (*path, "world_reason"), f"is only for flows from {WORLD!r}; remove it"
    if flow.from_cidrs and flow.target == "kube-apiserver":
        yield (*path, "from_cidrs"), "is not allowed on a kube-apiserver flow; name the client clusters"
    for i, cidr in enumerate(flow.from_cidrs):
        for key, cluster in site.clusters.items():
            if cidr.overlaps(cluster.pod_cidr) or cidr.overlaps(cluster.node_cidr):
                yield (*path, "from_cidrs", i), (
                    f"{cidr} overlaps clusters.{key}; from_cidrs are for addresses outside the site's clusters, "
                    "which are named by key in from"
                )
    for i, source in enumerate(flow.sources):
        if source != WORLD and source not in site.clusters:
            yield (*path, "from", i), f"{source!r} is not a cluster of this site; known clusters: {known}, or {WORLD}"
    for i, dest in enumerate(flow.to):
        if dest not in site.clusters:
            yield (*path, "to", i), f"{dest!r} is not a cluster of this site; known clusters: {known}"
        elif dest in flow.sources:
            yield (*path, "to", i), f"{dest!r} is also a source; a flow crosses clusters, traffic inside a cluster is not a flow"
        elif (WORLD in flow.sources or flow.from_cidrs) and site.clusters[dest].role in GPU_ROLES:
            origin = WORLD if WORLD in flow.sources else "from_cidrs"
            yield (*path, "to", i), (
                f"{dest!r} is a GPU cluster and the flow comes from {origin}; nothing on a GPU cluster is exposed "
                "outside the site: route outside users through the compute cluster's ingress"
            )
    if flow.target == "pods" and flow.to_namespace is None:
        yield (*path, "to_namespace"), "is required for a pods flow: name the namespace of the destination pods"
    if flow.target == "kube-apiserver":
        for i, dest in enumerate(flow.to):
            cluster = site.clusters.get(dest)
            if cluster is not None and cluster.api_server_port != flow.pod_port:
                yield (*path, "port"), (
                    f"{flow.pod_port} is not the API server port of clusters.{dest} ({cluster.api_server_port}); "
                    "a kube-apiserver flow uses the destination's api_server_port"
                )
        if flow.from_namespace is None:
            yield (*path, "from_namespace"), "is required for a kube-apiserver flow: name the namespace of the client pods"
        if WORLD in flow.sources:
            yield (*path, "from"), f"{WORLD} cannot reach a cluster's API server through a flow; name the client clusters"
        if flow.to_namespace is not None or flow.to_labels:
            yield (*path, "to_namespace"), "is not used by a kube-apiserver flow: the destination is the API server VIP"


def fixed_vips(site: SiteViews) -> Iterator[tuple[tuple[str | int, ...], Any]]:
    """Every fixed LoadBalancer VIP of the site, with its key path; every LoadBalancer Service the program makes has one."""
    for key, cluster in site.clusters.items():
        yield ("clusters", key, "clustermesh_vip"), cluster.clustermesh_vip
    yield ("storage", "s3", "internal_vip"), site.storage.s3.internal_vip
    if site.storage.s3.external_vip is not None:
        yield ("storage", "s3", "external_vip"), site.storage.s3.external_vip
    yield ("storage", "polaris", "vip"), site.storage.polaris.vip
    if site.inference is not None:
        yield ("inference", "gateway", "vip"), site.inference.gateway.vip
    yield ("compute", "ingress", "vip"), site.compute.ingress.vip
    observability = site.observability
    if observability is not None and observability.metrics == "in-cluster" and observability.receiver_vip is not None:
        yield ("observability", "receiver_vip"), observability.receiver_vip
    if site.compute.jupyterhub.gpu_notebooks is not None:
        yield ("compute", "jupyterhub", "gpu_notebooks", "vip"), site.compute.jupyterhub.gpu_notebooks.vip


def vip_problems(site: SiteViews) -> Iterator[Problem]:
    """Every fixed VIP is used once: LB-IPAM hands an address to one Service unless told to share it."""
    seen: dict[Any, tuple[str | int, ...]] = {}
    for path, vip in fixed_vips(site):
        if vip in seen:
            yield path, f"{vip} is already used by {format_path(seen[vip])}; every endpoint needs its own address"
        seen.setdefault(vip, path)
