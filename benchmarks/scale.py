"""Generated sites at growing scale: one dimension grows, everything else stays as in a checked-in stack."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

Site = dict[str, Any]


def with_teams(base: Site, count: int) -> Site:
    """`count` teams more than the stack file; each new team gets a Keycloak group, clients and rate-limit keys."""
    site = copy.deepcopy(base)
    for i in range(count):
        site["teams"][f"t-{i:03d}"] = {"description": f"generated team {i}"}
    return site


def with_models(base: Site, count: int) -> Site:
    """Exactly `count` small models (one GPU each) served on eight inference nodes, whatever the count."""
    site = copy.deepcopy(base)
    cluster = site["inference"]["cluster"]
    nodes = site["gpu"][cluster]["nodes"]
    gpu_type = next(n["gpu_type"] for n in nodes.values() if n["pool"] == "inference")
    for i in range(8 - sum(1 for n in nodes.values() if n["pool"] == "inference")):
        nodes[f"gpu-gen-inf-{i:02d}"] = {"gpu_type": gpu_type, "gpus": 8, "pool": "inference"}
    site["inference"]["models"] = {
        f"m-{i:03d}": {"source": f"acme/m-{i:03d}/", "params_billion": 1.5, "layers": 28, "kv_heads": 2, "head_dim": 128,
                       "max_context": 8192, "concurrent_sequences": 16, "min_replicas": 1}
        for i in range(count)
    }
    for profile in site.get("profiles", {}).values():
        profile.pop("replicas", None)
    # What names a model by its key follows the generated ones: phase 03's run serves the first.
    acceptance = site.get("acceptance", {})
    acceptance.pop("serving_slo_models", None)
    if acceptance.get("serving_loop"):
        acceptance["serving_loop"]["model"] = "m-000"
    return site


def with_gpu_clusters(base: Site, count: int) -> Site:
    """`count` GPU clusters: the stack file's one plus training clusters numbered after it (site-b's addressing plan)."""
    site = copy.deepcopy(base)
    template = site["clusters"]["gpu"]
    for i in range(1, count):
        third = 3 + i
        site["clusters"][f"gpu-{i + 1}"] = {
            **copy.deepcopy(template), "cluster_id": third, "pod_cidr": f"10.{82 + i}.0.0/16", "node_cidr": f"10.20.{third}.0/24",
            "api_server": f"10.20.{third}.10", "bgp_asn": 65203 + i, "bgp_peers": {"tor-1": {"address": f"10.20.{third}.1", "asn": 65200}},
            "lb_pools": {"internal": {"cidrs": [f"10.20.{100 + third}.0/27"]}}, "clustermesh_vip": f"10.20.{100 + third}.2",
        }
        site["gpu"][f"gpu-{i + 1}"] = {
            "nodes": {f"gpu-gen-{i + 1}-trn-01": {"gpu_type": "h100", "gpus": 8, "pool": "training"}},
            "system_nodes": [f"gpu-gen-{i + 1}-sys-01"],
        }
    return site


DIMENSIONS: dict[str, tuple[str, Callable[[Site, int], Site], tuple[int, ...]]] = {
    # dimension: (base stack, generator, scales)
    "teams": ("site-a", with_teams, (4, 16, 64, 256)),
    "models": ("site-a", with_models, (2, 8, 32)),
    "gpu clusters": ("site-b", with_gpu_clusters, (1, 2, 4, 8)),
}
