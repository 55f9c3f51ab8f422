"""Cross-field checks of the metrics stack (issue 19, item 1): where the site's series are kept (compute's receiver VIP in
one of its internal pools, or the site's own store), and node-exporter's host access on every cluster's allow-list.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from components.config.problems import Problem
from components.constants import NODE_EXPORTER_NAMESPACE

if TYPE_CHECKING:
    from components.config.views import SiteViews


def observability_problems(site: SiteViews) -> Iterator[Problem]:
    observability = site.observability
    if observability is None:
        return
    path = ("observability",)
    if observability.metrics == "in-cluster":
        if observability.remote_write is not None:
            yield (*path, "remote_write"), (
                "is set but metrics is in-cluster (compute's Prometheus keeps the site's series); remove it, or set metrics "
                "to remote-write"
            )
        yield from _receiver_problems(site)
    else:
        if observability.remote_write is None:
            yield (*path, "remote_write"), "is required while metrics is remote-write: name the site's metrics store (url, query_url)"
        if observability.receiver_vip is not None:
            yield (*path, "receiver_vip"), (
                f"{observability.receiver_vip} is set but metrics is remote-write (every Prometheus writes to remote_write); "
                "remove it, or set metrics to in-cluster"
            )
    for key, cluster in site.clusters.items():
        if NODE_EXPORTER_NAMESPACE not in cluster.host_network_namespaces:
            yield ("clusters", key, "host_network_namespaces"), (
                f"[{', '.join(cluster.host_network_namespaces)}] lacks {NODE_EXPORTER_NAMESPACE}, where node-exporter reads "
                "the node (host network, host PID, its root filesystem) on every cluster while observability is set; the "
                "policy pack allows host access only in the namespaces listed here, so add it"
            )


def _receiver_problems(site: SiteViews) -> Iterator[Problem]:
    """compute's receiver VIP lies in one of compute's internal pools (its clients are the site's other clusters)."""
    compute = site.keys_with_role("compute")
    if len(compute) != 1:
        return
    key = compute[0]
    vip = site.observability.receiver_vip
    internal = {name: pool for name, pool in sorted(site.clusters[key].lb_pools.items()) if pool.visibility == "internal"}
    pools = "; ".join(f"{name}: {', '.join(map(str, pool.cidrs))}" for name, pool in internal.items()) or "none"
    path = ("observability", "receiver_vip")
    if vip is None:
        yield path, (
            f"is required while metrics is in-cluster: the other clusters' Prometheus write to it; pick a free address of an "
            f"internal pool of clusters.{key} ({pools})"
        )
    elif not any(vip in cidr for pool in internal.values() for cidr in pool.cidrs):
        yield path, f"{vip} is not in an internal pool of clusters.{key} ({pools}); pick a free address of one"


def receiver_pool(site: SiteViews) -> str | None:
    """The internal pool of compute that holds the receiver VIP (the config checks made sure there is one), or None."""
    observability = site.observability
    if observability is None or observability.metrics != "in-cluster" or observability.receiver_vip is None:
        return None
    (key,) = site.keys_with_role("compute")
    return next(name for name, pool in sorted(site.clusters[key].lb_pools.items())
                if pool.visibility == "internal" and any(observability.receiver_vip in cidr for cidr in pool.cidrs))
