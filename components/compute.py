"""ComputeCluster: the compute cluster's engines, their isolation and the site's one ingress (DESIGN sections 1, 2).

Batch is isolated from interactive work by node pools, priority classes and per-namespace quotas (zero GPUs:
compute never requests one). Every engine belongs to a pool (components/engines, `Pool`): its nodes are labelled
here and register with the pool's taint, its pods select and tolerate that pool and run at its PriorityClass,
and batch's priority is below every interactive pod's. The engines themselves (Spark with YuniKorn, Airflow, Trino,
StarRocks, Superset, JupyterHub, Argo CD) are declared in components/engines, each in its own module: this component
deploys every enabled one into an `EngineScope`, which gives them their namespace, their credentials from
StorageCluster, their OIDC client from SiteIdentity, their Postgres and their route behind the ingress.
No credential is written into Helm values or ConfigMaps: charts read them from Secrets, and engines from
environment variables set from Secrets.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import pulumi
import pulumi_kubernetes as k8s

from components.config import AdoptConfig, ComputeConfig
from components.config.schema.teams import Team
from components.constants import AIRFLOW_NAMESPACE, TRAINING_POOL_TYPE
from components.engines import CHART_IMAGES, ENGINES, GATEWAY, POOLS, EngineScope, Ui
from components.federation import SiteFederation
from components.gateway import envoy_gateway, https_listener
from components.gitops import ServingTarget
from components.identity import SiteIdentity
from components.kube import Adoption, priority_classes
from components.network import CrossClusterNetwork
from components.providers import ClusterRef
from components.storage import StorageCluster

PRIORITY_CLASSES = {pool.priority_class: pool.priority for pool in POOLS}


@dataclass(frozen=True)
class ComputeClusterArgs:
    cluster: ClusterRef
    """The compute cluster."""
    config: ComputeConfig
    """The site's `compute` section: which engines run, their sizes, the batch nodes and the ingress."""
    domain: str
    """The site's DNS domain: every UI is `<host>.<domain>`."""
    site: str
    """The site's name: the serving repository's default path is `sites/<site>`."""
    adopt: AdoptConfig
    """Objects that exist already and are imported rather than created."""
    network: CrossClusterNetwork
    storage: StorageCluster
    identity: SiteIdentity
    gpu_clusters: list[ClusterRef]
    """The GPU clusters Airflow submits jobs to."""
    federation: SiteFederation | None = None
    """Peers whose gold Trino reads through their own Polaris."""
    serving: ServingTarget | None = None
    """The serving cluster Argo CD applies the serving repository to; none unless inference.delivery is argocd."""
    serving_repo_token: pulumi.Input[str] | None = None
    """The serving repository's read-only token (secret config `servingRepoToken`); none unless Argo CD has a repository."""
    serving_repo_write_token: pulumi.Input[str] | None = None
    """The token the serving-loop DAG pushes with (secret config `servingRepoWriteToken`); none leaves Airflow without one."""
    extra_uis: Sequence[Ui] = ()
    """Web UIs of other components behind the ingress (Grafana): each gets its listener, DNS record and URL here, and its
    route from its component, in its own namespace."""
    ray_tokens: dict[str, pulumi.Output[str]] = field(default_factory=dict)
    """Team -> its Ray token (components/ray.py), while Ray is on: JupyterHub gives it to the team's members' servers."""
    catalog_passwords: Mapping[str, pulumi.Input[str]] = field(default_factory=dict)
    """Trino's external catalog -> its account's password (secret config `trinoCatalogPassword-<catalog>`)."""
    teams: Mapping[str, Team] = field(default_factory=dict)
    """The site's teams: each runs its own Spark Connect server, as its own principal, for its members' notebooks;
    Airflow gives each its role, and each with a serving loop its DAG."""


class ComputeCluster(pulumi.ComponentResource):
    """The compute cluster's engines and UIs, and its ingress."""

    ui_urls: pulumi.Output[dict[str, str]]
    """Sign-in URL of each enabled UI."""
    dns_records: pulumi.Output[dict[str, str]]
    """A records for the UI host names: all point at the ingress VIP."""
    airflow_namespace: k8s.core.v1.Namespace
    """Where Airflow runs; TrainingPool delivers the GPU clusters' submitter kubeconfigs into it."""
    gateway: pulumi.Resource
    """The compute ingress Gateway, which the routes of `extra_uis` attach to."""

    def __init__(self, name: str, args: ComputeClusterArgs, opts: pulumi.ResourceOptions | None = None):
        config = args.config
        super().__init__("fab:compute:ComputeCluster", name, None,
                         pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(providers=[args.cluster.provider])))
        self._name = name
        self._child = pulumi.ResourceOptions(parent=self)
        scope = EngineScope(
            prefix=name, parent=self, cluster=args.cluster, domain=args.domain, site=args.site, compute=config,
            adopt=Adoption(args.adopt, args.cluster.key),
            storage=args.storage, identity=args.identity, federation=args.federation, gpu_clusters=args.gpu_clusters,
            serving=args.serving, serving_repo_token=args.serving_repo_token,
            serving_repo_write_token=args.serving_repo_write_token,
            cilium=args.network.cilium_releases.get(args.cluster.key),
            ray_tokens=args.ray_tokens, catalog_passwords=args.catalog_passwords, teams=args.teams, chart_images=CHART_IMAGES,
        )
        enabled = [engine for engine in ENGINES.values() if engine.config(config).enabled]
        uis = {engine.name: engine.ui for engine in enabled if engine.ui} | {ui.host: ui for ui in args.extra_uis}

        # A PriorityClass's value is immutable: a new value replaces it (deleted first, since its name is fixed).
        priority_classes(name, PRIORITY_CLASSES, pulumi.ResourceOptions(
            parent=self, replace_on_changes=["value"], delete_before_replace=True))
        # Labels only: a Node's taints are one list that the kubelet and the node lifecycle controller also
        # write, so pool nodes register with their taint (docs/operations.md, "Node pools").
        for pool in POOLS:
            for node in getattr(config, f"{pool.name}_nodes"):
                k8s.core.v1.NodePatch(
                    f"{name}-node-{node}",
                    metadata={"name": node, "labels": pool.node_selector},
                    opts=self._child,
                )
        # Airflow's namespace exists even with Airflow off: TrainingPool delivers the submitter kubeconfigs into
        # it. It was first created by TrainingPool (as `training-<compute>-ns-airflow`); the alias keeps a stack
        # that deployed that version from deleting and re-creating it.
        previous = pulumi.Alias(name=f"training-{args.cluster.key}-ns-airflow", parent=pulumi.create_urn("training", TRAINING_POOL_TYPE))
        self.airflow_namespace = scope.namespace(ENGINES[AIRFLOW_NAMESPACE], aliases=[previous])
        scope.gateway = self.gateway = self._gateway(args, uis)
        if any(engine.database for engine in enabled):
            scope.cnpg = scope.cnpg_operator()
        for engine in enabled:
            engine.deploy(scope)

        self.ui_urls = pulumi.Output.from_input({key: f"https://{ui.hostname(args.domain)}" for key, ui in uis.items()})
        self.dns_records = pulumi.Output.from_input({ui.hostname(args.domain): str(config.ingress.vip) for ui in uis.values()})
        self.register_outputs({"ui_urls": self.ui_urls, "dns_records": self.dns_records})

    def _gateway(self, args: ComputeClusterArgs, uis: dict[str, Ui]) -> pulumi.Resource:
        """The ingress Gateway, one HTTPS listener per UI (named by the engine, or by the host of another component's UI)."""
        ingress = args.config.ingress
        listeners = [https_listener(key, ui.hostname(args.domain), ingress.tls_secret, GATEWAY) for key, ui in uis.items()]
        return envoy_gateway(
            self._name, self._child,
            adopt=Adoption(args.adopt, args.cluster.key),
            gateway=GATEWAY,
            gateway_class="fab-compute",
            description="The site's only entry for outside users.",
            service_labels=args.network.lb_service_labels(args.cluster.key, ingress.pool),
            vip=str(ingress.vip),
            listeners=listeners,
            registry=args.cluster.registry,
        )
