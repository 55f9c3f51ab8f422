"""The compute cluster: Spark with YuniKorn, Airflow, Trino, StarRocks, Superset, JupyterHub and the only
ingress for outside users (DESIGN section 2, compute role).
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from components.config.fields import (
    MAX_CORES,
    MAX_MEMORY_GIB,
    Address,
    DnsLabel,
    Flag,
    HttpsUrl,
    NodeName,
    RelativePath,
    Unique,
    _Model,
)


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
        description="Run a Spark Connect server for JupyterHub's notebooks (`sc://spark-connect.spark-connect.svc.cluster.local:15002`, its own namespace), in the "
        "interactive pool and queue. Defaults to true.",
    )
    connect_max_executors: int = Field(
        8, ge=1, le=500, strict=True,
        description="Most executors the Spark Connect server starts (dynamic allocation, from none). Defaults to 8.",
    )


class ServiceToggle(_Model):
    """A compute service that can be switched off."""

    enabled: Flag = Field(True, description="Deploy it. Defaults to true.")


class TrinoConfig(_Model):
    """Trino on Polaris, signing in through Keycloak."""

    enabled: Flag = Field(True, description="Deploy it. Defaults to true.")
    workers: int = Field(3, ge=1, le=200, strict=True, description="Trino workers. Defaults to 3.")


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


class JupyterConfig(_Model):
    """JupyterHub with CPU notebook profiles; GPU notebooks run on the GPU cluster, not here."""

    enabled: Flag = Field(True, description="Deploy it. Defaults to true.")
    profiles: dict[DnsLabel, JupyterProfile] = Field(
        default_factory=lambda: {
            "small": JupyterProfile(description="2 CPU, 8 GiB", cpu=2, memory_gib=8),
            "large": JupyterProfile(description="8 CPU, 64 GiB", cpu=8, memory_gib=64),
        },
        min_length=1, description="Notebook sizes by name. Defaults to small (2 CPU, 8 GiB) and large (8 CPU, 64 GiB).",
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
