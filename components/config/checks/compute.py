"""Cross-field checks of the compute cluster: the ingress VIP in an external pool, StarRocks' replica range,
YuniKorn queues guaranteed no more than their maximum, node pools that hold the engines selecting them
(DESIGN section 2, compute role).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from components.config import declared
from components.config.problems import Problem

if TYPE_CHECKING:
    from components.config.schema.compute import YuniKornQueue
    from components.config.views import SiteViews


def compute_problems(site: SiteViews) -> Iterator[Problem]:
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
    for name in ("batch", "interactive"):
        yield from _yunikorn_problems(getattr(site.compute.spark, name), ("compute", "spark", name))
    yield from _pool_problems(site)
    yield from _maintenance_problems(site)


def _maintenance_problems(site: SiteViews) -> Iterator[Problem]:
    """Iceberg maintenance runs as Spark jobs Airflow submits, and checks only the tables its principal may read."""
    maintenance = site.compute.iceberg_maintenance
    if maintenance is None or not maintenance.enabled:
        return
    off = [name for name in ("spark", "airflow") if not getattr(site.compute, name).enabled]
    if off:
        yield ("compute", "iceberg_maintenance", "enabled"), (
            f"is true, but compute.{' and compute.'.join(off)} {'is' if len(off) == 1 else 'are'} off: the maintenance runs as "
            "Spark jobs that Airflow schedules; switch them on, or set compute.iceberg_maintenance.enabled to false"
        )
    namespaces = [target.namespace for target in maintenance.targets]
    tasks: dict[str, int] = {}
    for i, namespace in enumerate(namespaces):
        task = "maintain_" + namespace.replace(".", "_")
        if task in tasks:
            yield ("compute", "iceberg_maintenance", "targets", i, "namespace"), (
                f"{namespace!r} is maintained by the same task as targets {tasks[task]} ({namespaces[tasks[task]]!r}): one "
                "target per namespace; put its tables in one glob, or list the namespace once with tables '*'"
            )
        tasks.setdefault(task, i)
    for i, check in enumerate(maintenance.quality_checks):
        namespace = check.table.rpartition(".")[0]
        if namespace not in namespaces:
            yield ("compute", "iceberg_maintenance", "quality_checks", i, "table"), (
                f"{check.table!r} is in namespace {namespace!r}, which is not among the targets ({', '.join(namespaces)}); the "
                "maintenance principal reads only those: add the namespace to compute.iceberg_maintenance.targets"
            )


def _pool_problems(site: SiteViews) -> Iterator[Problem]:
    """Each node serves one pool, and a pool whose engines are on has nodes: their pods select it and fit nowhere else."""
    compute = site.compute
    batch = set(compute.batch_nodes)
    for i, node in enumerate(compute.interactive_nodes):
        if node in batch:
            yield ("compute", "interactive_nodes", i), (
                f"{node!r} is also a batch node of compute.batch_nodes; a node serves one pool (it registers with one pool's taint)"
            )
    for pool in ("batch", "interactive"):
        users = [e.name for e in declared.engines().values() if e.pool == pool and e.config(compute).enabled]
        if users and not getattr(compute, f"{pool}_nodes"):
            one = len(users) == 1
            yield ("compute", f"{pool}_nodes"), (
                f"is empty, but {', '.join(users)} {'runs' if one else 'run'} in the {pool} pool ({'its' if one else 'their'} "
                f"pods select and tolerate only its nodes): list the {pool} pool's nodes, or switch "
                f"{'that engine' if one else 'those engines'} off"
            )


def _yunikorn_problems(queue: YuniKornQueue, path: tuple[str | int, ...]) -> Iterator[Problem]:
    """YuniKorn refuses the whole queue configuration when a queue's guaranteed resources exceed its maximum."""
    for resource, unit in (("vcores", ""), ("memory_gib", " GiB")):
        guaranteed, most = getattr(queue, f"guaranteed_{resource}"), getattr(queue, f"max_{resource}")
        if guaranteed > most:
            yield (*path, f"guaranteed_{resource}"), (
                f"{guaranteed}{unit} is more than max_{resource} {most}{unit}; YuniKorn refuses a queue guaranteed more than "
                f"its maximum: lower guaranteed_{resource} or raise max_{resource}"
            )
