"""What a compute engine is, and what the compute cluster gives it (DESIGN section 2, the compute row).

An `Engine` is a value: its name (also its config section under `compute` and its namespace), its node pool
(batch or interactive), its quota, its S3 bucket access and Polaris catalog role, its UI, whether it has a
Postgres database, and the function that deploys it into an `EngineScope`. StorageCluster reads the access of
every registered engine, and ComputeCluster deploys the enabled ones; neither names an engine.

A `Pool` is one side of batch vs interactive isolation: its nodes carry `fab.internal/compute-pool=<pool>` as
label and NoSchedule taint, and its pods select and tolerate exactly that and run at its PriorityClass.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pulumi
import pulumi_kubernetes as k8s
from pydantic import BaseModel

from components import versions
from components.config import BucketAccess, ServiceToggle
from components.airgap import ChartValues
from components.constants import CNPG_NAMESPACE, ENGINE_LABEL, OIDC_CLIENT_ID, OIDC_CLIENT_SECRET, OIDC_ISSUER
from components.gateway import ROUTES_LABEL, http_route
from components.kube import Adoption, Priority, helm_release, namespace, postgres_image, random_secret
from components.placement import Pods
from components.providers import ClusterRef, NamespaceRef

if TYPE_CHECKING:
    from components.federation import SiteFederation
    from components.gitops import ServingTarget
    from components.identity import SiteIdentity
    from components.storage import StorageCluster

FLASK_KEYCLOAK_OAUTH = Path(__file__).parents[1] / "flask_keycloak_oauth.py"
GATEWAY = "compute"
"""The compute ingress Gateway, whose listeners the UIs' routes attach to."""
DATABASE_INSTANCES = 2
POOL_LABEL = "fab.internal/compute-pool"
"""Node label and taint key of the compute node pools; also the label naming the pool of an engine's namespace and of
a PriorityClass."""


@dataclass(frozen=True)
class Pool:
    """A compute node pool and the PriorityClass its pods run at."""

    name: str
    priority_class: str
    priority: Priority

    @property
    def node_selector(self) -> dict[str, str]:
        return {POOL_LABEL: self.name}

    @property
    def taint(self) -> dict[str, str]:
        """The taint its nodes register with (docs/operations.md, "Node pools")."""
        return {"key": POOL_LABEL, "value": self.name, "effect": "NoSchedule"}

    @property
    def tolerations(self) -> list[dict[str, str]]:
        return [{"key": POOL_LABEL, "operator": "Equal", "value": self.name, "effect": "NoSchedule"}]

    def placement(self) -> dict[str, Any]:
        """A pod spec's node selector, tolerations and PriorityClass for this pool."""
        return {"nodeSelector": self.node_selector, "tolerations": self.tolerations, "priorityClassName": self.priority_class}


INTERACTIVE = Pool("interactive", "compute-interactive", Priority(
    "interactive", 100_000, "PreemptLowerPriority", "Dashboards, notebooks and ad-hoc queries.", labels={POOL_LABEL: "interactive"}))
BATCH = Pool("batch", "compute-batch", Priority(
    # Below 0, the priority of a pod that names no class: StarRocks' FE and CN cannot name one (operator 1.11.5's
    # CRD has no priorityClassName), and batch stays below them too. Not below -10, the Cluster Autoscaler's
    # cutoff for expendable pods.
    "batch", -1, "Never", "ETL and backfills: below every interactive pod, and never preempting.", labels={POOL_LABEL: "batch"}))
POOLS = (BATCH, INTERACTIVE)


def flask_oauth_config(app_part: Path, settings: Mapping[str, Any] | None = None) -> str:
    """A Flask-AppBuilder app's config file: the Keycloak sign-in every such app shares, the site's `settings` for the
    app's part (Python literals, `NAME = value`), then the app's own part."""
    assigned = "".join(f"{name} = {value!r}\n" for name, value in (settings or {}).items())
    return "\n\n".join([FLASK_KEYCLOAK_OAUTH.read_text(), *([assigned] if assigned else []), app_part.read_text()])


@dataclass(frozen=True)
class Quota:
    """CPU and memory requests the engine's namespace may hold at most (and zero GPUs: compute never requests one)."""

    cpu: str
    memory: str


@dataclass(frozen=True)
class Ui:
    """A web UI behind the compute ingress, signing in through its own Keycloak client."""

    host: str
    """First label of its host name, `<host>.<site domain>`."""
    service: str
    """The Service its chart creates, which the route sends to."""
    port: int
    callback: str
    """The OAuth redirect path; its client allows exactly `https://<host><callback>`."""

    def hostname(self, domain: str) -> str:
        return f"{self.host}.{domain}"

    def redirect_uri(self, domain: str) -> str:
        return f"https://{self.hostname(domain)}{self.callback}"


@dataclass(frozen=True)
class EngineChart:
    """A chart an engine installs: its pin (components/versions.py), the values that move every image it runs to the
    site's registry (docs/airgap.md) and where its pods get their node selector, tolerations and PriorityClass (the
    chart's own value paths: fab-compute-pool-placement checks them against the engine's pool)."""

    chart: versions.HelmChart
    images: ChartValues
    pods: tuple[Pods, ...] = ()
    """No groups where the platform does not place the chart's pods in a pool (an operator's)."""


@dataclass(frozen=True)
class Engine:
    """One compute engine, declared once; `compute.<name>.enabled` switches it."""

    name: str
    description: str
    pool: Pool
    """The node pool its pods run in: batch (scheduled work) or interactive (people waiting on it)."""
    quota: Quota
    deploy: Callable[[EngineScope], None]
    """Registers the engine's resources in its scope (runs only when the engine is enabled)."""
    buckets: BucketAccess | None = None
    """Its S3 access: a MinIO policy, user and keys named after the engine, delivered as the Secret `s3-<name>`."""
    catalog_role: str | None = None
    """Its Polaris catalog role (writer, reader, gold-reader), delivered as the Secret `polaris-<name>`."""
    ui: Ui | None = None
    database: bool = False
    """Whether it keeps its metadata in a Postgres of its own (CloudNativePG, `<name>-db`, protected)."""
    section: type[BaseModel] = ServiceToggle
    """The model of its section `compute.<name>` (a switch, `enabled`, by default); the config gets the section from here
    (components/catalog.py) unless ComputeConfig has the field already, which must then be of this model."""
    charts: tuple[EngineChart, ...] = ()
    """The charts it installs: `EngineScope.release` lays their image values over a release's own on a site with a
    registry, and the policy pack places their pods in its pool; a chart on the compute cluster that no engine declares
    (and that is not a platform chart of the pack's) is refused."""
    kinds: Mapping[str, tuple[Pods, ...]] = field(default_factory=dict)
    """Its custom resources that run pods, by kind, and where those pods are placed (the CRD's fields)."""

    @property
    def namespace(self) -> str:
        return self.name

    def config(self, compute: Any) -> Any:
        """Its section of the site's `compute` config."""
        return getattr(compute, self.name)


@dataclass
class EngineScope:
    """What the compute cluster gives an engine: its place (parent, cluster, domain), its neighbours (storage,
    identity, federation, the GPU clusters it may submit to) and the building blocks that keep every engine alike."""

    prefix: str
    """Logical-name prefix of the compute component; every child is `<prefix>-<role>`."""
    parent: pulumi.Resource
    cluster: ClusterRef
    domain: str
    site: str
    """The site's name (the serving repository's default path is `sites/<site>`)."""
    compute: Any
    """The site's `compute` config section."""
    adopt: Adoption
    """What exists already on the compute cluster and is imported."""
    storage: StorageCluster
    identity: SiteIdentity
    federation: SiteFederation | None
    gpu_clusters: list[ClusterRef]
    """The GPU clusters jobs are submitted to (Airflow reaches their API servers)."""
    serving: ServingTarget | None = None
    """The serving cluster Argo CD applies the serving repository to, while inference.delivery is argocd."""
    serving_repo_token: pulumi.Input[str] | None = None
    """The serving repository's read-only token (the secret config key `servingRepoToken`), while Argo CD has a
    repository: Argo CD's repository Secret."""
    serving_repo_write_token: pulumi.Input[str] | None = None
    """The token the serving-loop DAG pushes and opens pull requests with (`servingRepoWriteToken`, optional): Airflow's
    connection `serving_repo`. Argo CD never holds it."""
    gateway: pulumi.Resource | None = None
    cnpg: pulumi.Resource | None = None
    cilium: pulumi.Resource | None = None
    """The compute cluster's Cilium release, which registers the cilium.io CRDs an engine's network policy needs."""
    chart_images: Mapping[str, ChartValues] = field(default_factory=dict)
    """Chart name -> the image values its engine declares (components/engines `CHART_IMAGES`)."""
    ray_tokens: dict[str, pulumi.Output[str]] = field(default_factory=dict)
    """Team -> its Ray token, while Ray is on (components/ray.py)."""
    catalog_passwords: Mapping[str, pulumi.Input[str]] = field(default_factory=dict)
    """Trino's external catalog -> its account's password (secret config `trinoCatalogPassword-<catalog>`)."""
    teams: Mapping[str, Any] = field(default_factory=dict)
    """The site's teams (`teams`): each gets a Spark Connect server of its own, reached by its members' notebook servers
    only; Airflow's team roles and serving loops."""
    _namespaces: dict[str, k8s.core.v1.Namespace] = field(default_factory=dict)

    @property
    def child(self) -> pulumi.ResourceOptions:
        return pulumi.ResourceOptions(parent=self.parent)

    def after(self, *resources: pulumi.Resource) -> pulumi.ResourceOptions:
        return pulumi.ResourceOptions(parent=self.parent, depends_on=list(resources))

    def plain_namespace(self, name: str, opts: pulumi.ResourceOptions | None = None,
                        labels: dict[str, str] | None = None) -> k8s.core.v1.Namespace:
        return namespace(f"{self.prefix}-ns-{name}", name, opts or self.child, labels=labels, adopt=self.adopt,
                         registry=self.cluster.registry)

    def labelled_namespace(self, name: str, labels: dict[str, str]) -> k8s.core.v1.Namespace:
        """A namespace of no engine's own, once however often it is asked for (Iceberg maintenance's: Spark's operator
        watches it, Airflow puts the job and Secrets there), with a quota of zero GPUs like every compute namespace (its
        CPU and memory are bounded by its pool's YuniKorn queue)."""
        if name not in self._namespaces:
            resource = self.plain_namespace(name, labels=labels)
            k8s.core.v1.ResourceQuota(
                f"{self.prefix}-quota-{name}",
                metadata={"name": "compute", "namespace": name},
                spec={"hard": {"requests.nvidia.com/gpu": "0"}},
                # the namespace must exist before anything is created in it
                opts=self.after(resource),
            )
            self._namespaces[name] = resource
        return self._namespaces[name]

    def namespace(self, engine: Engine, aliases: list[pulumi.Alias] | None = None) -> k8s.core.v1.Namespace:
        """The engine's namespace, once: labelled with the engine and its pool, with its quota (and zero GPUs) and
        container defaults."""
        ns = engine.namespace
        if ns in self._namespaces:
            return self._namespaces[ns]
        # The engine's workloads run here and read its credential Secrets only (fab-engine-reads-own-credentials).
        labels = {ENGINE_LABEL: engine.name, POOL_LABEL: engine.pool.name, **({ROUTES_LABEL: GATEWAY} if engine.ui else {})}
        resource = self.plain_namespace(ns, pulumi.ResourceOptions(parent=self.parent, aliases=aliases), labels=labels)
        k8s.core.v1.ResourceQuota(
            f"{self.prefix}-quota-{ns}",
            metadata={"name": "compute", "namespace": ns},
            spec={"hard": {"requests.cpu": engine.quota.cpu, "requests.memory": engine.quota.memory, "requests.nvidia.com/gpu": "0"}},
            # the namespace must exist before anything is created in it
            opts=self.after(resource),
        )
        k8s.core.v1.LimitRange(
            f"{self.prefix}-limits-{ns}",
            metadata={"name": "defaults", "namespace": ns},
            spec={"limits": [{
                "type": "Container",
                "defaultRequest": {"cpu": "250m", "memory": "512Mi"},
                "default": {"cpu": "2", "memory": "4Gi"},
            }]},
            # the namespace must exist before anything is created in it
            opts=self.after(resource),
        )
        self._namespaces[ns] = resource
        return resource

    def release(self, logical: str, chart: versions.HelmChart, ns: str, values: dict[str, Any],
                depends_on: list[pulumi.Resource], release: str | None = None) -> k8s.helm.v3.Release:
        name = release or logical
        return helm_release(f"{self.prefix}-{logical}", chart, name=name, namespace=ns, values=values,
                            # `depends_on`: what the chart's pods need when they start (each caller says what)
                            opts=self.after(*depends_on), adopt=self.adopt, registry=self.cluster.registry,
                            images=self.chart_images.get(chart.chart))

    def random(self, logical: str, length: int = 48) -> pulumi.Output[str]:
        return random_secret(f"{self.prefix}-{logical}", length, self.child)

    def secret(self, logical: str, name: str, ns: str, data: dict[str, pulumi.Input[str]], after: pulumi.Resource,
               type_: str = "Opaque", labels: dict[str, str] | None = None) -> k8s.core.v1.Secret:
        metadata = {"name": name, "namespace": ns, **({"labels": labels} if labels else {})}
        # `after` is the namespace it goes in (every caller's), which must exist first
        return k8s.core.v1.Secret(f"{self.prefix}-{logical}", metadata=metadata, type=type_, string_data=data, opts=self.after(after))

    def hostname(self, engine: Engine) -> str:
        assert engine.ui is not None
        return engine.ui.hostname(self.domain)

    def oidc_secret(self, engine: Engine, ns_resource: pulumi.Resource, labels: dict[str, str] | None = None) -> k8s.core.v1.Secret:
        """The Secret `<engine>-oidc`: the engine's browser client, allowed exactly its own redirect URI (`labels`: those
        the engine needs to find it by)."""
        assert engine.ui is not None
        client = self.identity.oidc_client(engine.name, "browser", [engine.ui.redirect_uri(self.domain)],
                                           description=f"{engine.name} sign-in")
        return self.secret(f"{engine.name}-oidc", f"{engine.name}-oidc", engine.namespace, {
            OIDC_CLIENT_ID: client.client_id,
            OIDC_CLIENT_SECRET: client.client_secret,
            OIDC_ISSUER: client.issuer_url,
        }, ns_resource, labels=labels)

    def route(self, engine: Engine, ns_resource: pulumi.Resource) -> None:
        """The engine's HTTPRoute on its own listener of the compute ingress. It waits for the Gateway (after the
        controller's chart, which brings the Gateway API CRDs) and its namespace, not for the engine's chart: until the
        UI's Service has ready pods the route answers 503, as it does whenever the UI restarts."""
        assert engine.ui is not None and self.gateway is not None
        http_route(
            f"{self.prefix}-route-{engine.name}", pulumi.ResourceOptions(parent=self.parent, depends_on=[self.gateway, ns_resource]),
            name=engine.name, namespace_=engine.namespace, gateway=GATEWAY, listener=engine.name, hostname=self.hostname(engine),
            rules=[{"backendRefs": [{"name": engine.ui.service, "port": engine.ui.port}]}],
        )

    def database(self, engine: Engine, ns_resource: pulumi.Resource) -> tuple[k8s.core.v1.Secret, pulumi.Output[str]]:
        """A two-instance Postgres owned by the engine, with a generated password (a Pulumi secret)."""
        app, ns = engine.name, engine.namespace
        password = self.random(f"{app}-db-password", 32)
        owner = self.secret(f"{app}-db-owner", f"{app}-db-owner", ns, {"username": app, "password": password}, ns_resource,
                            type_="kubernetes.io/basic-auth")
        k8s.apiextensions.CustomResource(
            f"{self.prefix}-{app}-db",
            api_version=versions.CNPG_API,
            kind="Cluster",
            metadata={"name": f"{app}-db", "namespace": ns},
            spec={
                "instances": DATABASE_INSTANCES,
                "enableSuperuserAccess": False,
                "bootstrap": {"initdb": {"database": app, "owner": app, "secret": {"name": f"{app}-db-owner"}}},
                "storage": {"size": "20Gi"},
                "resources": {"requests": {"cpu": "250m", "memory": "512Mi"}, "limits": {"cpu": "1", "memory": "1Gi"}},
                "affinity": {"nodeSelector": engine.pool.node_selector, "tolerations": engine.pool.tolerations},
                "priorityClassName": engine.pool.priority_class,
                **postgres_image(self.cluster.registry),
            },
            # The app's metadata: protected, and kept if it ever leaves the stack.
            # The CloudNativePG chart installs the Cluster CRD; initdb creates the owner from the `owner` Secret.
            opts=pulumi.ResourceOptions(parent=self.parent, depends_on=[self.cnpg, owner], protect=True, retain_on_delete=True),
        )
        return owner, password

    def cnpg_operator(self) -> k8s.helm.v3.Release:
        ns = self.plain_namespace(CNPG_NAMESPACE)
        # the chart's objects go in its namespace, which must exist first
        return self.release("cnpg", versions.CLOUDNATIVE_PG, CNPG_NAMESPACE, {"replicaCount": 2}, [ns])

    def grants(self, engine: Engine, ns_resource: pulumi.Resource) -> list[pulumi.Resource]:
        """The engine's S3 keys and Polaris principal, delivered into its namespace (whichever it has)."""
        to = NamespaceRef(self.cluster, engine.namespace, ns_resource)
        delivered: list[pulumi.Resource] = []
        if engine.catalog_role:
            delivered.append(self.storage.catalog_grant(engine.name, to))
        if engine.buckets:
            delivered.append(self.storage.grant(engine.name, to))
        return delivered

    def config_map(self, name: str, ns: str, data: dict[str, pulumi.Input[str]], after: pulumi.Resource) -> k8s.core.v1.ConfigMap:
        # `after` is the namespace it goes in (every caller's), which must exist first
        return k8s.core.v1.ConfigMap(f"{self.prefix}-{name}", metadata={"name": name, "namespace": ns}, data=data, opts=self.after(after))
