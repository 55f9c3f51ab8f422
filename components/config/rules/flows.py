"""Cross-field rule of the flow table: a flow of the design's names opens what its service really listens on (DESIGN
section 2, network rules). The table is written by hand; a port or namespace that drifts from the service's config
would open a hole nothing listens behind and drop every real call.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from itertools import islice
from typing import TYPE_CHECKING

from components.config.problems import Problem
from components.config.rules.network import sound_flows
from components.config.views import INFERENCE_FLOW, INGRESS_FLOW, POLARIS_FLOW, S3_FLOW
from components.constants import ENVOY_HTTPS_TARGET_PORT, GATEWAY_NAMESPACE, HTTPS_PORT

if TYPE_CHECKING:
    from components.config.site import SiteConfig


@dataclass(frozen=True)
class Service:
    """What a flow of the design's names must open: the service's port (and where it is set), its pods' port, their
    namespace, and the clusters it runs on."""

    what: str
    port: int
    port_key: str
    pod_port: int
    namespace: str
    namespace_key: str
    clusters: list[str]


def services(site: SiteConfig) -> dict[str, Service]:
    storage = site.keys_with_role("storage")
    store, polaris = site.storage.object_store, site.storage.polaris
    gateway = f"Envoy Gateway maps {HTTPS_PORT} to {ENVOY_HTTPS_TARGET_PORT}"
    # Without inference (phase 1) nothing serves behind an `inference` flow: the flow is then not checked against it.
    serving = [site.inference.cluster] if site.inference is not None else []
    return {
        S3_FLOW: Service("the object store's S3 endpoint", store.s3_port, "storage.object_store.s3_port", store.s3_port,
                         store.namespace, "storage.object_store.namespace", storage),
        POLARIS_FLOW: Service("the Polaris REST endpoint", polaris.port, "storage.polaris.port", polaris.port,
                              polaris.namespace, "storage.polaris.namespace", storage),
        **({INFERENCE_FLOW: Service("the inference gateway", HTTPS_PORT, "its HTTPS listener", ENVOY_HTTPS_TARGET_PORT,
                                    GATEWAY_NAMESPACE, gateway, serving)} if serving else {}),
        INGRESS_FLOW: Service("the compute ingress", HTTPS_PORT, "its HTTPS listener", ENVOY_HTTPS_TARGET_PORT,
                              GATEWAY_NAMESPACE, gateway, site.keys_with_role("compute")),
    }


def service_flow_problems(site: SiteConfig) -> Iterator[Problem]:
    """The flows named s3, polaris, inference and compute-ingress open their service's port, pods and cluster; the
    first problem of each, of those the flow rules accept."""
    sound = sound_flows(site)
    if site.inference is None and INFERENCE_FLOW in sound:
        yield ("flows", INFERENCE_FLOW), (
            "opens the inference gateway's port, but the site serves no models (no inference section); remove the flow "
            "until the site serves models"
        )
    for name, service in services(site).items():
        if name in sound:
            yield from islice(_service_problems(site, name, service), 1)


def _service_problems(site: SiteConfig, name: str, service: Service) -> Iterator[Problem]:
    flow = site.flows[name]
    path = ("flows", name)
    if flow.target != "pods":
        yield (*path, "target"), f"{flow.target!r}: {service.what} is served by pods; use target 'pods'"
    if flow.protocol != "TCP":
        yield (*path, "protocol"), f"{flow.protocol!r}: {service.what} is served over TCP"
    if flow.port != service.port:
        yield (*path, "port"), f"{flow.port} is not the port of {service.what} ({service.port}, {service.port_key}); clients dial {service.port}"
    if flow.pod_port != service.pod_port:
        yield (*path, "target_port"), (
            f"{flow.pod_port} is not the port {service.what}'s pods listen on ({service.pod_port}); "
            "Cilium policy sees the pods' port after load balancing"
        )
    if flow.to_namespace is not None and flow.to_namespace != service.namespace:
        yield (*path, "to_namespace"), (
            f"{flow.to_namespace!r} is not where {service.what} runs ({service.namespace!r}, {service.namespace_key})"
        )
    missing = [cluster for cluster in service.clusters if cluster not in flow.to]
    if missing:
        yield (*path, "to"), f"{flow.to!r} leaves out clusters.{missing[0]}, where {service.what} runs; add it"
