"""Cross-field rules of the GPU clusters and inference: gpu sections, GPU types, node pools, and models
that fit their inference nodes in the base config and every profile (DESIGN section 2, gpu role).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from components.config.fields import GPU_ROLES
from components.config.problems import Problem
from components.config.rules.training import profile_problems_exist

if TYPE_CHECKING:
    from components.config.site import SiteConfig


def gpu_problems(site: SiteConfig) -> Iterator[Problem]:
    if site.inference is None and site.phase >= 2:
        yield ("inference",), (
            f"is required from phase 02 (inference) on, and the site is at phase {site.phase}: add the inference section, "
            "or set phase: 1 while the GPU base is brought up"
        )
    gpu_keys = set(site.keys_with_role(*GPU_ROLES))
    for key in sorted(set(site.gpu) - gpu_keys):
        role = site.clusters[key].role if key in site.clusters else None
        yield ("gpu", key), (
            f"{key!r} is {'a ' + role + ' cluster' if role else 'not a cluster of this site'}; gpu sections are for "
            f"gpu and gpu-train clusters: {', '.join(sorted(gpu_keys))}"
        )
    for key in sorted(gpu_keys - set(site.gpu)):
        yield ("gpu",), f"cluster {key!r} has role {site.clusters[key].role} but no gpu section: list its GPU nodes"
    types = site.all_gpu_types()
    for key, spec in sorted(site.gpu.items()):
        for node_name, node in spec.nodes.items():
            if node.gpu_type not in types:
                yield ("gpu", key, "nodes", node_name, "gpu_type"), (
                    f"{node.gpu_type!r} is not a GPU type; known: {', '.join(sorted(types))} (add it under gpu_types)"
                )
        for i, node_name in enumerate(spec.system_nodes):
            if node_name in spec.nodes:
                yield ("gpu", key, "system_nodes", i), (
                    f"{node_name!r} is also a GPU node of gpu.{key}.nodes; system nodes are the untainted nodes without GPUs"
                )
        if key in site.clusters and site.clusters[key].role == "gpu-train":
            for node_name, node in spec.nodes.items():
                if node.pool == "inference":
                    yield ("gpu", key, "nodes", node_name, "pool"), (
                        f"'inference' is not allowed on gpu-train cluster {key}: it trains only; serve from a gpu cluster"
                    )
        elif site.inference is None and site.phase == 1:
            for node_name, node in sorted(spec.nodes.items()):
                if node.pool == "inference":
                    yield ("gpu", key, "nodes", node_name, "pool"), (
                        "'inference' but the site serves no models (no inference section): use pool training until it does"
                    )
        ib = spec.infiniband
        if ib.inference_weights_over_ib and ib.ipoib_range is None and site.inference is not None and key == site.inference.cluster:
            yield ("gpu", key, "infiniband", "ipoib_range"), (
                "is required while inference_weights_over_ib is true: give the IPoIB network an address range"
            )
    yield from _inference_problems(site)


def _inference_problems(site: SiteConfig) -> Iterator[Problem]:
    from components.capacity import CapacityError

    inference = site.inference
    if inference is None:
        return
    path = ("inference",)
    cluster = site.clusters.get(inference.cluster)
    if cluster is None or cluster.role != "gpu":
        yield (*path, "cluster"), (
            f"{inference.cluster!r} is not a gpu cluster of this site; gpu clusters: {', '.join(site.keys_with_role('gpu'))}"
        )
        return
    for team in sorted(set(inference.team_requests_per_minute) - set(site.teams)):
        yield (*path, "team_requests_per_minute", team), f"{team!r} is not a team; teams: {', '.join(sorted(site.teams))}"
    yield from _served_name_problems(site)
    bad_models = False
    for name, model in sorted(inference.models.items()):
        if model.mean_context is not None and model.mean_context > model.max_context:
            bad_models = True
            yield (*path, "models", name, "mean_context"), f"{model.mean_context} is longer than max_context {model.max_context}"
    gateway = inference.gateway
    pool = cluster.lb_pools.get(gateway.pool)
    if pool is None or pool.visibility != "internal":
        yield (*path, "gateway", "pool"), f"{gateway.pool!r} is not an internal pool of clusters.{inference.cluster}"
    elif not any(gateway.vip in cidr for cidr in pool.cidrs):
        yield (*path, "gateway", "vip"), (
            f"{gateway.vip} is not in pool {gateway.pool!r} ({', '.join(map(str, pool.cidrs))}); pick an address of that pool"
        )
    nodes = site.pool_nodes(inference.cluster, "inference")
    if any(n.gpu_type not in site.all_gpu_types() for n in nodes.values()):
        return  # reported on the node itself
    shapes = {(n.gpu_type, n.gpus) for n in nodes.values()}
    if not nodes:
        yield ("gpu", inference.cluster, "nodes"), "has no node in pool inference: the models need somewhere to run"
        return
    if len(shapes) > 1:
        yield ("gpu", inference.cluster, "nodes"), (
            "inference nodes must share one GPU type and count, found "
            + ", ".join(f"{t} x{g}" for t, g in sorted(shapes))
        )
        return
    if bad_models or any(n.gpu_type not in site.all_gpu_types() for n in nodes.values()):
        return
    for profile in [None, *sorted(p for p in site.profiles if not profile_problems_exist(site, p))]:
        where = (*path, "models") if profile is None else ("profiles", profile)
        suffix = "" if profile is None else f" (profile {profile})"
        try:
            site.model_capacity(profile)
        except CapacityError as exc:
            yield where, f"{exc}{suffix}"
        except StopIteration:
            yield ("profiles", profile or "", "node_pools"), f"leaves no inference node on {inference.cluster}{suffix}"


def _served_name_problems(site: SiteConfig) -> Iterator[Problem]:
    """The gateway routes by the OpenAI model name, so no two models are served under one name. A model without
    `served_name` is served as its key, which is a contract (its Services are named by it); so a clash is
    reported on the `served_name` written out, the later one by key when both are."""
    models = site.inference.models
    owner = {name: name for name, model in models.items() if model.served_name is None}
    for name, model in sorted(models.items()):
        served = model.served_name
        if served is None:
            continue
        other = owner.setdefault(served, name)
        if other == name:
            continue
        taken = (
            f"the served_name of inference.models.{other}" if models[other].served_name is not None
            else f"the key of inference.models.{other}, which has no served_name and is served as its key"
        )
        yield ("inference", "models", name, "served_name"), (
            f"{served!r} is already {taken}; the OpenAI API routes by model name, so give each model its own"
        )
