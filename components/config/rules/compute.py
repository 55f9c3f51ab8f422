"""Cross-field rules of the compute cluster: the ingress VIP in an external pool, StarRocks' replica range
(DESIGN section 2, compute role).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from components.config.problems import Problem

if TYPE_CHECKING:
    from components.config.site import SiteConfig


def compute_problems(site: SiteConfig) -> Iterator[Problem]:
    compute = site.keys_with_role("compute")
    if len(compute) != 1:
        return
    cluster = site.clusters[compute[0]]
    ingress = site.compute.ingress
    pool = cluster.lb_pools.get(ingress.pool)
    if pool is None or pool.visibility != "external":
        yield ("compute", "ingress", "pool"), f"{ingress.pool!r} is not an external pool of clusters.{compute[0]}"
    elif not any(ingress.vip in cidr for cidr in pool.cidrs):
        yield ("compute", "ingress", "vip"), (
            f"{ingress.vip} is not in pool {ingress.pool!r} ({', '.join(map(str, pool.cidrs))}); pick an address of that pool"
        )
    starrocks = site.compute.starrocks
    if starrocks.cn_min_replicas > starrocks.cn_max_replicas:
        yield ("compute", "starrocks", "cn_min_replicas"), (
            f"{starrocks.cn_min_replicas} is more than cn_max_replicas {starrocks.cn_max_replicas}"
        )
