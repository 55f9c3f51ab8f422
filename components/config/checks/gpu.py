"""Cross-field checks of the GPU clusters and inference: gpu sections, GPU types, node pools, and models
that fit their inference nodes in the base config and every profile (DESIGN section 2, gpu role).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from components.config import names
from components.config.checks.training import profile_problems_exist
from components.config.fields import GPU_ROLES
from components.config.problems import Problem
from components.constants import GPU_OPERATOR_NAMESPACE, NETWORK_OPERATOR_NAMESPACE

if TYPE_CHECKING:
    from components.config.schema.gpu import GpuClusterConfig
    from components.config.views import SiteViews


GPU_HOST_ACCESS_NAMESPACES = (GPU_OPERATOR_NAMESPACE, NETWORK_OPERATOR_NAMESPACE)
"""Where the program runs the GPU and Network Operators, Pod Security privileged, on every GPU cluster."""


def gpu_problems(site: SiteViews) -> Iterator[Problem]:
    if site.inference is None and site.phase >= 2:
        yield ("inference",), (
            f"is required from phase 02 (inference) on, and the site is at phase {site.phase}: add the inference section, "
            "or set phase: 1 while the GPU base is brought up"
        )
    gpu_keys = set(site.keys_with_role(*GPU_ROLES))
    yield from _host_access_problems(site, sorted(gpu_keys))
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
        yield from _infiniband_problems(site, key)
        yield from _spark_rapids_problems(key, spec)
    yield from _inference_problems(site)


def _spark_rapids_problems(key: str, spec: GpuClusterConfig) -> Iterator[Problem]:
    """Spark RAPIDS executors run on training nodes, each on one node: one must exist with the executor's GPUs."""
    rapids = spec.spark_rapids
    if rapids is None:
        return
    most = max((node.gpus for node in spec.nodes.values() if node.pool == "training"), default=0)
    if rapids.executor_gpus > most:
        yield ("gpu", key, "spark_rapids", "executor_gpus"), (
            f"{rapids.executor_gpus} is more GPUs than any training node of gpu.{key} has ({most}): Spark RAPIDS runs on "
            "training nodes; use at most that many, or add training nodes"
        )


def _host_access_problems(site: SiteViews, gpu_keys: list[str]) -> Iterator[Problem]:
    """The stack's host-access allow-list is the only one the policy pack reads: a GPU cluster lists its operators'."""
    for key in gpu_keys:
        listed = site.clusters[key].host_network_namespaces
        missing = [ns for ns in GPU_HOST_ACCESS_NAMESPACES if ns not in listed]
        if missing:
            yield ("clusters", key, "host_network_namespaces"), (
                f"[{', '.join(listed)}] lacks {', '.join(missing)}, where the program runs an NVIDIA operator with host access on "
                f"every GPU cluster; the policy pack allows host access only in the namespaces listed here, so add "
                f"{'it' if len(missing) == 1 else 'them'}"
            )


_WEIGHTS_OVER_IB_NEEDS = {
    "ipoib_range": "give the IPoIB network an address range",
    "ipoib_partition_key": "IPoIB is invisible to Cilium, so the network stays in a partition of its own (0x0001-0x7ffe)",
    "s3_ipoib_address": "the weight sync reaches the object store at its IPoIB address, or it still goes over Ethernet",
    "storage_qos_service_level": "storage traffic on InfiniBand gets a service level of its own, apart from NCCL's",
}
"""What loading weights over InfiniBand needs, and why."""
_WEIGHTS_OVER_IB_MAY = ("storage_bandwidth_percent",)
"""What loading weights over InfiniBand may set besides, and nothing else reads."""


def _infiniband_problems(site: SiteViews, key: str) -> Iterator[Problem]:
    """Training nodes keep InfiniBand for NCCL; weights load over it only on the inference cluster, and only in a way
    that routes: an IPoIB network in its own partition and service level, and an IPoIB address of the object store."""
    ib = site.gpu[key].infiniband
    path = ("gpu", key, "infiniband")
    if not ib.inference_weights_over_ib:
        for field in (*_WEIGHTS_OVER_IB_NEEDS, *_WEIGHTS_OVER_IB_MAY):
            if getattr(ib, field) is not None:
                yield (*path, field), (
                    "is set but inference_weights_over_ib is false, so nothing uses it (weights load from the Ethernet S3 "
                    "endpoint); remove it, or turn inference_weights_over_ib on"
                )
        return
    serving = site.inference.cluster if site.inference is not None else None
    if key != serving:
        yield (*path, "inference_weights_over_ib"), (
            f"is true on {key}, which does not serve inference (inference.cluster is {serving!r}): training "
            "nodes keep InfiniBand for NCCL only; set it on the inference cluster or remove it"
        )
        return
    if site.storage.object_store.install:
        yield (*path, "inference_weights_over_ib"), (
            "is true but storage.object_store.install is true: an object store this program installs answers S3 on the "
            "storage cluster's network only, never on IPoIB, so the weights would still load over Ethernet; keep it false"
        )
        return
    missing = False
    for field, why in _WEIGHTS_OVER_IB_NEEDS.items():
        if getattr(ib, field) is None:
            missing = True
            yield (*path, field), f"is required while inference_weights_over_ib is true: {why}"
    if missing:
        return
    address, network = ib.s3_ipoib_address, ib.ipoib_range
    if address not in network:
        yield (*path, "s3_ipoib_address"), (
            f"{address} is not in ipoib_range ({network}): the weight sync reaches the object store over the IPoIB network, "
            "so its address is one of that network's"
        )
    elif network.prefixlen <= 30 and address in (network.network_address, network.broadcast_address):
        yield (*path, "s3_ipoib_address"), (
            f"{address} is the {'network' if address == network.network_address else 'broadcast'} address of ipoib_range "
            f"({network}); give the object store's host address"
        )
    if ib.storage_qos_service_level == ib.nccl_service_level:
        yield (*path, "storage_qos_service_level"), (
            f"{ib.storage_qos_service_level} is also nccl_service_level: storage and NCCL traffic need different service "
            "levels, so that the subnet manager keeps storage off NCCL's virtual lane"
        )


def _inference_problems(site: SiteViews) -> Iterator[Problem]:
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
    yield from _gateway_size_problems(site)
    yield from _served_name_problems(site)
    yield from _canary_problems(site)
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


def _canary_problems(site: SiteViews) -> Iterator[Problem]:
    """A canary is a model's next revision beside its current one: the two differ, and the canary's names fit."""
    assert site.inference is not None
    for name, model in sorted(site.inference.models.items()):
        canary = model.canary
        if canary is None:
            continue
        path = ("inference", "models", name, "canary")
        canary_name = names.VLLM_CANARY(name)
        if canary.revision == model.revision:
            yield (*path, "revision"), (
                f"{canary.revision!r} is the model's current revision; a canary serves the next one (promote it by setting "
                f"revision: {canary.revision} and removing the canary)"
            )
        if len(canary_name) > names.DNS_1035_LABEL.max_length:
            yield (*path,), (
                f"the canary's Deployment and Service would be named {canary_name!r} ({len(canary_name)} characters, at most "
                f"{names.DNS_1035_LABEL.max_length}): use a model key of at most {names.VLLM_CANARY.room()} characters"
            )


GATEWAY_MAX_OWN_RATES = 15
"""The per-proxy backstop of the rate limits has a rule per team with its own rate plus the default one; Envoy Gateway
1.9 allows 16 local rules."""


def _gateway_size_problems(site: SiteViews) -> Iterator[Problem]:
    """What the inference gateway's rate limits can hold (see components/inference.py): the teams' own rates."""
    own = site.inference.team_requests_per_minute
    if len(own) > GATEWAY_MAX_OWN_RATES:
        yield ("inference", "team_requests_per_minute"), (
            f"{len(own)} teams have their own rate; at most {GATEWAY_MAX_OWN_RATES} can (Envoy Gateway's 16 local rate limit "
            "rules hold one per team with its own rate and the default); give the others the default requests_per_minute"
        )


def _served_name_problems(site: SiteViews) -> Iterator[Problem]:
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
