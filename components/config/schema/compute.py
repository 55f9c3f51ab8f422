"""The compute cluster: Spark with YuniKorn, Airflow, Trino, StarRocks, Superset, JupyterHub and the only
ingress for outside users (DESIGN section 2, compute role).
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import AfterValidator, Field

from components.config.fields import (
    MAX_CORES,
    MAX_MEMORY_GIB,
    Address,
    Cidr,
    DnsLabel,
    Flag,
    GroupName,
    Host,
    HttpsUrl,
    NodeName,
    Port,
    RelativePath,
    Unique,
    _Model,
)
from components.config.schema.maintenance import IcebergMaintenanceConfig


class YuniKornQueue(_Model):
    """Guaranteed and maximum resources of a YuniKorn queue."""

    guaranteed_vcores: int = Field(ge=0, le=MAX_CORES, strict=True, description="Guaranteed CPU cores; at most `max_vcores`.")
    guaranteed_memory_gib: int = Field(ge=0, le=MAX_MEMORY_GIB, strict=True, description="Guaranteed memory; at most `max_memory_gib`.")
    max_vcores: int = Field(ge=1, le=MAX_CORES, strict=True, description="Maximum CPU cores.")
    max_memory_gib: int = Field(ge=1, le=MAX_MEMORY_GIB, strict=True, description="Maximum memory.")


class SparkConfig(_Model):
    """Spark operator with Apache YuniKorn as its batch scheduler."""

    enabled: Flag = Field(True, description="Deploy it. Defaults to true.")
    batch: YuniKornQueue = Field(description="The batch queue (scheduled Spark jobs).")
    interactive: YuniKornQueue = Field(description="The interactive queue (Spark Connect, notebooks).")
    connect: Flag = Field(
        True,
        description="Run a Spark Connect server per team for its members' JupyterHub notebooks "
        "(`sc://spark-connect.spark-team-<team>.svc.cluster.local:15002`, in the team's namespace `spark-team-<team>`): the "
        "server (the driver notebooks talk to) in the interactive pool and queue, its executors where "
        "`connect_executors_pool` says, with the team's own S3 keys and Polaris principal; only the servers of the team's "
        "members reach it (Spark Connect 3.5 has no authentication of its own). Defaults to true.",
    )
    connect_executors_pool: Literal["batch", "interactive"] = Field(
        "batch",
        description="Where each team's Spark Connect executors (the heavy part of a notebook's query) run: `batch` (the batch "
        "pool, PriorityClass `compute-batch`, YuniKorn queue `root.batch`: a notebook's heavy query is batch work, as the "
        "design delegates it) or `interactive` (the interactive pool, `compute-interactive`, `root.interactive`: quicker to "
        "start on a site whose batch pool is busy, at the cost of the dashboards and ad-hoc queries beside them). The "
        "server stays interactive either way. Defaults to batch.",
    )
    connect_max_executors: int = Field(
        8, ge=1, le=500, strict=True,
        description="Most executors each team's Spark Connect server starts (dynamic allocation, from none). Defaults to 8.",
    )


class ServiceToggle(_Model):
    """A compute service that can be switched off."""

    enabled: Flag = Field(True, description="Deploy it. Defaults to true.")


EXTERNAL_CONNECTORS: dict[str, int] = {"postgresql": 5432, "mysql": 3306, "oracle": 1521, "sqlserver": 1433}
"""The JDBC connectors of the pinned Trino that an external catalog may use, with each database's default port."""
CATALOG_NAME = re.compile(r"[a-z][a-z0-9_]{0,39}")
"""A Trino catalog name as SQL writes it unquoted: lowercase letters, digits and '_'."""


def _catalog_name(value: str) -> str:
    if not CATALOG_NAME.fullmatch(value):
        raise ValueError("must be a Trino catalog name: a lowercase letter, then lowercase letters, digits and '_', at most 40 "
                         "characters")
    return value


CatalogName = Annotated[str, AfterValidator(_catalog_name)]
SCHEMA_NAME = re.compile(r"[a-z][a-z0-9_]{0,127}")


def _schema_name(value: str) -> str:
    if not SCHEMA_NAME.fullmatch(value):
        raise ValueError("must be a schema name as SQL writes it unquoted: a lowercase letter, then lowercase letters, digits "
                         "and '_', at most 128 characters")
    return value


SchemaName = Annotated[str, AfterValidator(_schema_name)]


class ExternalCatalog(_Model):
    """A database outside the site that Trino federates with the lakehouse through one of its JDBC connectors."""

    connector: Literal["postgresql", "mysql", "oracle", "sqlserver"] = Field(
        description="Trino connector of the database: postgresql, mysql, oracle or sqlserver."
    )
    host: Host = Field(description="The database's DNS name or IPv4 address, as Trino dials it.")
    port: Port | None = Field(
        None, description="The database's port. Defaults to the connector's: 5432, 3306, 1521 or 1433."
    )
    cidrs: Annotated[list[Cidr], Unique] = Field(
        min_length=1,
        description="The addresses `host` resolves to (a /32 for one server): Trino's pods may reach them on `port` and no "
        "other pod of the compute cluster may. Outside every range of the site.",
    )
    database: str | None = Field(
        None, min_length=1, max_length=128, pattern=r"^[A-Za-z0-9_.$-]+$",
        description="The database (postgresql, sqlserver) or Oracle service name; required for those connectors, not used "
        "by mysql, whose catalog shows every database of the server.",
    )
    user: str = Field(
        min_length=1, max_length=128, pattern=r"^[A-Za-z0-9_.@$-]+$",
        description="The read-only account Trino signs in with; its password is the secret "
        "`trinoCatalogPassword-<catalog>` (pulumi config set --secret).",
    )
    trust_site_ca: bool = Field(
        False,
        description="sqlserver only: verify the server's certificate against the site's CA (`ca_bundle`), for a database "
        "whose certificate the site's PKI issued. The pinned Trino's SQL Server driver always encrypts and verifies the "
        "certificate; without this it trusts the JVM's public CAs only. Defaults to false.",
    )
    groups: Annotated[list[GroupName], Unique] = Field(
        default_factory=list,
        description="The Keycloak groups whose members may read this catalog in Trino (a team's `team-<team>`, or another "
        "group of the realm); `platform-admins` always may. Defaults to none: nobody else reads it.",
    )

    @property
    def db_port(self) -> int:
        return self.port or EXTERNAL_CONNECTORS[self.connector]


class TrinoConfig(_Model):
    """Trino on Polaris, signing in through Keycloak."""

    enabled: Flag = Field(True, description="Deploy it. Defaults to true.")
    workers: int = Field(3, ge=1, le=200, strict=True, description="Trino workers. Defaults to 3.")
    external_catalogs: dict[CatalogName, ExternalCatalog] = Field(
        default_factory=dict,
        description="Databases outside the site queried as Trino catalogs, by catalog name (supply chain, ERP): each "
        "is a declared egress from Trino's pods to its `cidrs` on its port. Not `fab` or a federated peer's catalog. "
        "Defaults to none.",
    )
    team_schemas: dict[DnsLabel, Annotated[list[SchemaName], Unique]] = Field(
        default_factory=dict,
        description="Per team, the schemas of the lake catalog `fab` (Polaris namespaces) its members read in Trino besides "
        "their own (the team's key with `-` as `_`) and `gold`, which every team reads. Defaults to none.",
    )


class StarRocksConfig(_Model):
    """StarRocks: three FE, stateless CN with autoscaling and a local NVMe data cache."""

    enabled: Flag = Field(True, description="Deploy it. Defaults to true.")
    cn_min_replicas: int = Field(2, ge=1, le=200, strict=True, description="Fewest compute nodes. Defaults to 2.")
    cn_max_replicas: int = Field(8, ge=1, le=200, strict=True, description="Most compute nodes. Defaults to 8.")
    cache_storage_class: str = Field(
        "local-nvme-cache", min_length=1,
        description="StorageClass of the CN data cache, created on the compute cluster with `compute.nvme_provisioner` (cache "
        "only: StarRocks runs shared-data, its tables live in the olap bucket). Defaults to local-nvme-cache.",
    )
    cache_size_gib: int = Field(500, ge=10, le=65536, strict=True, description="Data cache per CN (at most 64 TiB of local NVMe). Defaults to 500.")


class JupyterProfile(_Model):
    """A CPU notebook size offered by JupyterHub."""

    description: str = Field("", description="Shown in the spawner.")
    cpu: float = Field(gt=0, le=64, strict=True, description="CPU limit (and guarantee) in cores.")
    memory_gib: int = Field(ge=1, le=512, strict=True, description="Memory limit (and guarantee).")


_IMAGE = re.compile(r"^[a-z0-9]([a-z0-9._-]*[a-z0-9])?(:[0-9]+)?(/[a-z0-9]([a-z0-9._-]*[a-z0-9])?)+"
                    r"(@sha256:[0-9a-f]{64}|:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})$")


def _pinned_image(value: str) -> str:
    if not _IMAGE.match(value) or value.endswith(":latest"):
        raise ValueError("must be an image with its registry, pinned by a tag other than latest or by a digest, such as "
                         "quay.io/jupyter/pytorch-notebook:<tag>")
    return value


ContainerImage = Annotated[str, AfterValidator(_pinned_image)]
"""A container image pinned by tag (not `latest`) or digest, with its registry: quay.io/jupyter/pytorch-notebook:<tag>."""


class GpuNotebooksConfig(_Model):
    """GPU notebooks: a JupyterHub of their own on a GPU cluster, reached through the compute ingress, each notebook on a
    share of a GPU (gpu.<cluster>.sharing), teams capped by a quota."""

    cluster: DnsLabel = Field(description="The gpu cluster whose notebooks-pool nodes run the notebooks (a key of `gpu`).")
    pool: DnsLabel = Field("internal", description="Internal pool of that cluster holding `vip`. Defaults to internal.")
    vip: Address = Field(
        description="Fixed address of the notebooks hub's proxy in `pool`, which only the compute ingress reaches (flow "
        "gpu-notebooks): a host address of the pool, used by no other endpoint.",
    )
    cpu: float = Field(4, gt=0, le=64, strict=True, description="CPU limit (and guarantee) of a notebook, in cores. Defaults to 4.")
    memory_gib: int = Field(32, ge=1, le=512, strict=True, description="Memory limit (and guarantee) of a notebook. Defaults to 32.")
    image: ContainerImage | None = Field(
        None,
        description="Single-user image with the teams' CUDA stack, pinned by tag or digest (for example a "
        "quay.io/jupyter/pytorch-notebook cuda12 tag). Defaults to the chart's single-user image, which has no CUDA "
        "libraries of its own (the driver's are mounted).",
    )
    team_quotas: dict[DnsLabel, Annotated[int, Field(ge=1, le=1000, strict=True)]] = Field(
        min_length=1,
        description="Notebooks each team may run at once (its shares of GPUs: time-slices or MIG instances), by team; only "
        "these teams' members (Keycloak group team-<team>) get a GPU profile.",
    )


class JupyterConfig(_Model):
    """JupyterHub with CPU notebook profiles; GPU notebooks run on a GPU cluster, in a hub of their own (`gpu_notebooks`)."""

    enabled: Flag = Field(True, description="Deploy it. Defaults to true.")
    profiles: dict[DnsLabel, JupyterProfile] = Field(
        default_factory=lambda: {
            "small": JupyterProfile(description="2 CPU, 8 GiB", cpu=2, memory_gib=8),
            "large": JupyterProfile(description="8 CPU, 64 GiB", cpu=8, memory_gib=64),
        },
        min_length=1, description="Notebook sizes by name. Defaults to small (2 CPU, 8 GiB) and large (8 CPU, 64 GiB).",
    )
    gpu_notebooks: GpuNotebooksConfig | None = Field(
        None,
        description="GPU notebooks on a GPU cluster (roadmap phase 04): their own JupyterHub there, signed in through the "
        "site's realm and reached at https://gpu-notebooks.<domain> through the compute ingress. Defaults to none.",
    )


class ComputeIngressConfig(_Model):
    """The only entry for outside users: one gateway on an external pool of the compute cluster."""

    pool: DnsLabel = Field("external", description="External pool of the compute cluster. Defaults to external.")
    vip: Address = Field(description="Fixed address of the ingress in `pool`: a host address of it, used by no other endpoint.")
    tls_secret: DnsLabel = Field(
        "compute-ingress-tls",
        description="kubernetes.io/tls Secret in envoy-gateway-system covering every UI host name, issued by the site's PKI. "
        "Defaults to compute-ingress-tls.",
    )


class ServingRepoConfig(_Model):
    """The Git repository that holds the serving manifests Argo CD applies (`fabctl serving render` writes them)."""

    url: HttpsUrl = Field(description="HTTPS clone URL of the serving repository, on the site's Git server.")
    revision: str = Field(
        "main", min_length=1, max_length=255, pattern=r"^[A-Za-z0-9._/-]+$",
        description="Branch, tag or commit Argo CD follows. Defaults to main.",
    )
    path: RelativePath | None = Field(
        None,
        description="Directory of this site in the repository; each serving cluster reads `<path>/<cluster>/`. "
        "Defaults to sites/<site name>.",
    )
    username: str = Field(
        "git", min_length=1, max_length=255,
        description="User name sent with the token (`servingRepoToken`); most Git servers accept any. Defaults to git.",
    )


class ArgoCdConfig(_Model):
    """Argo CD on compute: applies the serving manifests from Git to the serving cluster."""

    enabled: Flag = Field(
        False,
        description="Deploy Argo CD on the compute cluster, signing in through the site's realm (roadmap phase 03). "
        "Defaults to false.",
    )
    serving_repo: ServingRepoConfig | None = Field(
        None, description="The serving repository. Required while inference.delivery is argocd.",
    )


class ComputeConfig(_Model):
    """What runs on the compute cluster; each service can be switched off."""

    batch_nodes: Annotated[list[NodeName], Unique] = Field(
        default_factory=list,
        description="Nodes of the batch pool (Spark, Airflow): labelled by the program; they register with the batch taint "
        "(docs/operations.md, \"Node pools\"). At least one while Spark or Airflow is on.",
    )
    interactive_nodes: Annotated[list[NodeName], Unique] = Field(
        default_factory=list,
        description="Nodes of the interactive pool (Trino, StarRocks, Superset, JupyterHub): labelled by the program; they "
        "register with the interactive taint (docs/operations.md, \"Node pools\"). At least one while any of those is on; "
        "none is also a batch node.",
    )
    nvme_provisioner: str = Field(
        "rancher.io/local-path", min_length=1,
        description="Provisioner of the local NVMe StorageClass of the StarRocks CN cache (cache only). Defaults to rancher.io/local-path.",
    )
    ingress: ComputeIngressConfig
    spark: SparkConfig
    airflow: ServiceToggle = Field(default_factory=ServiceToggle, description="Apache Airflow.")
    trino: TrinoConfig = Field(default_factory=TrinoConfig, description="Trino.")
    starrocks: StarRocksConfig = Field(default_factory=StarRocksConfig, description="StarRocks.")
    superset: ServiceToggle = Field(default_factory=ServiceToggle, description="Apache Superset.")
    jupyterhub: JupyterConfig = Field(default_factory=JupyterConfig, description="JupyterHub.")
    argocd: ArgoCdConfig = Field(default_factory=ArgoCdConfig, description="Argo CD, for serving through Git.")
    iceberg_maintenance: IcebergMaintenanceConfig | None = Field(
        None,
        description="Nightly Iceberg table maintenance (compaction, snapshot expiry, orphan files, manifests, quality checks) "
        "as Spark jobs Airflow runs on the batch pool, with its own Polaris principal and S3 keys; needs Spark and Airflow. "
        "None by default: no table is maintained until its namespace is listed.",
    )
