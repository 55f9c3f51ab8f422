"""Derived views of a site: what components read instead of working out their own slice (DESIGN section 4,
"Config first"; section 2 for the default flow table).

`SiteViews` adds them to the site's fields (components.config.schema.site) and SiteConfig adds its checks to
it (cluster names and roles, node pools and quotas under a profile, model sizing, the flow table); the
functions below build the design's flows and the names derived from config keys. Views and checks read a
site as a `SiteViews`; the site they are given is a SiteConfig.
"""

from __future__ import annotations

import dataclasses
import re
from typing import TYPE_CHECKING, Any

from components.config import declared, names
from components.config.fields import GPU_ROLES, WORLD
from components.config.schema.gpu import DEFAULT_GPU_TYPES
from components.config.schema.network import Flow
from components.config.schema.roadmap import switched_on
from components.config.schema.site import SiteSchema
from components.config.schema.teams import Profile
from components.constants import (
    ENVOY_HTTPS_TARGET_PORT,
    ENVOY_PROXY_LABELS,
    GATEWAY_NAMESPACE,
    GPU_NOTEBOOKS,
    HTTPS_PORT,
    KUBE_APISERVER_PORT,
    KUEUE_CONTROLLER_LABELS,
    KUEUE_NAMESPACE,
    MAINTENANCE_PRINCIPAL,
)

if TYPE_CHECKING:
    from components.config.schema.gpu import GpuNode, GpuType
    from components.config.schema.teams import TeamQuota


@dataclasses.dataclass(frozen=True)
class RemoteTeam:
    """A peer's team that trains on this site's GPU clusters (`federation.peers.<peer>.remote_training`)."""

    peer: str
    team: str
    quotas: dict[str, TeamQuota]
    """GPU cluster -> quota; none on the others."""

    @property
    def namespace(self) -> str:
        """Its namespace and ClusterQueue on every Kueue cluster, and its prefix of the checkpoints bucket."""
        return names.REMOTE_TEAM_NAMESPACE(self.team, self.peer)

    @property
    def group(self) -> str:
        """Its Keycloak group in this site's realm."""
        return names.REMOTE_TEAM_GROUP(self.team, self.peer)


class SiteViews(SiteSchema):
    """Derived views of a site, the base of SiteConfig: they read its fields and change nothing."""

    def ca_bundle_pem(self) -> str | None:
        """The site CA bundle's certificates (validated by a config check)."""
        return read_ca_bundle(self.ca_bundle) if self.ca_bundle else None

    def cluster_name(self, key: str) -> str:
        """Cilium cluster name and provider name of a cluster: `<site>-<key>`."""
        return names.CLUSTER_NAME(key, self.name)

    def kubeconfig_context(self, key: str) -> str:
        return self.clusters[key].kubeconfig_context or self.cluster_name(key)

    def keys_with_role(self, *roles: str) -> list[str]:
        return sorted(key for key, cluster in self.clusters.items() if cluster.role in roles)

    def all_gpu_types(self) -> dict[str, GpuType]:
        return {**DEFAULT_GPU_TYPES, **self.gpu_types}

    def profile(self, name: str | None = ...) -> Profile:  # type: ignore[assignment]
        """A profile by name; the active one by default, and an empty profile for the base config."""
        name = self.active_profile if name is ... else name
        # An unknown name is reported by its own check; the other checks then judge the base config.
        return self.profiles.get(name, Profile()) if name else Profile()

    def node_pool(self, cluster: str, node: str, profile: str | None = ...) -> str:  # type: ignore[assignment]
        """The pool a node serves under a profile (the active one by default)."""
        override = self.profile(profile).node_pools.get(cluster, {}).get(node)
        return override or self.gpu[cluster].nodes[node].pool

    def pool_nodes(self, cluster: str, pool: str, profile: str | None = ...) -> dict[str, GpuNode]:  # type: ignore[assignment]
        """Nodes of a GPU cluster that serve `pool` (inference or training) under a profile."""
        spec = self.gpu.get(cluster)
        if spec is None:
            return {}
        return {name: node for name, node in sorted(spec.nodes.items()) if self.node_pool(cluster, name, profile) == pool}

    def team_quotas(self, profile: str | None = ...) -> dict[str, dict[str, TeamQuota]]:  # type: ignore[assignment]
        """Team -> GPU cluster -> quota under a profile."""
        merged = {team: dict(clusters) for team, clusters in self.training.quotas.items()}
        for team, clusters in self.profile(profile).quotas.items():
            merged.setdefault(team, {}).update(clusters)
        return {team: dict(sorted(clusters.items())) for team, clusters in sorted(merged.items())}

    def remote_teams(self, linked_only: bool = False) -> dict[str, RemoteTeam]:
        """Peers' teams that train here, by namespace; with `linked_only`, those of linked peers (the ones set up)."""
        peers = self.federation.peers
        return {
            team.namespace: team
            for peer, spec in sorted(peers.items()) if not linked_only or peer in self.federation.linked
            for team in (RemoteTeam(peer, name, dict(sorted(quotas.items()))) for name, quotas in sorted(spec.remote_training.items()))
        }

    def kueue_clusters(self) -> list[str]:
        """Clusters running Kueue: every GPU cluster, and the MultiKueue manager when enabled."""
        return sorted({*self.keys_with_role(*GPU_ROLES), *([self.multikueue_manager()] if self.training.multikueue.enabled else [])})

    def multikueue_manager(self) -> str:
        (compute,) = self.keys_with_role("compute")
        return self.training.multikueue.manager or compute

    def model_capacity(self, profile: str | None = ...) -> dict[str, Any]:  # type: ignore[assignment]
        """GPU sizing of every served model (components.capacity), none without inference; raises CapacityError when
        one cannot be served."""
        from components import capacity

        inference = self.inference
        if inference is None:
            return {}
        nodes = self.pool_nodes(inference.cluster, "inference", profile)
        replicas = self.profile(profile).replicas
        first = next(iter(nodes.values()))
        gpu_type = self.all_gpu_types()[first.gpu_type]
        gpu = capacity.GpuType(name=first.gpu_type.upper(), memory_mib=gpu_type.memory_mib)
        sized = {}
        for name, model in sorted(inference.models.items()):
            model_profile = capacity.ModelProfile(
                name=name, params_billion=model.params_billion, layers=model.layers, kv_heads=model.kv_heads,
                head_dim=model.head_dim, dtype=model.dtype, max_context=model.max_context,
                mean_context=model.mean_context, concurrent_sequences=model.concurrent_sequences,
            )
            size = capacity.size_model(
                model_profile, gpu, first.gpus, inference.gpu_memory_utilization, inference.reserve_gib, model.min_replicas
            )
            sized[name] = dataclasses.replace(size, replicas=replicas[name]) if name in replicas else size
        # A canary's replicas are sized like the model's and take GPUs of the same pool.
        canaries = [
            dataclasses.replace(sized[name], model=f"{name} canary", replicas=model.canary.replicas)
            for name, model in sorted(inference.models.items()) if model.canary is not None
        ]
        capacity.check_pool([*sized.values(), *canaries], [n.gpus for n in nodes.values()], f"{inference.cluster}/inference")
        return sized

    def replicated_models(self) -> tuple[str, ...]:
        """The paths of the models bucket this site copies to the consumers that keep its models (`replicate_models`), and
        the only ones its replication principal reads there: the served models' `source` (`inference.models`, a canary's
        and a revision's weights lie under it), ending in '/', a path under another left out; never the peers' models
        kept under `replicas/`. None while no consumer has `replicate_models`: the rest of the bucket is the teams' work."""
        if self.inference is None or not any(spec.replicate_models for spec in self.federation.consumers.values()):
            return ()
        paths = {model.source.strip("/") + "/" for model in self.inference.models.values()}
        paths = {p for p in paths if p.split("/", 1)[0] != names.MODEL_REPLICAS}
        return tuple(sorted(p for p in paths if not any(p != other and p.startswith(other) for other in paths)))

    def ray_enabled(self) -> bool:
        """Whether KubeRay runs on the GPU clusters (`training.ray`, on from its roadmap phase when unset)."""
        return switched_on("ray", self.training.ray, self.phase)

    def replicates_gold(self, consumer: str) -> bool:
        """Whether this site's gold is copied to `consumer` (`federation.consumers.<consumer>.replicate_gold`, on from its
        roadmap phase when unset)."""
        return switched_on("gold-replication", self.federation.consumers[consumer].replicate_gold, self.phase)

    def global_services_enabled(self) -> bool:
        """Whether Polaris and the inference gateway are ClusterMesh global services (`global_services`, on from its roadmap
        phase when unset)."""
        return switched_on("global-services", self.global_services, self.phase)

    def flow_table(self) -> dict[str, Flow]:
        """The configured flows, or the design's defaults when the stack sets none.

        The flows the components open are added to it, in the order components/catalog.py declares them, where the
        stack's own table leaves them out (and always, each external catalog's egress from Trino): with MultiKueue on,
        the manager-to-worker API flow (components/training.py), Argo CD's to the serving cluster's API server while it
        delivers (components/engines/argocd.py), the federated sites' (components/federation.py), with Ray, Jupyter's to
        each team's Ray heads (components/ray.py), Trino's external catalogs' (components/engines/trino.py), the other
        clusters' Prometheus to compute's while the site's metrics are kept in-cluster (components/monitors.py),
        the GPU notebooks' (components/notebooks.py) and the vendors' (components/sharing.py); then the compute ingress.
        """
        table = dict(self.flows) if self.flows is not None else default_flows(self)
        for source in declared.flow_sources():
            flows = source.opens(self)
            if source.replaces:
                table.update(flows)
            else:
                for name, flow in flows.items():
                    table.setdefault(name, flow)
        if INGRESS_FLOW not in table:
            table[INGRESS_FLOW] = Flow(
                description="Outside users reach the UIs through the compute cluster's ingress, the only entry into the site.",
                sources=[WORLD], to=self.keys_with_role("compute"), port=HTTPS_PORT, target_port=ENVOY_HTTPS_TARGET_PORT,
                to_namespace=GATEWAY_NAMESPACE, to_labels=ENVOY_PROXY_LABELS,
            )
        return table


S3_FLOW = "s3"
"""The flow that admits holders of S3 credentials to the object store's internal S3 endpoint."""
POLARIS_FLOW = "polaris"
"""The flow that admits holders of Polaris credentials to the Polaris REST endpoint."""
INFERENCE_FLOW = "inference"
"""The flow that admits compute applications to the inference gateway."""
MULTIKUEUE_FLOW = "multikueue"
INGRESS_FLOW = "compute-ingress"
METRICS_FLOW = "metrics"
"""The flow that admits every other cluster's Prometheus to compute's remote-write receiver (observability in-cluster)."""
NOTEBOOKS_FLOW = GPU_NOTEBOOKS
"""The flow that admits the compute ingress's proxies to the GPU notebooks hub's proxy (compute.jupyterhub.gpu_notebooks)."""
# The config's checks judge the flows above by name; the flows the components open are theirs, declared by
# components/catalog.py (components.config.declared.flow_sources).


def default_flows(site: SiteViews) -> dict[str, Flow]:
    """The design's four flows for the site's clusters (DESIGN section 2, network rules); the inference gateway's only
    where the site serves models (Argo CD's to the serving cluster's API server, while it delivers, is added after them
    by components/engines/argocd.py's declaration)."""
    storage = site.keys_with_role("storage")
    compute = site.keys_with_role("compute")
    gpus = site.keys_with_role(*GPU_ROLES)
    store, polaris = site.storage.object_store, site.storage.polaris
    return {
        S3_FLOW: Flow(
            description="Compute and GPU pods read and write AIStor over its internal S3 endpoint.",
            sources=compute + gpus, to=storage, port=store.s3_port, to_namespace=store.namespace,
        ),
        POLARIS_FLOW: Flow(
            description="Compute and GPU pods use the Polaris Iceberg REST catalog.",
            sources=compute + gpus, to=storage, port=polaris.port, to_namespace=polaris.namespace,
        ),
        **({INFERENCE_FLOW: Flow(
            # Envoy Gateway runs the proxy unprivileged and maps listener ports below 1024 to port + 10000.
            description="Compute apps call the inference gateway (OpenAI-compatible, JWT).",
            sources=compute, to=site.keys_with_role("gpu"), port=HTTPS_PORT, target_port=ENVOY_HTTPS_TARGET_PORT,
            to_namespace=GATEWAY_NAMESPACE, to_labels=ENVOY_PROXY_LABELS,
        )} if site.inference is not None else {}),
        MULTIKUEUE_FLOW: Flow(
            description="The MultiKueue manager on compute dispatches workloads to the GPU clusters' API servers.",
            sources=compute, to=gpus, port=KUBE_APISERVER_PORT, target="kube-apiserver",
            from_namespace=KUEUE_NAMESPACE, from_labels=KUEUE_CONTROLLER_LABELS,
        ),
    }


def argocd_delivers(site: SiteViews) -> bool:
    """Whether Argo CD on compute applies the serving objects to the serving cluster (inference.delivery argocd)."""
    return site.compute.argocd.enabled and site.inference is not None and site.inference.delivery == "argocd"


def metrics_in_cluster(site: SiteViews) -> bool:
    """Whether compute's Prometheus receives the other clusters' series (observability.metrics in-cluster)."""
    return site.observability is not None and site.observability.metrics == "in-cluster"


def credential_holders(site: SiteViews) -> dict[str, dict[str, list[str]]]:
    """Who receives data credentials, derived from the config alone: flow name -> cluster key -> grantees.

    Under `S3_FLOW`, the clusters where StorageCluster.grant() delivers a Secret `s3-<grantee>`; under
    `POLARIS_FLOW`, those where catalog_grant() delivers `polaris-<grantee>`. Grantees are the engine names
    those calls take, as the components call them:

    - the compute cluster: each enabled engine of components/engines with bucket access (S3) or a catalog
      role (Polaris), as it declares them, iceberg-maintenance (both) while `compute.iceberg_maintenance` is on, and
      training (both) in each team's Spark Connect namespace while Spark Connect is on;
    - every gpu and gpu-train cluster: training, in each team's namespace (S3 and Polaris), and remote-training, in
      each linked peer's team's namespace (S3 only: the peer's replica and the team's checkpoint prefix);
    - the inference cluster: inference, which loads model weights (S3);
    - the storage cluster: polaris and postgres-backup, and replication while a linked consumer takes
      copies of gold (S3).

    Credentials this site hands to other sites (federation principals, replica writers) and those of other
    sites' catalogs (Trino's peer catalogs) are not its clusters' to hold, so they are not listed. Clusters
    a config check refuses (an unknown inference cluster) are left out.
    """
    s3: dict[str, set[str]] = {}
    polaris: dict[str, set[str]] = {}

    def holds(cluster: str, grantee: str, *, keys: bool = True, catalog: bool) -> None:
        if cluster in site.clusters:
            if keys:
                s3.setdefault(cluster, set()).add(grantee)
            if catalog:
                polaris.setdefault(cluster, set()).add(grantee)

    for cluster in site.keys_with_role("compute"):
        # The engines' own declarations are the one source of what each engine holds.
        for engine in declared.engines().values():
            if engine.config(site.compute).enabled:
                holds(cluster, engine.name, keys=engine.buckets is not None, catalog=engine.catalog_role is not None)
        # Iceberg maintenance runs in its own namespace as its own principal (components/iceberg_maintenance.py).
        maintenance = site.compute.iceberg_maintenance
        if maintenance is not None and maintenance.enabled:
            holds(cluster, MAINTENANCE_PRINCIPAL, catalog=True)
        # Each team's Spark Connect server runs as the team's own principal, in its namespace `spark-team-<team>`.
        spark = site.compute.spark
        if spark.enabled and spark.connect and site.teams:
            holds(cluster, "training", catalog=True)
    # Training pods run on the GPU clusters; the MultiKueue manager (compute) only holds queues.
    remote = bool(site.remote_teams(linked_only=True))
    for cluster in site.keys_with_role(*GPU_ROLES):
        holds(cluster, "training", catalog=True)
        if remote:
            holds(cluster, "remote-training", catalog=False)
    if site.inference is not None:
        holds(site.inference.cluster, "inference", catalog=False)
    federation = site.federation
    replicating = any((site.replicates_gold(name) or spec.replicate_models) and name in federation.linked
                      for name, spec in federation.consumers.items())
    for cluster in site.keys_with_role("storage"):
        for grantee in ("polaris", "postgres-backup", *(["replication"] if replicating else [])):
            holds(cluster, grantee, catalog=False)
    return {
        flow: {cluster: sorted(grantees) for cluster, grantees in sorted(holders.items())}
        for flow, holders in ((S3_FLOW, s3), (POLARIS_FLOW, polaris))
    }


def replica_bucket(site: str, peer: str) -> str:
    """The bucket a site keeps a peer's gold in."""
    return names.REPLICA_BUCKET(peer, site)


PEM_CERTIFICATE = re.compile(r"-----BEGIN CERTIFICATE-----[A-Za-z0-9+/=\s]+-----END CERTIFICATE-----")


def read_ca_bundle(path: str) -> str:
    """The certificates of a PEM file (paths relative to the working directory: the project's, under Pulumi and fabctl)."""
    from pathlib import Path

    text = Path(path).read_text(encoding="ascii")
    return "\n".join(PEM_CERTIFICATE.findall(text)) + "\n"
