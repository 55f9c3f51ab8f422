"""Readers shared by the rules: Kubernetes objects, pod templates, clusters and Helm values of policy resources."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator
from typing import Any

HELM_RELEASE = "kubernetes:helm.sh/v3:Release"
WORKLOAD_KINDS = {"Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job", "CronJob", "Pod"}
GPU_COMPONENT = "fab:gpu:GpuCluster"
RFC1918 = tuple(ipaddress.ip_network(n) for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"))


def plain(value: Any) -> Any:
    """A policy property (proxied dicts and lists) as plain Python data."""
    if hasattr(value, "items"):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)) or (hasattr(value, "__iter__") and not isinstance(value, (str, bytes))):
        return [plain(v) for v in value]
    return value


def k8s_object(resource_type: str, props: Any) -> dict[str, Any] | None:
    """The Kubernetes object a resource applies, or None for anything else (Helm releases, providers, ...)."""
    if not resource_type.startswith("kubernetes:") or resource_type == HELM_RELEASE:
        return None
    obj = plain(props)
    return obj if isinstance(obj, dict) and "kind" in obj and "apiVersion" in obj else None


def pod_spec(obj: dict[str, Any]) -> dict[str, Any] | None:
    kind = obj.get("kind")
    spec = obj.get("spec") or {}
    if kind == "Pod":
        return spec
    if kind == "CronJob":
        return ((spec.get("jobTemplate") or {}).get("spec") or {}).get("template", {}).get("spec")
    if kind in WORKLOAD_KINDS:
        return (spec.get("template") or {}).get("spec")
    return None


def containers(pod: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield from pod.get("initContainers") or []
    yield from pod.get("containers") or []


def namespace_of(obj: dict[str, Any]) -> str:
    return (obj.get("metadata") or {}).get("namespace") or ""


def name_of(obj: dict[str, Any]) -> str:
    return (obj.get("metadata") or {}).get("name") or ""


def is_private(address: str) -> bool:
    try:
        return any(ipaddress.ip_network(address, strict=False).subnet_of(block) for block in RFC1918)
    except ValueError:
        return False


def provider_name(resource: Any) -> str:
    provider = getattr(resource, "provider", None)
    return getattr(provider, "name", "") or ""


def top_component(resource: Any) -> Any:
    top = None
    parent = getattr(resource, "parent", None)
    while parent is not None:
        if not parent.resource_type.startswith("pulumi:pulumi:Stack"):
            top = parent
        parent = parent.parent
    return top


def gpu_providers(resources: list[Any]) -> set[str]:
    """Providers of GPU clusters: the clusters a GpuCluster component manages."""
    return {
        provider_name(r) for r in resources
        if getattr(top_component(r), "resource_type", "") == GPU_COMPONENT and provider_name(r)
    }


def objects(resources: list[Any]) -> Iterator[tuple[Any, dict[str, Any]]]:
    """(resource, Kubernetes object) for every Kubernetes object of a stack."""
    for resource in resources:
        obj = k8s_object(resource.resource_type, resource.props)
        if obj is not None:
            yield resource, obj


def label(obj: dict[str, Any], key: str) -> str | None:
    return ((obj.get("metadata") or {}).get("labels") or {}).get(key)
