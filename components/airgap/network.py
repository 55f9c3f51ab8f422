"""Image values of the charts of the network part of the platform (components/airgap)."""

from __future__ import annotations

from typing import Any

from components.registry import Registry

CILIUM_IMAGES: dict[str, str] = {
    "image": "quay.io/cilium/cilium",  # the agent DaemonSet and its init containers
    "operator.image": "quay.io/cilium/operator",  # the chart appends the cloud (`-generic`) to the repository
    "envoy.image": "quay.io/cilium/cilium-envoy",  # the Envoy DaemonSet (envoy.enabled, on by default)
    "hubble.relay.image": "quay.io/cilium/hubble-relay",
    "hubble.ui.backend.image": "quay.io/cilium/hubble-ui-backend",
    "hubble.ui.frontend.image": "quay.io/cilium/hubble-ui",
    "clustermesh.apiserver.image": "quay.io/cilium/clustermesh-apiserver",  # also its etcd init and kvstoremesh
    # Off in the program's values, and mirrored for when they are switched on:
    "certgen.image": "quay.io/cilium/certgen",  # the TLS Jobs of hubble/clustermesh `tls.auto.method: cronJob`
    "preflight.image": "quay.io/cilium/cilium",  # the upgrade pre-flight check (`preflight.enabled`)
    "preflight.envoy.image": "quay.io/cilium/cilium-envoy",
    "nodeinit.image": "quay.io/cilium/startup-script",  # `nodeinit.enabled`
    "authentication.mutual.spire.install.initImage": "docker.io/library/busybox",  # mutual authentication's SPIRE
    "authentication.mutual.spire.install.agent.image": "ghcr.io/spiffe/spire-agent",
    "authentication.mutual.spire.install.server.image": "ghcr.io/spiffe/spire-server",
}
"""Every image key of the Cilium 1.18.3 chart (values.yaml: each `image` with `override`/`repository`/`tag`/`digest`) and
the repository it defaults to. The chart's tag and digest stay: a mirror that copies every platform of an image (`skopeo
sync --all`, `oras cp -r`) keeps the digest the chart pins."""


def _at(path: str, value: Any) -> dict[str, Any]:
    """`{"a": {"b": value}}` for the dotted `path` "a.b"."""
    for key in reversed(path.split(".")):
        value = {key: value}
    return value


def _merge(into: dict[str, Any], values: dict[str, Any]) -> dict[str, Any]:
    for key, value in values.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            _merge(into[key], value)
        else:
            into[key] = value
    return into


def _cilium(registry: Registry) -> dict[str, Any]:
    """Every image of the chart from the mirror, same tag and digest; the pull Secret (global `imagePullSecrets`, which
    every pod template of the chart reads) where the site has one. Cilium launches no image of its own at run time."""
    values: dict[str, Any] = {}
    for path, repository in CILIUM_IMAGES.items():
        _merge(values, _at(f"{path}.repository", registry.image(repository)))
    if registry.pull_secret:
        values["imagePullSecrets"] = registry.pull_secrets
    return values


VALUES: dict[str, Any] = {
    "cilium": _cilium,
}
