"""Cross-field checks of the flow table against the design's (DESIGN section 2, network rules): every flow reaches a
service the design lets other clusters reach, opens what that service really listens on, and comes only from the
sources the design allows for it. The table is written by hand; a port or namespace that drifts from the service's
config would open a hole nothing listens behind and drop every real call, and a source the design does not name
opens a path the default deny exists to close.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from itertools import islice
from typing import TYPE_CHECKING

from components.config.checks.network import sound_flows
from components.config.fields import GPU_ROLES, WORLD
from components.config.problems import Problem
from components.config.views import (
    INFERENCE_FLOW,
    INGRESS_FLOW,
    METRICS_FLOW,
    NOTEBOOKS_FLOW,
    POLARIS_FLOW,
    S3_FLOW,
    argocd_delivers,
    metrics_in_cluster,
)
from components.constants import (
    ARGOCD_NAMESPACE,
    ENVOY_HTTPS_TARGET_PORT,
    GATEWAY_NAMESPACE,
    GPU_NOTEBOOKS,
    HTTPS_PORT,
    MONITORING_NAMESPACE,
    NOTEBOOKS_PROXY_PORT,
    NOTEBOOKS_PROXY_TARGET_PORT,
    PROMETHEUS_PORT,
)

if TYPE_CHECKING:
    from components.config.views import SiteViews


@dataclass(frozen=True)
class Service:
    """A service the design lets a flow reach: what a flow to it must open (the service's port and where it is set,
    its pods' port, their namespace), the clusters it runs on, and who may reach it."""

    what: str
    port: int
    port_key: str
    pod_port: int
    namespace: str
    namespace_key: str
    clusters: list[str]
    sources: tuple[str, ...]
    """Who the design lets reach it: cluster roles, `world`, and `from_cidrs` (declared ranges outside the site)."""
    world_needs_reason: bool = False
    """`world` reaches it only with the flow's `world_reason` (S3: every address of the world, and the admin API on its port)."""


CIDRS = "from_cidrs"
CLUSTER_SOURCES = ("compute", *sorted(GPU_ROLES))
"""The clusters that use the site's data: compute and the GPU clusters (DESIGN section 2: compute/gpu -> S3 and Polaris)."""


def services(site: SiteViews) -> dict[str, Service]:
    """The design's flows into the site, by the name a stack's flow table gives them: compute and GPU pods to S3 and
    Polaris (and federated sites by their ranges), compute to the inference gateway, outside users to the compute
    ingress, outside S3 clients to the object store only where the site has an external S3 endpoint, and the other
    clusters' Prometheus to compute's while the site's metrics are kept in-cluster, and the compute ingress to the GPU
    notebooks hub while GPU notebooks are on."""
    storage = site.keys_with_role("storage")
    store, polaris = site.storage.object_store, site.storage.polaris
    gateway = f"Envoy Gateway maps {HTTPS_PORT} to {ENVOY_HTTPS_TARGET_PORT}"
    outside_s3 = (WORLD,) if site.storage.s3.external_pool is not None else ()
    # Without inference (phase 1) nothing serves behind an `inference` flow: the flow is then not checked against it.
    serving = [site.inference.cluster] if site.inference is not None else []
    return {
        S3_FLOW: Service("the object store's S3 endpoint", store.s3_port, "storage.object_store.s3_port", store.s3_port,
                         store.namespace, "storage.object_store.namespace", storage, (*CLUSTER_SOURCES, *outside_s3, CIDRS),
                         world_needs_reason=True),
        POLARIS_FLOW: Service("the Polaris REST endpoint", polaris.port, "storage.polaris.port", polaris.port,
                              polaris.namespace, "storage.polaris.namespace", storage, (*CLUSTER_SOURCES, CIDRS)),
        **({INFERENCE_FLOW: Service("the inference gateway", HTTPS_PORT, "its HTTPS listener", ENVOY_HTTPS_TARGET_PORT,
                                    GATEWAY_NAMESPACE, gateway, serving, ("compute",))} if serving else {}),
        INGRESS_FLOW: Service("the compute ingress", HTTPS_PORT, "its HTTPS listener", ENVOY_HTTPS_TARGET_PORT,
                              GATEWAY_NAMESPACE, gateway, site.keys_with_role("compute"), (WORLD, CIDRS)),
        # While metrics are in-cluster, every other cluster's Prometheus writes to compute's (its remote-write receiver).
        **({METRICS_FLOW: Service("compute's Prometheus (its remote-write receiver)", PROMETHEUS_PORT, "its HTTP port",
                                  PROMETHEUS_PORT, MONITORING_NAMESPACE, "the metrics stack's namespace",
                                  site.keys_with_role("compute"), ("storage", *sorted(GPU_ROLES)))}
           if metrics_in_cluster(site) else {}),
        # While GPU notebooks are on, the compute ingress (and nothing else) forwards their users to the notebooks hub.
        **({NOTEBOOKS_FLOW: Service("the GPU notebooks hub's proxy", NOTEBOOKS_PROXY_PORT, "its proxy Service",
                                    NOTEBOOKS_PROXY_TARGET_PORT, GPU_NOTEBOOKS, "compute.jupyterhub.gpu_notebooks",
                                    [notebooks.cluster], ("compute",))}
           if (notebooks := site.compute.jupyterhub.gpu_notebooks) is not None else {}),
    }


def service_flow_problems(site: SiteViews) -> Iterator[Problem]:
    """Every flow of the stack's table that the flow checks accept reaches a service of the design (the flows named s3,
    polaris, inference and compute-ingress their own), opens its port, pods and clusters, and comes only from the
    sources the design allows; an API server flow comes from the MultiKueue manager to GPU clusters, or from Argo CD on
    compute to the serving cluster. The first problem of each flow."""
    sound = sound_flows(site)
    known = services(site)
    for name in sorted(sound, key=list(site.flows or {}).index):
        flow = site.flows[name]
        if name == INFERENCE_FLOW and site.inference is None:
            problems = iter([(("flows", INFERENCE_FLOW), (
                "opens the inference gateway's port, but the site serves no models (no inference section); remove the flow "
                "until the site serves models"
            ))])
        elif name in known:
            problems = _service_problems(site, name, known[name])
        elif flow.target == "kube-apiserver" and flow.from_namespace == ARGOCD_NAMESPACE:
            problems = _argocd_problems(site, name)
        elif flow.target == "kube-apiserver":
            problems = _apiserver_problems(site, name)
        else:
            problems = _landing_problems(site, name, known)
        yield from islice(problems, 1)


def _landing_problems(site: SiteViews, name: str, known: dict[str, Service]) -> Iterator[Problem]:
    """A flow under a name of its own: the service it lands on is the one running in its namespace on its clusters."""
    flow = site.flows[name]
    path = ("flows", name)
    landing = {key: service for key, service in known.items() if service.namespace == flow.to_namespace}
    if not landing:
        reachable = "; ".join(f"{s.what} ({s.namespace!r} on {', '.join(f'clusters.{c}' for c in s.clusters)})"
                              for s in known.values())
        yield (*path, "to_namespace"), (
            f"{flow.to_namespace!r} runs no service other clusters may reach; a flow reaches {reachable}"
        )
        return
    for i, dest in enumerate(flow.to):
        if not any(dest in service.clusters for service in landing.values()):
            (first, *_), where = landing.values(), ", ".join(f"clusters.{c}" for s in landing.values() for c in s.clusters)
            yield (*path, "to", i), f"{dest!r} does not run {first.what} ({flow.to_namespace!r} runs on {where}); remove it"
            return
    service = next(s for s in landing.values() if flow.to[0] in s.clusters)
    yield from _service_problems(site, name, service)


def _service_problems(site: SiteViews, name: str, service: Service) -> Iterator[Problem]:
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
    for i, dest in enumerate(flow.to):
        if dest not in service.clusters:
            yield (*path, "to", i), f"{dest!r} does not run {service.what}; remove it"
    yield from _source_problems(site, name, service)


def _source_problems(site: SiteViews, name: str, service: Service) -> Iterator[Problem]:
    flow = site.flows[name]
    path = ("flows", name)
    allowed = _allowed(service.sources)
    for i, source in enumerate(flow.sources):
        kind = source if source == WORLD else site.clusters[source].role
        if kind not in service.sources:
            who = f"clients outside the site ({WORLD})" if source == WORLD else f"clusters.{source} ({kind})"
            yield (*path, "from", i), f"{source!r}: the design does not let {who} reach {service.what}; it admits {allowed}"
        elif source == WORLD and service.world_needs_reason and not flow.world_reason.strip():
            yield (*path, "from", i), (
                f"{WORLD!r} would let every address outside the site reach {service.what}, and the MinIO admin API on its "
                f"port; admit the clients' ranges in from_cidrs instead, or say why in world_reason"
            )
    if flow.from_cidrs and CIDRS not in service.sources:
        yield (*path, CIDRS), f"the design does not let ranges outside the site reach {service.what}; it admits {allowed}"


def _allowed(sources: tuple[str, ...]) -> str:
    roles = [s for s in sources if s not in (WORLD, CIDRS)]
    parts = [
        *([f"{', '.join(roles[:-1])} and {roles[-1]} clusters" if len(roles) > 1 else f"{roles[0]} clusters"] if roles else []),
        *([WORLD] if WORLD in sources else []),
        *([f"declared ranges ({CIDRS})"] if CIDRS in sources else []),
    ]
    return ", ".join(parts[:-1]) + f" and {parts[-1]}" if len(parts) > 1 else parts[0]


def _apiserver_problems(site: SiteViews, name: str) -> Iterator[Problem]:
    """DESIGN section 2: the MultiKueue manager reaches its workers' API servers, and nothing else crosses to an API
    server."""
    flow = site.flows[name]
    path = ("flows", name)
    if flow.protocol != "TCP":
        yield (*path, "protocol"), f"{flow.protocol!r}: an API server is served over TCP"
    manager = site.multikueue_manager()
    if manager not in site.clusters or site.clusters[manager].role != "compute":
        return  # the manager is refused by its own check (training), which names the key to change
    for i, source in enumerate(flow.sources):
        if source != manager:
            yield (*path, "from", i), (
                f"{source!r}: only the MultiKueue manager (clusters.{manager}) reaches other clusters' API servers; remove it"
            )
    for i, dest in enumerate(flow.to):
        if site.clusters[dest].role not in GPU_ROLES:
            yield (*path, "to", i), (
                f"{dest!r} is a {site.clusters[dest].role} cluster; the MultiKueue manager reaches the API servers of GPU "
                "clusters only"
            )


def _argocd_problems(site: SiteViews, name: str) -> Iterator[Problem]:
    """Argo CD's application controller (its namespace on compute) reaches the serving cluster's API server, while Argo CD
    delivers the serving objects (compute.argocd.enabled, inference.delivery argocd), and no other API server."""
    flow = site.flows[name]
    path = ("flows", name)
    if flow.protocol != "TCP":
        yield (*path, "protocol"), f"{flow.protocol!r}: an API server is served over TCP"
    if not argocd_delivers(site):
        yield (*path, "from_namespace"), (
            f"{ARGOCD_NAMESPACE!r} lets Argo CD reach API servers, but Argo CD applies nothing on this site (it needs "
            "compute.argocd.enabled true and inference.delivery argocd); remove the flow"
        )
        return
    serving = site.inference.cluster
    for i, source in enumerate(flow.sources):
        if site.clusters[source].role != "compute":
            yield (*path, "from", i), (
                f"{source!r} is a {site.clusters[source].role} cluster; Argo CD runs on the compute cluster, the only source "
                "of its flow: remove it"
            )
    for i, dest in enumerate(flow.to):
        if dest != serving:
            yield (*path, "to", i), (
                f"{dest!r} is not the serving cluster (inference.cluster {serving!r}); Argo CD reaches only the API server of "
                "the cluster it applies the serving repository to: remove it"
            )
