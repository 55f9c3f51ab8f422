"""Readers shared by the rules: Kubernetes objects, pod templates, clusters and Helm values of policy resources.

Values that are unknown during a preview (they depend on resources not created yet) arrive as the engine's
sentinels; the SDK's property proxies raise on them, which would end a rule early and turn it into an
advisory "can't run during preview". `plain()` instead marks them `UNKNOWN`, and every rule says what it
does with them: a mandatory rule whose decision rests on an unknown value fails closed (`undecided()`),
and a rule that looks for literal text skips them (a computed value is never a literal in the program).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator, Mapping
from typing import Any

from pulumi_policy import proxy
from pulumi_policy.proxy import _DictProxy, _is_unknown, _ListProxy  # the SDK's own proxies and sentinels

HELM_RELEASE = "kubernetes:helm.sh/v3:Release"
WORKLOAD_KINDS = {"Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job", "CronJob", "Pod"}
GPU_COMPONENT = "fab:gpu:GpuCluster"
RFC1918 = tuple(ipaddress.ip_network(n) for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"))


class _Unknown:
    """A value that can't be known during preview."""

    def __repr__(self) -> str:
        return "<unknown during preview>"


UNKNOWN = _Unknown()


_SENTINELS = frozenset(getattr(proxy, name) for name in dir(proxy) if name.startswith("UNKNOWN_") and name.endswith("_VALUE"))
"""The engine's values for what can't be known during preview (the SDK's `_is_unknown` tests a string against these)."""


def plain(value: Any) -> Any:
    """A policy property (proxied dicts and lists) as plain Python data, unknown values marked `UNKNOWN` (never raising).

    Every rule reads its resources through here, once per resource per rule, so the common types are told apart by
    their exact type before the general (and much slower) abstract-type checks."""
    kind = type(value)
    if kind is _DictProxy or kind is _ListProxy:
        value = value["__target"]
        kind = type(value)
    if kind is dict:
        return {k: plain(v) for k, v in value.items()}
    if kind is list:
        return [plain(v) for v in value]
    if kind is str:
        return UNKNOWN if value in _SENTINELS else value
    if value is None or kind is bool or kind is int or kind is float:
        return value
    if isinstance(value, (_DictProxy, _ListProxy)):
        value = value["__target"]
    if isinstance(value, Mapping):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return UNKNOWN if _is_unknown(value) else value


def chart_name(chart: Any) -> Any:
    """A Helm release's chart by name, wherever it comes from: `kueue`, or `oci://<registry>/<path>/kueue` (an OCI
    registry's, the site registry's included); UNKNOWN stays UNKNOWN."""
    return chart.rstrip("/").rsplit("/", 1)[-1] if isinstance(chart, str) else chart


def unknown_paths(value: Any, path: str = "") -> list[str]:
    """Where `value` holds unknowns, as `.a.b[0]` paths."""
    if value is UNKNOWN:
        return [path or "."]
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in unknown_paths(v, f"{path}.{k}")]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in unknown_paths(v, f"{path}[{i}]")]
    return []


def undecided(what: str, value: Any, prefix: str = "") -> str | None:
    """The fail-closed violation of a mandatory rule whose deciding `value` holds unknowns, or None when it is all known."""
    paths = unknown_paths(value, prefix)
    if not paths:
        return None
    return (f"{what}: {', '.join(paths)} can't be known during preview, and this rule decides on it, so it fails closed; "
            "compute the value in the program instead of from another resource's output")


def skip_unknown(value: Any) -> Any:
    """`value` with every unknown dropped (None in its place): for rules that look for something and skip what can't be known."""
    if value is UNKNOWN:
        return None
    if isinstance(value, dict):
        return {k: skip_unknown(v) for k, v in value.items()}
    if isinstance(value, list):
        return [skip_unknown(v) for v in value]
    return value


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


_OBJECT = "_fab_k8s_object"
"""Where a proxied property set keeps its object once read: the stack policies read every resource, each of them several
times, and a policy SDK that hands the same resources to all of them (`fabctl.policy.analyze_in_process`) lets them share
it. Rules only read objects, never change them."""


def k8s_object(resource_type: str, props: Any) -> dict[str, Any] | None:
    """The Kubernetes object a resource applies, or None for anything else (Helm releases, providers, ...)."""
    if not resource_type.startswith("kubernetes:") or resource_type == HELM_RELEASE:
        return None
    if type(props) is not _DictProxy:
        return _object(props)
    read = props.__dict__.get(_OBJECT)
    if read is None:
        read = props.__dict__[_OBJECT] = (_object(props),)
    return read[0]


def _object(props: Any) -> dict[str, Any] | None:
    obj = plain(props)
    # The kind and API version follow from the resource type, so they are always known.
    return obj if isinstance(obj, dict) and isinstance(obj.get("kind"), str) and isinstance(obj.get("apiVersion"), str) else None


def pod_spec(obj: dict[str, Any]) -> Any:
    """The pod template's spec of a workload (UNKNOWN where any level of it is unknown), or None for other kinds."""
    kind = obj.get("kind")
    if kind not in WORKLOAD_KINDS:
        return None
    path = {"Pod": ["spec"], "CronJob": ["spec", "jobTemplate", "spec", "template", "spec"]}.get(kind, ["spec", "template", "spec"])
    value: Any = obj
    for key in path:
        if value is UNKNOWN:
            return UNKNOWN
        value = _dict(value).get(key)
    return value


def pod_fields(pod: Any, pod_keys: tuple[str, ...], container_keys: tuple[str, ...]) -> Any:
    """The parts of a pod template a rule decides on: some pod fields and some fields of every container (UNKNOWN stays)."""
    if pod is UNKNOWN:
        return UNKNOWN
    out: dict[str, Any] = {key: _dict(pod).get(key) for key in pod_keys}
    for key in ("initContainers", "containers"):
        items = _dict(pod).get(key)
        out[key] = items if items is UNKNOWN or not isinstance(items, list) else [
            c if not isinstance(c, dict) else {k: c.get(k) for k in container_keys} for c in items
        ]
    return out


def containers(pod: Any) -> Iterator[dict[str, Any]]:
    for key in ("initContainers", "containers"):
        items = _dict(pod).get(key)
        yield from (c for c in (items if isinstance(items, list) else []) if isinstance(c, dict))


def namespace_of(obj: dict[str, Any]) -> str:
    value = _dict(_dict(obj).get("metadata")).get("namespace")
    return value if isinstance(value, str) else ""


def name_of(obj: dict[str, Any]) -> str:
    value = _dict(_dict(obj).get("metadata")).get("name")
    return value if isinstance(value, str) else ""


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


def label(obj: dict[str, Any], key: str) -> Any:
    """A label's value; UNKNOWN when the labels (or the metadata holding them) are unknown."""
    metadata = _dict(obj).get("metadata")
    labels = UNKNOWN if metadata is UNKNOWN else _dict(metadata).get("labels")
    return UNKNOWN if labels is UNKNOWN else _dict(labels).get(key)


def field(value: Any, *keys: str) -> Any:
    """A nested field; UNKNOWN where a level on the way is unknown, None where one is missing."""
    for key in keys:
        if value is UNKNOWN:
            return UNKNOWN
        value = _dict(value).get(key)
    return value
