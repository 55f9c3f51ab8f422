"""Deploy order: what a first `pulumi up` on empty clusters waits for, read from a plan.

Pulumi creates a resource once everything it depends on exists, and then waits for it: a Helm
release until its objects are ready (LoadBalancer Services included: until they have an address),
a LoadBalancer Service until it has an address. Each finding here is a wait that cannot end, or an
object applied before the namespace that holds it, on an empty cluster.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from fabctl.helm import RenderedRelease
from fabctl.render import Plan

POOL_KIND = "CiliumLoadBalancerIPPool"
SKIP_AWAIT = "pulumi.com/skipAwait"


def _short(urn: str) -> str:
    return urn.rsplit("::", 1)[-1]


def _is_load_balancer(obj: dict[str, Any]) -> bool:
    return obj.get("kind") == "Service" and (obj.get("spec") or {}).get("type") == "LoadBalancer"


def _selects(pool: dict[str, Any], labels: dict[str, str]) -> bool:
    selector = ((pool.get("spec") or {}).get("serviceSelector") or {}).get("matchLabels") or {}
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def awaited_load_balancers(plan: Plan, releases: Iterable[RenderedRelease]) -> list[tuple[dict[str, Any], str, dict[str, Any]]]:
    """(resource that waits, cluster, Service) for every LoadBalancer Service whose address `pulumi up` waits for:
    the program's own (unless skipAwait) and those of Helm releases that wait for readiness."""
    found = [
        (record, cluster, obj) for cluster, obj, record in plan.manifests()
        if _is_load_balancer(obj) and ((obj.get("metadata") or {}).get("annotations") or {}).get(SKIP_AWAIT) != "true"
    ]
    for rendered in releases:
        if not rendered.release["inputs"].get("skipAwait"):
            found += [(rendered.release, rendered.cluster, obj) for obj in rendered.objects if _is_load_balancer(obj)]
    return found


def load_balancer_problems(plan: Plan, releases: Iterable[RenderedRelease]) -> list[str]:
    """LoadBalancer Services that are waited on before an LB-IPAM pool that can give them an address exists."""
    pools = [(cluster, obj, record) for cluster, obj, record in plan.manifests() if obj["kind"] == POOL_KIND]
    problems = []
    for waiter, cluster, service in awaited_load_balancers(plan, releases):
        labels = (service.get("metadata") or {}).get("labels") or {}
        name = f"Service {service['metadata'].get('namespace', '')}/{service['metadata']['name']} on {cluster}"
        candidates = [record["urn"] for c, pool, record in pools if c == cluster and _selects(pool, labels)]
        if not candidates:
            problems.append(f"{name}: no LB-IPAM pool selects its labels {labels}, so {_short(waiter['urn'])} waits forever")
        elif not set(candidates) & plan.waits_for(waiter):
            problems.append(
                f"{name}: {_short(waiter['urn'])} waits for its address, but the pool "
                f"{', '.join(_short(u) for u in candidates)} is not created before it"
            )
    return problems


def namespace_problems(plan: Plan) -> list[str]:
    """Objects applied to a namespace the plan creates, without waiting for that Namespace."""
    namespaces = {(cluster, obj["metadata"]["name"]): record["urn"] for cluster, obj, record in plan.manifests() if obj["kind"] == "Namespace"}
    problems = []
    for cluster, obj, record in plan.manifests():
        namespace = (obj.get("metadata") or {}).get("namespace")
        created = namespaces.get((cluster, namespace))
        if created and created not in plan.waits_for(record):
            problems.append(f"{obj['kind']} {namespace}/{obj['metadata']['name']} on {cluster} does not wait for its namespace")
    for release in plan.of_type("kubernetes:helm.sh/v3:Release"):
        created = namespaces.get((plan.cluster(release) or "", release["inputs"].get("namespace")))
        if created and created not in plan.waits_for(release):
            problems.append(f"Helm release {_short(release['urn'])} does not wait for its namespace {release['inputs']['namespace']}")
    return problems
