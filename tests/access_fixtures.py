"""Small hand-written plans for the `fabctl access` area tests (tests/fabctl/test_access_*.py): Kubernetes objects by
cluster, and other provider resources, registered as a render would."""

from __future__ import annotations

from typing import Any

from fabctl.render import K8S_PROVIDER_TYPE, Plan


def plan_of(objects: list[tuple[str, dict[str, Any]]], resources: list[dict[str, Any]] | None = None) -> Plan:
    """A plan of `objects` ((cluster, Kubernetes object)) on providers named after their clusters, and `resources`."""
    clusters = sorted({cluster for cluster, _ in objects})
    registered: list[dict[str, Any]] = [
        {"urn": f"urn:provider:{c}", "type": K8S_PROVIDER_TYPE, "name": c, "custom": True, "inputs": {}} for c in clusters]
    for index, (cluster, obj) in enumerate(objects):
        registered.append({"urn": f"urn:object:{index}", "type": f"kubernetes:{obj['apiVersion']}:{obj['kind']}",
                           "name": f"object-{index}", "custom": True, "inputs": obj, "provider": f"urn:provider:{cluster}"})
    return Plan(stack="site-t", resources=registered + list(resources or []))


def namespace(name: str, **labels: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}
