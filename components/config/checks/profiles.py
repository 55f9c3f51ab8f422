"""Cross-field checks of the profile schedule (`profile_schedule`; the design: day/night switching "first manual, then
CronJob"): it switches between known profiles, at least two, that move no node between pools, and under Argo CD
delivery it leaves serving replicas to the serving repository.

These checks judge the scheduled profiles against the active one: Pulumi creates the switched objects and sets the
nodes' pools with `active_profile`, and a switch changes only what differs (components/profiles.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from components.config.checks.training import profile_problems_exist
from components.config.problems import Problem

if TYPE_CHECKING:
    from components.config.views import SiteViews

OPERATIONS_DOC = 'docs/operations.md, "Scheduled switching"'


def _active(site: SiteViews) -> str:
    return f"the active profile {site.active_profile}" if site.active_profile else "the base config (no active_profile)"


def _moves(site: SiteViews, profile: str) -> list[str]:
    """The nodes whose pool under `profile` is not their pool under the active profile: `cluster/node (from -> to)`."""
    return [
        f"{cluster}/{node} ({site.node_pool(cluster, node)} -> {pool})"
        for cluster, spec in sorted(site.gpu.items()) for node in sorted(spec.nodes)
        if (pool := site.node_pool(cluster, node, profile)) != site.node_pool(cluster, node)
    ]


def _count(replicas: int) -> str:
    return f"{replicas} replica" + ("" if replicas == 1 else "s")


def _replicas(site: SiteViews, profile: str | None) -> dict[str, int] | None:
    """Each served model's replicas under a profile, or None where a model cannot be served (its own check says why)."""
    from components.capacity import CapacityError

    try:
        return {model: size.replicas for model, size in site.model_capacity(profile).items()}
    except CapacityError:
        return None


def schedule_problems(site: SiteViews) -> Iterator[Problem]:
    schedule = site.profile_schedule
    if schedule is None:
        return
    path = ("profile_schedule", "switches")
    unknown = [name for name in sorted(schedule.switches) if name not in site.profiles]
    for name in unknown:
        yield (*path, name), f"{name!r} is not a profile; profiles: {', '.join(sorted(site.profiles)) or 'none'}"
    if len(schedule.switches) < 2:
        yield path, (
            f"switches to {', '.join(sorted(schedule.switches)) or 'no profile'} only; a schedule switches between at least "
            "two profiles: add the one it switches back to"
        )
    if unknown or len(schedule.switches) < 2 or any(profile_problems_exist(site, p) for p in schedule.switches):
        return
    moving = False
    for name in sorted(schedule.switches):
        if moves := _moves(site, name):
            moving = True
            yield (*path, name), (
                f"profile {name} moves {', '.join(moves)} against {_active(site)}; a scheduled switch never moves nodes: "
                "node-feature-discovery re-taints a node without draining it, so the pods on it keep its GPUs while the other "
                f"pool counts them ({OPERATIONS_DOC}): leave node_pools out of scheduled profiles and move nodes by hand"
            )
    if moving:
        return
    states: dict[str | None, tuple[Any, ...]] = {}
    for name in [site.active_profile, *sorted(schedule.switches)]:
        replicas = _replicas(site, name)
        if replicas is None:
            return  # a profile that cannot be served is refused by its own check
        states[name] = (site.team_quotas(name), replicas)
    inference = site.inference
    if inference is not None and inference.delivery == "argocd":
        base = states[site.active_profile][1]
        for name in sorted(schedule.switches):
            differ = sorted(m for m, n in states[name][1].items() if n != base[m])
            if differ:
                yield (*path, name), (
                    f"profile {name} serves {', '.join(f'{m} with {_count(states[name][1][m])}' for m in differ)} against "
                    f"{base[differ[0]]} under {_active(site)}, but inference.delivery is argocd: the Deployments are the "
                    "serving repository's, which Argo CD keeps as committed, so a switch changes queues only; change replicas "
                    "by a commit there, or leave replicas out of scheduled profiles"
                )
    if len(set(map(repr, states.values()))) == 1:
        yield ("profile_schedule",), (
            f"profiles {', '.join(sorted(schedule.switches))} set the same queue quotas and replicas as {_active(site)}: "
            "there is nothing to switch; remove profile_schedule"
        )
