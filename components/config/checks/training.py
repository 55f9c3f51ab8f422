"""Cross-field checks of training: profiles, team quotas that fit each training pool, and MultiKueue
workers (DESIGN section 2, gpu-train role; section 4, quotas that exceed the nodes).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from components.config.checks.network import sound_flows
from components.config.fields import GPU_ROLES
from components.config.problems import Problem
from components.config.views import MULTIKUEUE_FLOW

HOSTNAME_LABEL = "kubernetes.io/hostname"

if TYPE_CHECKING:
    from components.config.schema.teams import TeamQuota
    from components.config.views import SiteViews


def profile_problems_exist(site: SiteViews, profile: str) -> bool:
    return any(True for _ in _profile_problems(site, profile))


def _profile_problems(site: SiteViews, name: str) -> Iterator[Problem]:
    profile = site.profiles[name]
    path = ("profiles", name)
    for cluster, nodes in sorted(profile.node_pools.items()):
        if cluster not in site.gpu:
            yield (*path, "node_pools", cluster), f"{cluster!r} is not a GPU cluster with a gpu section; known: {', '.join(sorted(site.gpu))}"
            continue
        for node, pool in sorted(nodes.items()):
            if node not in site.gpu[cluster].nodes:
                yield (*path, "node_pools", cluster, node), f"{node!r} is not a node of gpu.{cluster}; nodes: {', '.join(sorted(site.gpu[cluster].nodes))}"
            elif pool == "inference" and site.clusters.get(cluster) and site.clusters[cluster].role == "gpu-train":
                yield (*path, "node_pools", cluster, node), f"'inference' is not allowed on gpu-train cluster {cluster}: it trains only"
            elif pool == "inference" and site.inference is None:
                yield (*path, "node_pools", cluster, node), "'inference' but the site serves no models (no inference section)"
    models = sorted(site.inference.models) if site.inference is not None else []
    for model in sorted(profile.replicas):
        if model not in models:
            yield (*path, "replicas", model), f"{model!r} is not a served model; models: {', '.join(models) or 'none'}"
    yield from _quota_key_problems(site, profile.quotas, (*path, "quotas"))


def _quota_key_problems(site: SiteViews, quotas: dict[str, dict[str, TeamQuota]], path: tuple[str | int, ...]) -> Iterator[Problem]:
    for team, clusters in sorted(quotas.items()):
        if team not in site.teams:
            yield (*path, team), f"{team!r} is not a team; teams: {', '.join(sorted(site.teams))}"
        for cluster, quota in sorted(clusters.items()):
            if cluster not in site.gpu:
                yield (*path, team, cluster), f"{cluster!r} is not a GPU cluster with a gpu section; known: {', '.join(sorted(site.gpu))}"
            yield from lending_problems(quota, (*path, team, cluster))


def lending_problems(quota: TeamQuota, path: tuple[str | int, ...]) -> Iterator[Problem]:
    """Kueue's ClusterQueue webhook refuses a lendingLimit above the nominalQuota. (Borrowing and lending limits also
    need a cohort; every team's ClusterQueue is in the site's cohort, so that one cannot fail.)"""
    lend = quota.lending_limit_gpus
    if lend is not None and lend > quota.gpus:
        yield (*path, "lending_limit_gpus"), (
            f"{lend} is more than the team's nominal quota (gpus: {quota.gpus}); Kueue refuses a lendingLimit above "
            f"nominalQuota: lend at most {quota.gpus}"
        )


def training_problems(site: SiteViews) -> Iterator[Problem]:
    training = site.training
    if site.active_profile is not None and site.active_profile not in site.profiles:
        known = ", ".join(sorted(site.profiles)) or "none"
        yield ("active_profile",), f"{site.active_profile!r} is not a profile; profiles: {known}"
    for name in sorted(site.profiles):
        yield from _profile_problems(site, name)
    levels = training.topology_levels
    if HOSTNAME_LABEL in levels[:-1]:
        yield ("training", "topology_levels", levels.index(HOSTNAME_LABEL)), (
            f"{HOSTNAME_LABEL!r} is not the last level; Kueue allows the node's own label only as the narrowest level: move it last"
        )
    key_problems = list(_quota_key_problems(site, training.quotas, ("training", "quotas")))
    yield from key_problems
    yield from _multikueue_problems(site)
    types = site.all_gpu_types()
    unknown_types = any(n.gpu_type not in types for spec in site.gpu.values() for n in spec.nodes.values())
    if key_problems or unknown_types or any(profile_problems_exist(site, p) for p in site.profiles):
        return
    for profile in [None, *sorted(site.profiles)]:
        yield from _quota_capacity_problems(site, profile)


def _multikueue_problems(site: SiteViews) -> Iterator[Problem]:
    """The manager first, then its workers, then the flow to them: each judged once what it builds on is sound."""
    mk = site.training.multikueue
    if not mk.enabled:
        return
    path = ("training", "multikueue")
    if mk.manager is not None and mk.manager not in site.clusters:
        yield (*path, "manager"), f"{mk.manager!r} is not a cluster of this site"
        return
    if mk.manager is not None and site.clusters[mk.manager].role != "compute":
        yield (*path, "manager"), (
            f"{mk.manager!r} is a {site.clusters[mk.manager].role} cluster; the MultiKueue manager is the compute "
            "cluster, where jobs are submitted: leave manager unset"
        )
        return
    manager = site.multikueue_manager()
    worker_problems = []
    if not mk.workers:
        worker_problems.append(((*path, "workers"), "is empty: MultiKueue needs at least one GPU worker cluster"))
    for i, worker in enumerate(mk.workers):
        if worker == manager:
            worker_problems.append(((*path, "workers", i), f"{worker!r} is the MultiKueue manager; a manager is never its own worker"))
        elif worker not in site.clusters or site.clusters[worker].role not in GPU_ROLES:
            worker_problems.append(((*path, "workers", i), (
                f"{worker!r} is not a gpu or gpu-train cluster; workers: {', '.join(site.keys_with_role(*GPU_ROLES))}"
            )))
    yield from worker_problems
    flow = (site.flows or {}).get(MULTIKUEUE_FLOW)
    if worker_problems or flow is None or MULTIKUEUE_FLOW not in sound_flows(site):
        return
    missing = sorted(set(mk.workers) - set(flow.to))
    if missing or flow.target != "kube-apiserver" or manager not in flow.sources:
        yield ("flows", MULTIKUEUE_FLOW), (
            f"must be a kube-apiserver flow from {manager} to every MultiKueue worker; "
            f"{'missing: ' + ', '.join(missing) if missing else 'fix its target or sources'}"
        )


def _quota_capacity_problems(site: SiteViews, profile: str | None) -> Iterator[Problem]:
    """Nominal GPU quotas must fit the training pool of each cluster; borrowing only moves unused quota around. Peers'
    teams (`federation.peers.<peer>.remote_training`) count as well, under every profile."""
    quotas = {**site.team_quotas(profile), **{f"{t.peer}/{t.team}": t.quotas for t in site.remote_teams().values()}}
    suffix = "" if profile is None else f" (profile {profile})"
    where = ("training", "quotas") if profile is None else ("profiles", profile, "quotas")
    for cluster in sorted(site.gpu):
        nodes = site.pool_nodes(cluster, "training", profile)
        shapes = {n.gpu_type for n in nodes.values()}
        if len(shapes) > 1:
            yield ("gpu", cluster, "nodes"), f"training nodes must share one GPU type, found {', '.join(sorted(shapes))}{suffix}"
            continue
        pool_gpus = sum(n.gpus for n in nodes.values())
        teams = {team: q[cluster].gpus for team, q in quotas.items() if cluster in q and q[cluster].gpus}
        total = sum(teams.values())
        if total > pool_gpus:
            detail = ", ".join(f"{team} {gpus}" for team, gpus in sorted(teams.items()))
            yield where, (
                f"teams' GPU quotas on {cluster} add up to {total} ({detail}) but its training pool has {pool_gpus} "
                f"GPUs{suffix}; lower nominal quotas and let teams borrow instead"
            )
