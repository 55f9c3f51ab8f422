"""The storage cluster: AIStor, its buckets and S3 endpoints, Polaris and its Postgres (DESIGN section 2, storage role)."""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import AfterValidator, Field

from components.config.fields import Address, Cidr, DnsLabel, Flag, HostPort, Labels, Port, Unique, _Model, matching
from components.config.names import ObjectStoreName, VendorKey


class MinioEndpoint(_Model):
    """Admin endpoint of the site's AIStor (MinIO) object store, used by the minio provider."""

    server: HostPort = Field(description="host:port of the S3/admin API, for example `s3-admin.storage.site-a.fab.internal:9000`; no scheme.")
    ssl: Flag = Field(True, description="Use TLS. Defaults to true.")
    region: str = Field("us-east-1", min_length=1, description="S3 region name. Defaults to us-east-1.")


DataClass = Literal["raw", "warehouse", "datasets", "models", "checkpoints", "gold", "backups", "olap"]
VERSIONED_CLASSES: frozenset[str] = frozenset({"warehouse", "models", "checkpoints"})
"""Classes whose buckets are always versioned: table data, model weights and checkpoints must survive a bad write."""
REPLICABLE_CLASSES: frozenset[str] = frozenset({"gold"})
"""The class that may always be copied to another site (data residency, export control). Models are copied only to a
consumer configured for it (`federation.consumers.<site>.replicate_models`, a warm standby); nothing else ever is."""
NO_EXPIRY_CLASSES: frozenset[str] = frozenset({"warehouse", "models", "gold"})
"""Classes whose current objects never expire by lifecycle: Iceberg files are removed by snapshot expiry, not ILM."""
CONTRACT_CLASSES = ("warehouse", "models", "checkpoints")
"""Classes with exactly one bucket per site: their names are part of the stack's contracts."""

AISTOR_POD_LABEL = "aistor.min.io/objectStore"
"""The label the AIStor operator puts on an object store's pods, valued with the object store's name."""

_BUCKET = re.compile(r"^[a-z0-9][a-z0-9-]{1,61}[a-z0-9]$")


_bucket_name = matching(_BUCKET, "must be an S3 bucket name: 3-63 lowercase letters, digits and '-', starting and ending with a letter or digit")


BucketName = Annotated[str, AfterValidator(_bucket_name)]


class Bucket(_Model):
    """One bucket of the object store."""

    data_class: DataClass = Field(
        alias="class",
        description="raw (FDC traces, STDF, images; site-local), warehouse (Iceberg data and metadata), datasets, "
        "models (copied to another site only for a consumer with replicate_models), checkpoints, gold (summary tables; "
        "replicated to consumers), backups (Postgres), "
        "olap (StarRocks shared-data storage of its own tables and materialized views).",
    )
    retention_days: int | None = Field(
        None, ge=1, le=36500, strict=True,
        description="Expire current objects after this many days (at most 100 years). Not allowed on warehouse, models and gold. Defaults to keeping them.",
    )
    noncurrent_expiry_days: int | None = Field(
        None, ge=1, le=36500, strict=True,
        description="Expire noncurrent versions after this many days (versioned classes only; at most 100 years). Defaults to keeping them.",
    )

    @property
    def versioned(self) -> bool:
        return self.data_class in VERSIONED_CLASSES


class ObjectStoreConfig(_Model):
    """The AIStor object store on the storage cluster."""

    install: Flag = Field(
        False,
        description="Install AIStor with the vendor's pinned Helm charts (needs the secret config `aistorLicense`). "
        "Defaults to false: the existing deployment is adopted and only buckets and access are managed.",
    )
    namespace: DnsLabel = Field("aistor", description="Namespace of the object store. Defaults to aistor.")
    name: ObjectStoreName = Field("aistor", description="Name of the object store. Defaults to aistor.")
    pod_labels: Labels = Field(
        default_factory=dict,
        description="Labels of the object store's S3 pods, which the S3 Services select. Defaults to the labels the "
        "AIStor operator sets for `name`.",
    )
    @property
    def s3_pod_labels(self) -> dict[str, str]:
        """Labels of the object store's S3 pods: `pod_labels`, or what the AIStor operator sets for `name`."""
        return dict(self.pod_labels) or {AISTOR_POD_LABEL: self.name}

    root_user: str = Field("fab-admin", min_length=3, description="Root user of an installed object store; its password is the secret config `aistorRootPassword`. Defaults to fab-admin.")
    s3_port: Port = Field(9000, description="S3 API port of the pods and of both endpoints. Defaults to 9000.")
    tls: Flag = Field(True, description="The S3 API serves TLS (AIStor's default). Defaults to true.")
    table_catalog: Flag = Field(
        False,
        description="AIStor's built-in Iceberg table catalog. Must stay false: Polaris is the only catalog authority.",
    )
    servers: int = Field(4, ge=1, le=256, strict=True, description="Servers of the pool when installing. Defaults to 4.")
    volumes_per_server: int = Field(4, ge=1, le=128, strict=True, description="Drives per server when installing. Defaults to 4.")
    volume_size_gib: int = Field(
        1024, ge=1, le=131_072, strict=True, description="Size of each drive when installing (at most 128 TiB). Defaults to 1024."
    )
    storage_class: str | None = Field(None, min_length=1, description="StorageClass of the drives when installing. Defaults to the cluster's default.")


class S3Endpoints(_Model):
    """The two S3 VIPs: internal for compute and GPU clusters, external (optional) for users outside the clusters."""

    internal_pool: DnsLabel = Field("internal", description="Internal pool of the storage cluster. Defaults to internal.")
    internal_vip: Address = Field(description="Fixed address of the internal S3 endpoint in `internal_pool`, used by no other endpoint.")
    external_pool: DnsLabel | None = Field(None, description="External pool of the storage cluster. Defaults to no external endpoint.")
    external_vip: Address | None = Field(None, description="Fixed address of the external S3 endpoint in `external_pool`, used by no other endpoint.")


class PostgresConfig(_Model):
    """The CloudNativePG cluster behind Polaris."""

    instances: int = Field(3, ge=1, le=9, strict=True, description="Postgres instances (one primary, the rest replicas). Defaults to 3.")
    storage_gib: int = Field(20, ge=1, le=65536, strict=True, description="Volume size of each instance (at most 64 TiB). Defaults to 20.")
    storage_class: str | None = Field(None, min_length=1, description="StorageClass of the volumes. Defaults to the cluster's default.")
    backup_bucket: BucketName = Field(description="Bucket of class backups that receives base backups and WAL.")
    backup_retention_days: int = Field(
        30, ge=1, le=3650, strict=True, description="Recovery window kept in the backup bucket (at most 10 years). Defaults to 30."
    )


class PolarisConfig(_Model):
    """Apache Polaris, the site's only Iceberg REST catalog."""

    namespace: DnsLabel = Field("polaris", description="Namespace of Polaris and its database. Defaults to polaris.")
    realm: DnsLabel = Field("fab", description="Polaris realm. Defaults to fab.")
    catalog: DnsLabel = Field("fab", description="Catalog (warehouse) name over the warehouse bucket. Defaults to fab.")
    pool: DnsLabel = Field("internal", description="Internal pool of the storage cluster for the REST endpoint. Defaults to internal.")
    vip: Address = Field(description="Fixed address of the Polaris REST endpoint in `pool`, used by no other endpoint.")
    port: Port = Field(8181, description="Polaris REST port. Defaults to 8181.")
    replicas: int = Field(2, ge=1, le=10, strict=True, description="Polaris server replicas. Defaults to 2.")
    postgres: PostgresConfig
    gold_bucket: BucketName | None = Field(
        None,
        description="Bucket of class gold that holds the `gold` namespace's tables. Defaults to the site's only gold bucket; "
        "required when there are several.",
    )


GOLD_NAMESPACE = "gold"
"""The Polaris namespace of the summary tables: the only one shared with other sites and with vendors."""
_GOLD_OBJECT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_]{0,127}$")


def _gold_object(value: str) -> str:
    """`gold.<name>`: a table or view of the gold namespace, whose name is also its folder in the gold bucket."""
    namespace, dot, name = value.partition(".")
    if not dot or namespace != GOLD_NAMESPACE:
        raise ValueError(f"is not in the {GOLD_NAMESPACE} namespace; vendors are granted {GOLD_NAMESPACE} tables and views only: "
                         f"write {GOLD_NAMESPACE}.<name>")
    if not _GOLD_OBJECT.fullmatch(name):
        raise ValueError(f"the name after '{GOLD_NAMESPACE}.' must be 1-128 letters, digits and '_', starting with a letter or "
                         "digit")
    return value


GoldObject = Annotated[str, AfterValidator(_gold_object)]


class VendorConfig(_Model):
    """An equipment vendor that reads some gold tables and views from outside the site (DESIGN use case "sharing with
    equipment vendors": a restricted Polaris principal and views)."""

    description: str = Field(min_length=1, description="Who the vendor is and what it receives, shown in the plan report.")
    source_cidrs: Annotated[list[Cidr], Unique] = Field(
        default_factory=list,
        description="Required: the vendor's own egress ranges, the only addresses its clients may come from (each at most a /16, "
        "outside the site's clusters): the catalog route on the compute ingress admits them alone (an Envoy Gateway "
        "SecurityPolicy) and the flow `vendor-s3` admits them to the object store's S3 pods; the vendor's MinIO policy "
        "also names them (aws:SourceIp), a fence a forwarding header can defeat.",
    )
    tables: Annotated[list[GoldObject], Unique] = Field(
        default_factory=list,
        description="Gold tables the vendor may load (`gold.<table>`): Polaris TABLE_READ_PROPERTIES on each, and S3 read of "
        "its folder `<gold bucket>/gold/<table>/` only. A view's base tables must be listed here too: Iceberg views are "
        "resolved by the reader. Defaults to none.",
    )
    views: Annotated[list[GoldObject], Unique] = Field(
        default_factory=list,
        description="Gold views the vendor may load (`gold.<view>`): Polaris VIEW_READ_PROPERTIES on each. Defaults to none.",
    )


class StorageConfig(_Model):
    """What runs on the storage cluster: the object store, its buckets and access, and Polaris."""

    object_store: ObjectStoreConfig = Field(default_factory=ObjectStoreConfig, description="The AIStor object store.")
    s3: S3Endpoints
    buckets: dict[BucketName, Bucket] = Field(min_length=1, description="Buckets by name.")
    polaris: PolarisConfig
    vendors: dict[VendorKey, VendorConfig] = Field(
        default_factory=dict,
        description="Equipment vendors by name: each gets its own Polaris principal limited to the listed gold tables and "
        "views, and S3 keys that read only those tables' folders, through the external S3 endpoint and the catalog "
        "endpoint on the compute ingress (docs/vendor-sharing.md). Defaults to none.",
    )

    def gold_location(self) -> str | None:
        """The bucket of the `gold` namespace: the configured one, else the only gold bucket (None without gold)."""
        if self.polaris.gold_bucket is not None:
            return self.polaris.gold_bucket
        gold = [name for name, bucket in self.buckets.items() if bucket.data_class == "gold"]
        return gold[0] if len(gold) == 1 else None
