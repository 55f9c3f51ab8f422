"""Readiness: every LoadBalancer Service that `pulumi up` waits for can get an address before the wait begins.

Pulumi waits for a LoadBalancer Service until it has an address, and a Helm release (unless `skipAwait`) until
its objects are ready, its LoadBalancer Services included. Cilium's LB-IPAM gives an address only from a pool
whose `serviceSelector` matches the Service's labels, so such a pool must be created before whatever waits.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator
from typing import Any

from fabctl.check.findings import Finding
from fabctl.check.picture import Picture
from fabctl.check.placed import Placed
from fabctl.check.scheduling import label_expression

POOL_KIND = "CiliumLoadBalancerIPPool"


def _is_load_balancer(obj: dict[str, Any]) -> bool:
    return obj.get("kind") == "Service" and (obj.get("spec") or {}).get("type") == "LoadBalancer"


def _selects(pool: dict[str, Any], service: Placed) -> bool:
    """Cilium LB-IPAM: an enabled pool serves a Service its `serviceSelector` matches (no selector: every Service),
    with the Service's namespace and name as the labels `io.kubernetes.service.namespace`/`.name`; and a Service
    that asks for addresses (`lbipam.cilium.io/ips`) only from a pool whose blocks hold them."""
    spec = pool.get("spec") or {}
    if spec.get("disabled"):
        return False
    metadata = service.obj.get("metadata") or {}
    labels = {**(metadata.get("labels") or {}), "io.kubernetes.service.namespace": service.namespace or "",
              "io.kubernetes.service.name": service.name}
    selector = spec.get("serviceSelector")
    if selector is not None:
        if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
            return False
        if not all(label_expression(e, labels) for e in selector.get("matchExpressions") or []):
            return False
    wanted = [a.strip() for a in ((metadata.get("annotations") or {}).get(IPS_ANNOTATION) or "").split(",") if a.strip()]
    return all(any(_holds(block, address) for block in spec.get("blocks") or []) for address in wanted)


IPS_ANNOTATION = "lbipam.cilium.io/ips"


def _holds(block: dict[str, Any], address: str) -> bool:
    try:
        ip = ipaddress.ip_address(address)
        if block.get("cidr"):
            return ip in ipaddress.ip_network(block["cidr"], strict=False)
        return ipaddress.ip_address(block["start"]) <= ip <= ipaddress.ip_address(block.get("stop") or block["start"])
    except (ValueError, KeyError, TypeError):
        return False


def load_balancer_findings(picture: Picture) -> Iterator[Finding]:
    pools = [p for p in picture.placed if p.kind == POOL_KIND]
    for service in picture.placed:
        if not _is_load_balancer(service.obj) or not picture.awaited(service):
            continue
        metadata = service.obj.get("metadata") or {}
        labels = dict(sorted((metadata.get("labels") or {}).items()))
        candidates: list[Placed] = [p for p in pools if p.cluster == service.cluster and _selects(p.obj, service)]
        waiter = service.resource["name"]
        if not candidates:
            asked = f" and addresses {metadata['annotations'][IPS_ANNOTATION]}" if IPS_ANNOTATION in (metadata.get("annotations") or {}) else ""
            yield Finding.of("readiness.load-balancer", service, f"no LB-IPAM pool selects its labels {labels}{asked}, so {waiter} waits forever",
                             "label the Service for one of the cluster's pools (CrossClusterNetwork.lb_service_labels)")
        elif not any(picture.before(pool, service.resource) for pool in candidates):
            names = ", ".join(sorted({p.resource["name"] for p in candidates}))
            yield Finding.of("readiness.load-balancer", service, f"{waiter} waits for its address, but the pool {names} is not created before it",
                             f"make {waiter} depend on the pool (CrossClusterNetwork.lb_pool), or keep the chart's Service ClusterIP")


POST_HOOKS = ("post-install", "post-upgrade")


def hook_findings(picture: Picture) -> Iterator[Finding]:
    """Helm runs a waiting release's post-install hooks only once all its objects are ready: a pod that waits for
    such a hook (a database migration, say) never becomes ready. Which pods wait for a hook is not in the objects,
    so each such hook is a note for the reviewer."""
    for placed in picture.placed:
        hooks = ((placed.obj.get("metadata") or {}).get("annotations") or {}).get("helm.sh/hook", "")
        if placed.kind == "Job" and placed.release is not None and picture.awaited(placed) \
                and any(h.strip() in POST_HOOKS for h in hooks.split(",")):
            yield Finding.of("readiness.deadlock", placed, f"it is a {hooks} hook of a release that waits: it runs only after every "
                             "object of the release is ready, so no pod of the release may wait for it",
                             "run it as a plain Job (the chart's useHelmHooks: false or equivalent) if a pod waits for it",
                             severity="note")
