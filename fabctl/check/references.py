"""References: every object a pod or a custom resource names exists, and nothing waits on a pod whose needs wait on it.

A pod whose Secret, ConfigMap, ServiceAccount, PVC or PriorityClass is missing never starts (and its image pull
Secret, its volumes' StorageClass); a Gateway without its GatewayClass or certificate is never programmed. Each
name must be created by the plan, by a chart, by a controller at run time (`runtime.RUNTIME_OBJECTS`), or be
declared in `check.existing`. And if the object that holds the reference is awaited (a Helm release waits for its
pods, Pulumi for a Deployment), what it needs must not itself wait for it: that wait never ends.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from components.constants import KUEUE_NAMESPACE
from fabctl.check.findings import Finding
from fabctl.check.picture import Picture
from fabctl.check.placed import Placed
from fabctl.check.runtime import created_at_run_time

CLUSTER_SCOPED = {"PriorityClass", "StorageClass", "GatewayClass", "IngressClass"}
BUILTIN_PRIORITY_CLASSES = {"system-node-critical", "system-cluster-critical"}
CLUSTER_POD_TEMPLATES = {"ClusterTrainingRuntime"}
"""Cluster-scoped objects whose pod templates run in the namespace of whatever job names them (a TrainJob's): only their
cluster-scoped references (PriorityClass, StorageClass) have one place to be checked."""


@dataclass(frozen=True)
class Reference:
    kind: str
    name: str
    namespace: str | None
    path: str
    """Where in the object the name is written (for the finding)."""


def _ref(kind: str, node: Any, field: str, namespace: str | None, path: str) -> Iterator[Reference]:
    if isinstance(node, dict) and isinstance(node.get(field), str) and node[field] and not node.get("optional"):
        yield Reference(kind, node[field], None if kind in CLUSTER_SCOPED else node.get("namespace") or namespace, path)


def _walk(node: Any, namespace: str | None, path: str) -> Iterator[Reference]:
    """The references written in the shapes Kubernetes and the pinned CRDs use (env, volumes, Gateway refs, ...)."""
    if isinstance(node, list):
        for i, item in enumerate(node):
            yield from _walk(item, namespace, f"{path}[{i}]")
        return
    if not isinstance(node, dict):
        return
    for key, value in node.items():
        here = f"{path}.{key}" if path else key
        if key in ("secretKeyRef", "secretRef", "clientSecret"):
            yield from _ref("Secret", value, "name", namespace, here)
        elif key in ("configMapKeyRef", "configMapRef"):
            yield from _ref("ConfigMap", value, "name", namespace, here)
        elif key == "secret" and isinstance(value, dict):
            yield from _ref("Secret", value, "secretName" if "secretName" in value else "name", namespace, here)
        elif key == "configMap" and isinstance(value, dict):
            yield from _ref("ConfigMap", value, "name", namespace, here)
        elif key == "persistentVolumeClaim":
            yield from _ref("PersistentVolumeClaim", value, "claimName", namespace, here)
        elif key == "imagePullSecrets" and isinstance(value, list):
            for i, item in enumerate(value):
                yield from _ref("Secret", item, "name", namespace, f"{here}[{i}]")
        elif key in ("certificateRefs", "caCertificateRefs") and isinstance(value, list):
            for i, item in enumerate(value):
                if isinstance(item, dict) and item.get("kind", "Secret") in ("Secret", "ConfigMap") and not item.get("group"):
                    yield from _ref(item.get("kind", "Secret"), item, "name", namespace, f"{here}[{i}]")
        elif key in ("serviceAccountName", "priorityClassName", "storageClassName", "gatewayClassName", "ingressClassName") and isinstance(value, str):
            kind = {"serviceAccountName": "ServiceAccount", "priorityClassName": "PriorityClass", "storageClassName": "StorageClass",
                    "gatewayClassName": "GatewayClass", "ingressClassName": "IngressClass"}[key]
            yield from _ref(kind, {"name": value}, "name", namespace, here)
        else:
            yield from _walk(value, namespace, here)


def _known_fields(placed: Placed) -> Iterator[Reference]:
    """References the pinned CRDs write in their own shapes."""
    spec, namespace = placed.obj.get("spec") or {}, placed.namespace
    if placed.kind == "Cluster" and placed.group == "postgresql.cnpg.io":
        yield from _ref("Secret", spec.get("superuserSecret"), "name", namespace, "spec.superuserSecret")
        yield from _ref("Secret", ((spec.get("bootstrap") or {}).get("initdb") or {}).get("secret"), "name", namespace, "spec.bootstrap.initdb.secret")
        store = (spec.get("backup") or {}).get("barmanObjectStore") or {}
        for field in ("accessKeyId", "secretAccessKey"):
            yield from _ref("Secret", (store.get("s3Credentials") or {}).get(field), "name", namespace, f"spec.backup.barmanObjectStore.s3Credentials.{field}")
        yield from _ref("Secret", store.get("endpointCA"), "name", namespace, "spec.backup.barmanObjectStore.endpointCA")
        yield from _ref("StorageClass", {"name": (spec.get("storage") or {}).get("storageClass")}, "name", None, "spec.storage.storageClass")
    if placed.kind == "MultiKueueCluster":
        kubeconfig = (spec.get("clusterSource") or {}).get("kubeConfig") or spec.get("kubeConfig") or {}
        if kubeconfig.get("locationType", "Secret") == "Secret":
            yield from _ref("Secret", {"name": kubeconfig.get("location")}, "name", KUEUE_NAMESPACE, "spec.clusterSource.kubeConfig.location")


def references(placed: Placed) -> list[Reference]:
    if placed.kind in ("Secret", "ConfigMap", "CustomResourceDefinition"):
        return []
    body = {k: v for k, v in placed.obj.items() if k not in ("metadata", "status", "apiVersion", "kind")}
    found = [*_walk(body, placed.namespace, ""), *_known_fields(placed)]
    if placed.kind in CLUSTER_POD_TEMPLATES:
        return [ref for ref in found if ref.kind in CLUSTER_SCOPED]
    return found


def _sources(picture: Picture, placed: Placed, ref: Reference) -> list[Placed]:
    return picture.by_name.get((placed.cluster, ref.kind, ref.namespace, ref.name), [])


def reference_findings(picture: Picture) -> Iterator[Finding]:
    for placed in picture.placed:
        for ref in references(placed):
            where = f"{ref.kind} {ref.namespace}/{ref.name}" if ref.namespace else f"{ref.kind} {ref.name}"
            sources = _sources(picture, placed, ref)
            if sources:
                yield from _deadlocks(picture, placed, ref, where, sources)
                continue
            if (ref.kind == "PriorityClass" and ref.name in BUILTIN_PRIORITY_CLASSES) or created_at_run_time(ref.kind, ref.namespace, ref.name) \
                    or picture.existing(placed.cluster, ref.kind, ref.namespace, ref.name):
                continue
            unrendered = [r for r in picture.unrendered(placed.cluster) if ref.namespace in (None, r["inputs"].get("namespace"))]
            if unrendered:
                names = ", ".join(sorted(r["name"] for r in unrendered))
                yield Finding.of("references", placed, f"{ref.path} names {where}, not in the picture; the unrendered releases {names} may create it",
                                 "render every release (see the missing charts) to check it", severity="note")
                continue
            yield Finding.of("references", placed, f"{ref.path} names {where}, which nothing creates",
                             f"create {where} in the program, fix the name, or declare it in check.existing.{picture.cluster_key(placed.cluster)}")


def _deadlocks(picture: Picture, placed: Placed, ref: Reference, where: str, sources: list[Placed]) -> Iterator[Finding]:
    if not picture.awaited(placed):
        return
    waiting = [s for s in sources if s.resource["urn"] != placed.resource["urn"] and placed.resource["urn"] in picture.waits_for(s.resource)]
    if waiting and len(waiting) == len(sources):
        source = waiting[0]
        yield Finding.of("readiness.deadlock", placed,
                         f"{placed.resource['name']} waits until it is ready, but it needs {where} ({ref.path}), which "
                         f"{source.origin} creates only after {placed.resource['name']}",
                         f"remove the dependency of {source.resource['name']} on {placed.resource['name']}, or skip waiting for it")
