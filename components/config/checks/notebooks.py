"""Cross-field checks of GPU notebooks and GPU sharing (issue 20, item 3): the notebooks hub on a GPU cluster whose
notebooks-pool nodes share their GPUs, its VIP in an internal pool of that cluster, quotas of real teams that fit the
pool, MIG profiles the GPU types offer (DESIGN section 1: "GPU notebooks ... for the few who need them").
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from components.config.fields import GPU_ROLES
from components.config.problems import Problem
from components.config.schema.gpu import MIG_PROFILES

if TYPE_CHECKING:
    from components.config.schema.gpu import GpuClusterConfig
    from components.config.views import SiteViews

NOTEBOOKS = ("compute", "jupyterhub", "gpu_notebooks")


def notebooks_problems(site: SiteViews) -> Iterator[Problem]:
    for key, spec in sorted(site.gpu.items()):
        yield from _sharing_problems(site, key, spec)
    yield from _hub_problems(site)


def notebook_capacity(site: SiteViews, key: str) -> int:
    """Notebooks the notebooks pool of GPU cluster `key` holds at once: its GPUs times the shares of each."""
    spec = site.gpu[key]
    types = site.all_gpu_types()
    return sum(node.gpus * spec.sharing.per_gpu(types[node.gpu_type].product)
               for node in spec.nodes.values() if node.pool == "notebooks" and node.gpu_type in types)


def _sharing_problems(site: SiteViews, key: str, spec: GpuClusterConfig) -> Iterator[Problem]:
    """Shared nodes: where notebooks run, on a gpu cluster, MIG with the mixed strategy and a profile of their GPU type."""
    path = ("gpu", key)
    shared = {name: node for name, node in sorted(spec.nodes.items()) if node.pool == "notebooks"}
    sharing = spec.sharing
    if sharing.mode == "time-slicing" and sharing.mig_profile is not None:
        yield (*path, "sharing", "mig_profile"), (
            f"{sharing.mig_profile!r} is set but mode is time-slicing; remove it, or set mode: mig"
        )
    if not shared:
        return
    notebooks = site.compute.jupyterhub.gpu_notebooks
    first = next(iter(shared))
    if key in site.clusters and site.clusters[key].role != "gpu":
        yield (*path, "nodes", first, "pool"), (
            f"'notebooks' on a {site.clusters[key].role} cluster; GPU notebooks run on a gpu cluster (gpu-train clusters "
            "train only): use pool training"
        )
        return
    if notebooks is None or notebooks.cluster != key:
        where = "is not set" if notebooks is None else f"runs them on {notebooks.cluster!r}"
        yield (*path, "nodes", first, "pool"), (
            f"'notebooks', but compute.jupyterhub.gpu_notebooks {where}, so no notebook would use {first}'s GPUs: set "
            f"gpu_notebooks.cluster to {key!r}, or give the node pool inference or training"
        )
    if sharing.mode != "mig":
        return
    if spec.mig_strategy != "mixed":
        yield (*path, "mig_strategy"), (
            f"{spec.mig_strategy!r}, but sharing.mode is mig: MIG instances must be their own resources "
            "(nvidia.com/mig-<profile>), never counted as whole GPUs, which takes mig_strategy mixed"
        )
    if sharing.mig_profile is None:
        yield (*path, "sharing", "mig_profile"), "is required with mode mig: name the MIG profile notebooks get, such as 1g.18gb"
        return
    types = site.all_gpu_types()
    for name, node in shared.items():
        if node.gpu_type not in types:
            continue  # refused by the gpu checks
        product = types[node.gpu_type].product
        offered = MIG_PROFILES.get(product)
        if offered is None:
            yield (*path, "nodes", name, "gpu_type"), (
                f"{node.gpu_type!r} ({product}) has no MIG profiles the program knows ({', '.join(MIG_PROFILES)} have); use "
                "sharing.mode time-slicing on this cluster"
            )
        elif sharing.mig_profile not in offered:
            yield (*path, "sharing", "mig_profile"), (
                f"{sharing.mig_profile!r} is not a MIG profile of {node.gpu_type} ({product}, node {name}); it offers "
                f"{', '.join(offered)}"
            )
        else:
            continue
        return


def _hub_problems(site: SiteViews) -> Iterator[Problem]:
    """The notebooks hub: on a gpu cluster with notebooks-pool nodes, its VIP in an internal pool of it, quotas of teams."""
    notebooks = site.compute.jupyterhub.gpu_notebooks
    if notebooks is None:
        return
    key = notebooks.cluster
    gpu_clusters = sorted(k for k in site.keys_with_role("gpu") if k in site.gpu)
    if key not in site.clusters or site.clusters[key].role not in GPU_ROLES or key not in site.gpu:
        what = f"a {site.clusters[key].role} cluster" if key in site.clusters else "not a cluster of this site"
        yield (*NOTEBOOKS, "cluster"), f"{key!r} is {what}; GPU notebooks run on a gpu cluster: {', '.join(gpu_clusters) or 'none'}"
        return
    if site.clusters[key].role != "gpu":
        yield (*NOTEBOOKS, "cluster"), (
            f"{key!r} is a gpu-train cluster, which trains only; GPU notebooks run on a gpu cluster: {', '.join(gpu_clusters)}"
        )
        return
    capacity = notebook_capacity(site, key)
    if not any(node.pool == "notebooks" for node in site.gpu[key].nodes.values()):
        yield (*NOTEBOOKS, "cluster"), (
            f"{key!r} has no notebooks-pool node: give the nodes whose GPUs notebooks share pool: notebooks in gpu.{key}.nodes"
        )
    cluster = site.clusters[key]
    internal = {name: pool for name, pool in sorted(cluster.lb_pools.items()) if pool.visibility == "internal"}
    pool = internal.get(notebooks.pool)
    if pool is None:
        yield (*NOTEBOOKS, "pool"), (
            f"{notebooks.pool!r} is not an internal pool of clusters.{key}; pick one of {', '.join(internal) or 'none'}"
        )
    elif not any(notebooks.vip in cidr for cidr in pool.cidrs):
        yield (*NOTEBOOKS, "vip"), (
            f"{notebooks.vip} is not in pool {notebooks.pool!r} ({', '.join(map(str, pool.cidrs))}); pick a free address of it"
        )
    for team, quota in sorted(notebooks.team_quotas.items()):
        if team not in site.teams:
            yield (*NOTEBOOKS, "team_quotas", team), f"{team!r} is not a team; teams: {', '.join(sorted(site.teams))}"
        elif capacity and quota > capacity:
            sharing = site.gpu[key].sharing
            shares = f"{sharing.replicas} per GPU" if sharing.mode == "time-slicing" else f"{sharing.mig_profile} instances"
            yield (*NOTEBOOKS, "team_quotas", team), (
                f"{quota} notebooks is more than the notebooks pool of {key} holds ({capacity}: its GPUs times {shares}); "
                f"give at most {capacity}"
            )
