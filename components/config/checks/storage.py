"""Cross-field checks of the storage cluster: buckets and their classes, Polaris's backups, the S3 and
Polaris endpoints in their pools (DESIGN section 2, storage role).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from components.config.problems import Problem, format_path
from components.config.schema.storage import CONTRACT_CLASSES, NO_EXPIRY_CLASSES, VERSIONED_CLASSES

if TYPE_CHECKING:
    from components.config.views import SiteViews


def _pool_vip_problems(site: SiteViews, endpoints: list[tuple[tuple[str | int, ...], str | None, Any, str]]) -> Iterator[Problem]:
    """The storage cluster's VIPs (key path, pool, VIP, the pool's visibility) each lie in a pool of the right visibility.

    VIPs that one pool no longer holds are one mistake, the pool's (a shrunk range): one line names the pool and them."""
    storage_keys = site.keys_with_role("storage")
    if len(storage_keys) != 1:
        return
    key = storage_keys[0]
    cluster = site.clusters[key]
    outside: dict[str, list[tuple[tuple[str | int, ...], Any]]] = {}
    for path, pool_name, vip, visibility in endpoints:
        if pool_name is None:
            continue
        pool = cluster.lb_pools.get(pool_name)
        pool_path = (*path[:-1], str(path[-1]).replace("vip", "pool"))
        if pool is None:
            yield pool_path, f"{pool_name!r} is not a pool of the storage cluster; pools: {', '.join(sorted(cluster.lb_pools))}"
        elif pool.visibility != visibility:
            yield pool_path, f"{pool_name!r} is an {pool.visibility} pool; this endpoint needs an {visibility} one"
        elif vip is None:
            yield path, f"is required with {pool_path[-1]}: the endpoint's address is a contract"
        elif not any(vip in cidr for cidr in pool.cidrs):
            outside.setdefault(pool_name, []).append((path, vip))
    for pool_name, vips in outside.items():
        cidrs = ", ".join(map(str, cluster.lb_pools[pool_name].cidrs))
        if len(vips) == 1:
            ((path, vip),) = vips
            yield path, f"{vip} is not in pool {pool_name!r} ({cidrs}); pick an address of that pool"
        else:
            held = ", ".join(f"{format_path(path)} {vip}" for path, vip in vips)
            yield ("clusters", key, "lb_pools", pool_name, "cidrs"), (
                f"{cidrs} holds none of the storage endpoints it is for ({held}); widen the pool or pick addresses in it"
            )


def storage_problems(site: SiteViews) -> Iterator[Problem]:
    storage = site.storage
    store = storage.object_store
    if store.table_catalog:
        yield ("storage", "object_store", "table_catalog"), (
            "true is not allowed: Polaris is the only Iceberg catalog authority, so AIStor's table catalog stays off"
        )
    for data_class in CONTRACT_CLASSES:
        names = sorted(n for n, b in storage.buckets.items() if b.data_class == data_class)
        if len(names) != 1:
            yield ("storage", "buckets"), (
                f"a site needs exactly one bucket of class {data_class}, found {', '.join(names) if names else 'none'}"
            )
    for name, bucket in storage.buckets.items():
        path = ("storage", "buckets", name)
        if bucket.retention_days is not None and bucket.data_class in NO_EXPIRY_CLASSES:
            yield (*path, "retention_days"), (
                f"is not allowed on class {bucket.data_class}: "
                + ("Iceberg removes table files through snapshot expiry; lifecycle expiry would corrupt tables"
                   if bucket.data_class == "warehouse" else "its objects are kept until deleted on purpose")
            )
        if bucket.noncurrent_expiry_days is not None and not bucket.versioned:
            yield (*path, "noncurrent_expiry_days"), (
                f"is only for versioned buckets (classes {', '.join(sorted(VERSIONED_CLASSES))}); class {bucket.data_class} is not versioned"
            )
    if site.compute.starrocks.enabled and not any(b.data_class == "olap" for b in storage.buckets.values()):
        yield ("storage", "buckets"), "StarRocks is enabled but no bucket has class olap: its shared-data storage needs one"
    backup = storage.polaris.postgres.backup_bucket
    if backup not in storage.buckets:
        yield ("storage", "polaris", "postgres", "backup_bucket"), f"{backup!r} is not a bucket of storage.buckets"
    elif storage.buckets[backup].data_class != "backups":
        yield ("storage", "polaris", "postgres", "backup_bucket"), (
            f"{backup!r} has class {storage.buckets[backup].data_class}; Postgres backups go to a bucket of class backups"
        )
    gold = sorted(n for n, b in storage.buckets.items() if b.data_class == "gold")
    chosen = storage.polaris.gold_bucket
    if chosen is None and len(gold) > 1:
        yield ("storage", "polaris", "gold_bucket"), (
            f"is required with several gold buckets ({', '.join(gold)}): name the one that holds the gold namespace"
        )
    elif chosen is not None and chosen not in gold:
        yield ("storage", "polaris", "gold_bucket"), (
            f"{chosen!r} is not a gold bucket of storage.buckets; gold buckets: {', '.join(gold) if gold else 'none'}"
        )
    s3, polaris = storage.s3, storage.polaris
    if s3.external_pool is None and s3.external_vip is not None:
        yield ("storage", "s3", "external_pool"), "is required with external_vip: name the external pool that holds it"
    yield from _pool_vip_problems(site, [
        (("storage", "s3", "internal_vip"), s3.internal_pool, s3.internal_vip, "internal"),
        (("storage", "s3", "external_vip"), s3.external_pool, s3.external_vip, "external"),
        (("storage", "polaris", "vip"), polaris.pool, polaris.vip, "internal"),
    ])
