"""Topology-aware training on every Kueue cluster: the MultiKueue manager has the site's Topology too, and its flavors
name it, because Kueue admits a workload that asks for a topology only on a topology-aware flavor (and leaves the
placement itself to the worker)."""

from __future__ import annotations

from helpers import render_small
from small_site import small_site


def by_cluster(plan, kind: str) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for cluster, obj, _ in plan.manifests():
        if obj["kind"] == kind:
            out.setdefault(cluster, []).append(obj)
    return out


def test_the_manager_has_the_sites_topology():
    site = small_site(multikueue=True)
    site["training"]["topology_levels"] = ["fab.internal/row", "kubernetes.io/hostname"]
    (topology,) = by_cluster(render_small(site), "Topology")["site-t-compute"]
    assert (topology["metadata"]["name"], topology["spec"]["levels"]) == (
        "fab-topology", [{"nodeLabel": "fab.internal/row"}, {"nodeLabel": "kubernetes.io/hostname"}])


def test_the_managers_flavors_name_the_topology(full_plan):
    (flavor,) = by_cluster(full_plan, "ResourceFlavor")["site-t-compute"]
    assert (flavor["metadata"]["name"], flavor["spec"]["topologyName"]) == ("training-h100", "fab-topology")


def test_the_managers_flavors_match_its_workers(full_plan):
    flavors = {cluster: [f["spec"] for f in found] for cluster, found in by_cluster(full_plan, "ResourceFlavor").items()}
    assert flavors["site-t-compute"] == flavors["site-t-gpu"] == flavors["site-t-gpu-train"]
