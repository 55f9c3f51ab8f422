"""StorageCluster: AIStor buckets and least-privilege access, and Polaris on Postgres as the one catalog (DESIGN 1, 2).

On the storage cluster: the object store (adopted by default, or installed from the vendor's pinned
charts), its internal and external S3 VIPs, the buckets of the site with their class, versioning,
lifecycle and tags, one MinIO policy, user and service account per engine, and Apache Polaris
backed by a CloudNativePG cluster that backs up to AIStor. Other components never copy endpoint
strings or keys: they call `grant()` / `catalog_grant()` for a Secret in their namespace and read
`catalog_uri`, `s3_endpoint_internal` and the bucket outputs.

Over 500 lines on purpose: the object store, its buckets and identities, and Polaris on its database are
one resource graph (keys wait for their policy and buckets, Polaris for its database, keys and bootstrap),
kept in one component. Who may do what is pure and lives in components/data_access.py.
"""

from __future__ import annotations

import base64
import hashlib
import json
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import pulumi_minio as minio
import pulumi_random as random
import pulumi_tls as tls

from components import versions
from components.config import (
    AdoptConfig,
    MinioEndpoint,
    StorageConfig,
    names,
)
from components.constants import (
    AISTOR_METRICS_TOKEN_KEY,
    AISTOR_METRICS_TOKEN_SECRET,
    CNPG_NAMESPACE,
    ENGINE_LABEL,
    HOSTNAME_ANNOTATION,
    POLARIS_CLIENT_ID,
    POLARIS_CLIENT_SECRET,
    POLARIS_CREDENTIAL,
    POLARIS_PORT_NAME,
    POLARIS_SCOPE,
    POLARIS_SERVICE,
    POLARIS_URI,
    POLARIS_WAREHOUSE,
    S3_ACCESS_KEY,
    S3_ENDPOINT,
    S3_REGION,
    S3_SECRET_KEY,
    SITE_CA_KEY,
    SITE_CA_SECRET,
    TEAM_LABEL,
    TRAINING_CHECKPOINT_URI,
    TRAINING_MODEL_URI,
    polaris_secret,
    s3_secret,
)
from components.data_access import (
    MAINTENANCE,
    REPLICATION,
    TEAM_CREDENTIALS_ENV,
    TRAINING,
    bucket_tags,
    buckets_of,
    catalog_access,
    catalog_uri,
    catalog_uri_at,
    engine_access,
    engine_buckets,
    lifecycle_rules,
    maintenance_policy_document,
    namespace_location,
    polaris_setup_plan,
    policy_document,
    principal_engines,
    replication_policy_document,
    s3_endpoint_internal,
    team_policy_document,
    team_prefix,
    team_principal,
    team_setup_plan,
)
from components.jvm_trust import JVM_TRUST_STORE_KEY, jvm_trust_options, public_and_site_store
from components.kube import (
    Adoption,
    adopted,
    helm_release,
    namespace,
    postgres_image,
    random_secret,
    restricted_container,
    run_once_job,
)
from components.minio_admin import AdminEndpoint, BucketTags, MinioNamesFree, guard
from components.network import CrossClusterNetwork, GlobalService
from components.providers import ClusterRef, NamespaceRef, SiteRef
from components.vendor_access import (
    VENDOR_ACCESS_KEY,
    VENDOR_CLIENT_ID,
    VENDOR_CLIENT_SECRET,
    VENDOR_CREDENTIALS_ENV,
    VENDOR_SECRET_KEY,
    vendor_policy_document,
    vendor_setup_plan,
)

POLARIS_POD_LABELS = {"app.kubernetes.io/name": "polaris", "app.kubernetes.io/instance": "polaris"}
POLARIS_DB = "polaris-db"
POLARIS_SITE_CA = "polaris-site-ca"
"""The ConfigMap in Polaris' namespace with its JVM's trust store, where the site has its own CA."""
POLARIS_TRUST_STORE = f"/etc/fab/site-ca/{JVM_TRUST_STORE_KEY}"
"""Where Polaris' server mounts that store."""
POSTGRES_BACKUP = "postgres-backup"
"""The principal of the catalog database's backups (PLATFORM_ACCESS)."""
AISTOR_OPERATOR_NAMESPACE = "aistor-operator"


def _credential(principal: _Principal) -> pulumi.Output[str]:
    """`<client id>:<client secret>` of a Polaris principal, a Pulumi secret (the Secrets' POLARIS_CREDENTIAL)."""
    return pulumi.Output.secret(pulumi.Output.concat(principal.client_id, ":", principal.client_secret))


def _secret_env(env_name: str, secret: str, key: str) -> dict[str, Any]:
    return {"name": env_name, "valueFrom": {"secretKeyRef": {"name": secret, "key": key}}}


@dataclass(frozen=True)
class StorageClusterArgs:
    site: SiteRef
    """The site: its name tags buckets and MinIO users, its domain names the endpoints, pods that call AIStor trust its CA."""
    cluster: ClusterRef
    """The storage cluster."""
    config: StorageConfig
    """The `storage` section: object store, S3 endpoints, buckets, Polaris."""
    admin_endpoint: MinioEndpoint
    """The `minio` section: the object store's admin endpoint and region."""
    minio_provider: minio.Provider
    """The provider of the object store."""
    federation_consumers: list[str]
    """The sites that read this site's gold; each gets a gold-only Polaris principal."""
    replicated_classes: frozenset[str]
    """The bucket classes that leave the site (`FederationConfig.replicated_classes`): gold, and models once a consumer
    keeps them. Their buckets are tagged `replicable`, and the replication principal reads them."""
    teams: list[str]
    """The training teams: each gets its own MinIO user and policy, confined to its prefix of the checkpoint and model
    buckets, and its own Polaris principal, delivered by `training_grants()`."""
    adopt: AdoptConfig
    """Declares the namespaces, releases, buckets and MinIO users and policies that exist already."""
    network: CrossClusterNetwork
    """Gives the S3 and Polaris Services their addresses from the storage cluster's pools."""
    catalog_clients: tuple[str, ...] = ()
    """The other clusters whose pods call Polaris: with global services, each repeats Polaris's Service."""
    aistor_license: pulumi.Input[str] | None = None
    """The AIStor license (a Pulumi secret); required when the object store is installed."""
    aistor_root_password: pulumi.Input[str] | None = None
    """The object store's root password (a Pulumi secret); required when the object store is installed."""
    metrics: bool = False
    """The site runs the metrics stack (`observability`): a principal that may read AIStor's metrics, and its token."""
    maintained_namespaces: tuple[str, ...] = ()
    """The Polaris namespaces Iceberg maintenance runs on (compute.iceberg_maintenance): with any, the maintenance principal,
    granted on them alone in Polaris and on their locations alone in S3, delivered by `maintenance_grants()`. None without it."""
    served_weights: tuple[str, ...] = ()
    """Paths in the models bucket (the served models' `source`) every team may list and read: offline batch inference
    (`inference.batch`) loads a served model's weights with the team's own keys. None without it."""
    replicated_models: tuple[str, ...] = ()
    """Paths in the models bucket the replication principal lists and reads, and the models copy jobs send
    (`SiteConfig.replicated_models`: the served models' `source`); none while no consumer has `replicate_models`."""


METRICS_PRINCIPAL = "fab-metrics"
METRICS_ENGINE = "metrics"
METRICS_POLICY = {"Version": "2012-10-17", "Statement": [
    {"Sid": "ReadMetrics", "Effect": "Allow", "Action": ["admin:Prometheus"]},
    {"Sid": "NoTableCatalog", "Effect": "Deny", "Action": ["s3tables:*"], "Resource": ["arn:aws:s3tables:::bucket/*"]},
]}
"""Reads the metrics endpoints and nothing else: no bucket, no object, no other admin call (and, like every policy of the
platform, never AIStor's own table catalog)."""
METRICS_TOKEN_EXPIRY = 4_102_444_800
"""2100-01-01T00:00:00Z. The token is made from the keys alone, so the same keys give the same token and `pulumi up`
changes nothing; rotating the keys (replacing the service account) makes a new one."""


def metrics_token(access_key: str, secret_key: str) -> str:
    """The bearer token AIStor's metrics accept for a principal: an HS512 JWT of its access key (subject, issuer
    `prometheus`) signed with its secret key, as `mc admin prometheus generate` makes it."""
    # Imported here: only a site with metrics makes a token, and PyJWT loads cryptography.
    import jwt
    from jwt.warnings import InsecureKeyLengthWarning

    with warnings.catch_warnings():
        # MinIO's secret keys are 40 characters, shorter than RFC 7518 recommends for HS512; the key is MinIO's to choose.
        warnings.simplefilter("ignore", InsecureKeyLengthWarning)
        return jwt.encode({"exp": METRICS_TOKEN_EXPIRY, "sub": access_key, "iss": "prometheus"}, secret_key, algorithm="HS512")


MC_CA_DIR = "/work/.mc/certs/CAs"
"""Where the MinIO client (with MC_CONFIG_DIR=/work/.mc) looks for the CAs it trusts besides the system's."""


def site_ca_volumes(delivered: bool) -> list[dict[str, Any]]:
    """A pod's volume of the site CA bundle (the Secret `fab-site-ca`), where the site has one."""
    return [{"name": "site-ca", "secret": {"secretName": SITE_CA_SECRET}}] if delivered else []


def site_ca_mounts(delivered: bool, path: str) -> list[dict[str, Any]]:
    """A container's mount of the site CA bundle at `path`, where the site has one."""
    return [{"name": "site-ca", "mountPath": path, "readOnly": True}] if delivered else []


@dataclass(frozen=True)
class SiteCa:
    """The site CA bundle delivered to one namespace (as the Secret `fab-site-ca`), or nothing without a bundle."""

    secret: k8s.core.v1.Secret | None

    def volumes(self) -> list[dict[str, Any]]:
        return site_ca_volumes(self.secret is not None)

    def mounts(self, path: str) -> list[dict[str, Any]]:
        return site_ca_mounts(self.secret is not None, path)

    def resources(self) -> list[pulumi.Resource]:
        return [self.secret] if self.secret else []


@dataclass
class _Credentials:
    access_key: pulumi.Output[str]
    secret_key: pulumi.Output[str]
    usable_after: list[pulumi.Resource]
    """The keys work once these exist: the engine's policy attachment and its buckets."""


@dataclass
class _Principal:
    client_id: pulumi.Output[str]
    client_secret: pulumi.Output[str]


class StorageCluster(pulumi.ComponentResource):
    """The site's data plane: the object store, its buckets and access, and the Polaris catalog."""

    s3_endpoint_internal: pulumi.Output[str]
    """S3 URL for compute and GPU clusters (internal VIP, DNS name in the site's domain)."""
    s3_endpoint_external: pulumi.Output[str | None]
    """S3 URL for users outside the clusters, when an external pool is configured."""
    catalog_uri: pulumi.Output[str]
    """Polaris Iceberg REST URI as the site's clusters call it: the global service's cluster-local name with global
    services, else the published one."""
    published_catalog_uri: pulumi.Output[str]
    """Polaris Iceberg REST URI under its published name (its VIP): what other sites and users outside the clusters call."""
    warehouse: pulumi.Output[str]
    """The Polaris catalog (warehouse) name."""
    data: pulumi.Output[dict[str, Any]]
    """The data contract: Polaris URI and warehouse, S3 endpoints, warehouse and gold buckets."""
    artifacts: pulumi.Output[dict[str, str]]
    """The artifacts contract: model and checkpoint buckets."""
    dns_records: pulumi.Output[dict[str, str]]
    """A records the site's DNS must hold for the endpoints above: name -> VIP."""
    vendors: pulumi.Output[dict[str, Any]]
    """Per vendor (`storage.vendors`), what operators hand over, as a Pulumi secret: the catalog endpoint on the compute
    ingress, the warehouse, the principal's client id and secret, the S3 endpoint Polaris names in every table's config
    and the external VIP the vendor resolves its host name to, the read-only keys, the site CA, and the tables and views
    granted."""

    def __init__(self, name: str, args: StorageClusterArgs, opts: pulumi.ResourceOptions | None = None):
        site = args.site
        self._site, self._name = site, name
        self.cluster = args.cluster
        """The storage cluster."""
        self._cluster_key = args.cluster.key
        self._config, self._region, self._adopt = args.config, args.admin_endpoint.region, args.adopt
        self._cluster_adopt = Adoption(args.adopt, self._cluster_key)
        self._maintained = tuple(sorted(set(args.maintained_namespaces)))
        self._principal_engines = principal_engines(args.federation_consumers, maintenance=bool(self._maintained))
        self._replicated = args.replicated_classes
        self._teams = sorted(args.teams)
        self._served_weights = args.served_weights
        self.replicated_models = args.replicated_models
        """The paths of the models bucket that leave the site (`StorageClusterArgs.replicated_models`)."""
        super().__init__(
            "fab:storage:StorageCluster",
            name,
            None,
            pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(providers=[args.cluster.provider, args.minio_provider])),
        )
        storage = args.config
        store = storage.object_store
        scheme = "https" if store.tls else "http"
        self._s3_internal = s3_endpoint_internal(site.domain, store)
        self.s3_ca_pem = site.ca_bundle_pem if store.tls else None
        """The site CA's certificates when its CA issued the internal S3 endpoint's (TLS, under the site's domain); else None."""
        self.s3_host = names.S3_HOST(site.domain)
        """The host name of the internal S3 endpoint, which its certificate names; pods that reach the object store by
        another address (the IPoIB one) resolve this name to it, so TLS still verifies."""
        self._published_catalog_uri = catalog_uri(site.domain, storage.polaris)
        self.polaris_global_service = GlobalService(
            POLARIS_SERVICE, storage.polaris.namespace, ((POLARIS_PORT_NAME, storage.polaris.port),), local_first=True,
        ) if args.network.global_services else None
        """Polaris's REST Service as a ClusterMesh global service (local-first), which the client clusters repeat; None
        without global services."""
        # The site's own clients call Polaris by its cluster-local name when it is a global service, pod to pod across the
        # mesh; the published name (its VIP) stays for everything outside the clusters and other sites.
        self._catalog_uri = (catalog_uri_at(self.polaris_global_service.host, storage.polaris) if self.polaris_global_service
                             else self._published_catalog_uri)
        self._credentials: dict[str, _Credentials] = {}
        self._principals: dict[str, _Principal] = {}
        self._team_credentials: dict[str, _Credentials] = {}
        self._team_principals: dict[str, tuple[_Principal, k8s.batch.v1.Job]] = {}
        self._vendor_credentials: dict[str, _Credentials] = {}
        self._vendor_principals: dict[str, _Principal] = {}
        self._grants: dict[tuple[str, str, str], k8s.core.v1.Secret] = {}
        self.metrics_credentials: list[pulumi.Resource] = []
        """What the AIStor monitor presents, in the object store's namespace (its token, the site CA), with `metrics`."""

        endpoint = args.admin_endpoint
        self.admin_endpoint = AdminEndpoint(endpoint.server, endpoint.ssl, endpoint.region, site.ca_bundle_pem)
        """The object store's admin API, for the program's own MinIO calls (bucket tags, name checks)."""
        self.object_store = self._object_store(args)
        engines = [f"fab-{engine}" for engine in sorted(engine_access())]
        # The check calls the store's admin API (an empty wait: an installed store has no check).
        self._names_free = self.minio_names_guard(
            f"{name}-names-free", users=engines, policies=engines, buckets=sorted(storage.buckets),
            opts=pulumi.ResourceOptions(parent=self, depends_on=self.object_store),
        )
        self._s3_services(args.network)
        self.bucket_resources = self._buckets()
        self._engine_access()
        self._team_access()
        self._vendor_access()
        if self._maintained:
            self._maintenance_access()
        if args.metrics:
            self._metrics_token()
        self._polaris(args.network)

        s3 = storage.s3
        records = {names.S3_HOST(site.domain): str(s3.internal_vip), names.POLARIS_HOST(site.domain): str(storage.polaris.vip)}
        external = None
        if s3.external_pool is not None:
            external = f"{scheme}://{names.S3_EXTERNAL_HOST(site.domain)}:{store.s3_port}"
            records[names.S3_EXTERNAL_HOST(site.domain)] = str(s3.external_vip)
        self.s3_endpoint_internal = pulumi.Output.from_input(self._s3_internal)
        self.s3_endpoint_external = pulumi.Output.from_input(external)
        self.catalog_uri = self._catalog_uri_of_clients(args.network, args.catalog_clients)
        self.published_catalog_uri = pulumi.Output.from_input(self._published_catalog_uri)
        self.warehouse = pulumi.Output.from_input(storage.polaris.catalog)
        self.data = pulumi.Output.from_input(
            {
                "catalog_uri": self._published_catalog_uri,
                "warehouse": storage.polaris.catalog,
                "s3_endpoint_internal": self._s3_internal,
                "s3_endpoint_external": external,
                "warehouse_bucket": self.bucket_of("warehouse"),
                "gold_buckets": self.buckets_of("gold"),
            }
        )
        self.artifacts = pulumi.Output.from_input(
            {"models_bucket": self.bucket_of("models"), "checkpoints_bucket": self.bucket_of("checkpoints")}
        )
        self.dns_records = pulumi.Output.from_input(records)
        self.vendors = self._vendor_handover()
        self.register_outputs(
            {
                "vendors": self.vendors,
                "s3_endpoint_internal": self.s3_endpoint_internal,
                "s3_endpoint_external": self.s3_endpoint_external,
                "catalog_uri": self.catalog_uri,
                "published_catalog_uri": self.published_catalog_uri,
                "warehouse": self.warehouse,
                "data": self.data,
                "artifacts": self.artifacts,
                "dns_records": self.dns_records,
            }
        )

    # ---------------------------------------------------------------------------------------------
    # Public methods for other components.

    def bucket_of(self, data_class: str) -> str:
        """The bucket of a contract class: warehouse, models or checkpoints (exactly one each, by config rule)."""
        (name,) = self.buckets_of(data_class)
        return name

    def grant(self, engine: str, to: NamespaceRef, depends_on: list[pulumi.Resource] | None = None) -> k8s.core.v1.Secret:
        """The Secret `s3-<engine>` in the namespace `to`, holding the engine's S3 keys and endpoint."""
        if engine not in engine_access():
            raise ValueError(f"unknown engine {engine!r}; engines: {', '.join(sorted(engine_access()))}")
        creds = self._credentials[engine]
        # The keys must work before a pod is handed them (`usable_after`); `depends_on` adds what else must come first.
        return self._delivered(s3_secret(engine), {ENGINE_LABEL: engine}, to, [*(depends_on or []), *creds.usable_after], {
            S3_ACCESS_KEY: creds.access_key,
            S3_SECRET_KEY: creds.secret_key,
            S3_ENDPOINT: self._s3_internal,
            S3_REGION: self._region,
        })

    def catalog_grant(self, engine: str, to: NamespaceRef, depends_on: list[pulumi.Resource] | None = None) -> k8s.core.v1.Secret:
        """The Secret `polaris-<engine>` in the namespace `to`: the engine's Polaris principal and the catalog."""
        if engine not in catalog_access():
            raise ValueError(f"engine {engine!r} has no Polaris principal; principals: {', '.join(sorted(catalog_access()))}")
        principal = self._principals[engine]
        # The namespace must exist (`_delivered`); `depends_on`: what must be done before the principal works.
        return self._delivered(polaris_secret(engine), {ENGINE_LABEL: engine}, to, depends_on, {
            POLARIS_CLIENT_ID: principal.client_id,
            POLARIS_CLIENT_SECRET: principal.client_secret,
            POLARIS_CREDENTIAL: _credential(principal),
            POLARIS_URI: self._catalog_uri,
            POLARIS_WAREHOUSE: self._config.polaris.catalog,
            POLARIS_SCOPE: "PRINCIPAL_ROLE:ALL",
        })

    def training_grants(self, team: str, to: NamespaceRef) -> list[k8s.core.v1.Secret]:
        """The Secrets `s3-training` and `polaris-training` in a namespace of `team`, holding that team's own S3 keys
        (with the prefixes it may write, `CHECKPOINT_URI` and `MODEL_URI`) and its own Polaris principal.

        Every team namespace gets the same two names, so that a job runs in any team's namespace unchanged; what
        they hold is the team's alone, and they carry the team's label beside the engine's."""
        if team not in self._team_credentials:
            raise ValueError(f"unknown team {team!r}; teams: {', '.join(self._teams)}")
        creds, (principal, setup) = self._team_credentials[team], self._team_principals[team]
        labels = {ENGINE_LABEL: TRAINING, TEAM_LABEL: team}
        # The keys must work before a pod is handed them (the attachment grants the policy; the buckets exist).
        keys = self._delivered(s3_secret(TRAINING), labels, to, creds.usable_after, {
            S3_ACCESS_KEY: creds.access_key,
            S3_SECRET_KEY: creds.secret_key,
            S3_ENDPOINT: self._s3_internal,
            S3_REGION: self._region,
            TRAINING_CHECKPOINT_URI: team_prefix(self.bucket_of("checkpoints"), team),
            TRAINING_MODEL_URI: team_prefix(self.bucket_of("models"), team),
        })
        # The principal works once the team's setup Job has given it its role and credentials.
        catalog = self._delivered(polaris_secret(TRAINING), labels, to, [setup], {
            POLARIS_CLIENT_ID: principal.client_id,
            POLARIS_CLIENT_SECRET: principal.client_secret,
            POLARIS_CREDENTIAL: _credential(principal),
            POLARIS_URI: self._catalog_uri,
            POLARIS_WAREHOUSE: self._config.polaris.catalog,
            POLARIS_SCOPE: "PRINCIPAL_ROLE:ALL",
        })
        return [keys, catalog]

    def maintenance_grants(self, to: NamespaceRef) -> list[k8s.core.v1.Secret]:
        """The Secrets `s3-iceberg-maintenance` and `polaris-iceberg-maintenance` in the namespace `to` (the maintenance one): the
        maintenance principal's S3 keys (its namespaces' locations only) and its Polaris principal (its namespaces only)."""
        if not self._maintained:
            raise ValueError("the site maintains no Iceberg namespace (compute.iceberg_maintenance); there is no maintenance principal")
        creds, principal = self._credentials[MAINTENANCE], self._principals[MAINTENANCE]
        labels = {ENGINE_LABEL: MAINTENANCE}
        return [
            # The keys must work before a pod is handed them (the attachment grants the policy; the buckets exist).
            self._delivered(s3_secret(MAINTENANCE), labels, to, creds.usable_after, {
                S3_ACCESS_KEY: creds.access_key,
                S3_SECRET_KEY: creds.secret_key,
                S3_ENDPOINT: self._s3_internal,
                S3_REGION: self._region,
            }),
            self._delivered(polaris_secret(MAINTENANCE), labels, to, [], {
                POLARIS_CLIENT_ID: principal.client_id,
                POLARIS_CLIENT_SECRET: principal.client_secret,
                POLARIS_CREDENTIAL: _credential(principal),
                POLARIS_URI: self._catalog_uri,
                POLARIS_WAREHOUSE: self._config.polaris.catalog,
                POLARIS_SCOPE: "PRINCIPAL_ROLE:ALL",
            }),
        ]

    def site_ca(self, to: NamespaceRef) -> SiteCa:
        """The site's CA bundle as the Secret `fab-site-ca` (key `ca.crt`) in a namespace, for pods that call AIStor over TLS."""
        pem = self._site.ca_bundle_pem
        if pem is None:
            return SiteCa(None)
        # Public, but Secret data are Pulumi secrets throughout.
        return SiteCa(self._delivered(SITE_CA_SECRET, {"fab.internal/trust": "site-ca"}, to, [],
                                      {SITE_CA_KEY: pulumi.Output.secret(pem)}))

    def federation_principal(self, consumer: str) -> tuple[pulumi.Output[str], pulumi.Output[str]]:
        """Client id and secret of the gold-only Polaris principal of a consumer site."""
        principal = self._principals[f"federation-{consumer}"]
        return principal.client_id, principal.client_secret

    def _delivered(self, name: str, labels: dict[str, str], to: NamespaceRef, depends_on: list[pulumi.Resource] | None,
                   data: dict[str, pulumi.Input[str]]) -> k8s.core.v1.Secret:
        """One delivered Secret per (name, cluster, namespace), however often it is asked for, once the namespace exists."""
        key = (name, to.cluster.key, to.name)
        if key not in self._grants:
            # The namespace must exist before the Secret is created in it; `depends_on` is what makes its contents work.
            self._grants[key] = k8s.core.v1.Secret(
                f"{self._name}-{name}-{to.cluster.key}-{to.name}",
                metadata={"name": name, "namespace": to.name, "labels": labels},
                type="Opaque",
                string_data=data,
                opts=pulumi.ResourceOptions(parent=self, provider=to.cluster.provider, depends_on=[to.resource, *(depends_on or [])]),
            )
        return self._grants[key]

    # ---------------------------------------------------------------------------------------------
    # Object store.

    def buckets_of(self, data_class: str) -> list[str]:
        """The buckets of a data class, by name (gold may have several)."""
        return buckets_of(self._config, data_class)

    def _object_store(self, args: StorageClusterArgs) -> list[k8s.helm.v3.Release]:
        """Nothing by default (the existing AIStor is adopted); the vendor's operator and object store when asked."""
        store = self._config.object_store
        if not store.install:
            return []
        if args.aistor_license is None or args.aistor_root_password is None:
            raise ValueError("installing the object store needs the AIStor license and root password secrets")
        child = pulumi.ResourceOptions(parent=self)
        namespaces = [
            self._namespace(AISTOR_OPERATOR_NAMESPACE),
            self._namespace(store.namespace),
        ]
        # Each chart installs into its namespace (the object store's comes after this release).
        operator = helm_release(
            f"{self._name}-aistor-operator", versions.AISTOR_OPERATOR, name="aistor-operator", namespace=AISTOR_OPERATOR_NAMESPACE,
            values={"license": args.aistor_license}, opts=pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(depends_on=namespaces)),
            adopt=self._cluster_adopt, registry=self.cluster.registry,
        )
        pool = {
            "name": "pool-0",
            "servers": store.servers,
            "volumesPerServer": store.volumes_per_server,
            "size": f"{store.volume_size_gib}Gi",
            "securityContext": {
                "runAsUser": 1000, "runAsGroup": 1000, "fsGroup": 1000, "runAsNonRoot": True,
                "fsGroupChangePolicy": "OnRootMismatch", "seccompProfile": {"type": "RuntimeDefault"},
            },
            "containerSecurityContext": {
                "runAsUser": 1000, "runAsGroup": 1000, "runAsNonRoot": True, "allowPrivilegeEscalation": False,
                "capabilities": {"drop": ["ALL"]}, "seccompProfile": {"type": "RuntimeDefault"},
            },
        }
        if store.storage_class:
            pool["storageClassName"] = store.storage_class
        objectstore = helm_release(
            f"{self._name}-aistor-objectstore", versions.AISTOR_OBJECTSTORE, name=names.OBJECT_STORE_RELEASE(store.name), namespace=store.namespace,
            values={
                "objectStore": {"name": store.name, "pools": [pool], "services": {"minio": {"name": names.OBJECT_STORE_SERVICE(store.name)}}},
                "secrets": {"name": names.OBJECT_STORE_SECRET(store.name), "accessKey": store.root_user, "secretKey": args.aistor_root_password},
            },
            # The object store holds every byte of the site: never uninstalled by a stack change. The operator's chart
            # installs the CRDs of the object store chart's objects, and the operator runs the pods this release waits for.
            opts=pulumi.ResourceOptions.merge(
                child, pulumi.ResourceOptions(depends_on=[operator], protect=True, retain_on_delete=True)
            ),
            adopt=self._cluster_adopt, registry=self.cluster.registry,
        )
        return [operator, objectstore]

    def _namespace(self, name: str, labels: dict[str, str] | None = None) -> k8s.core.v1.Namespace:
        return namespace(f"{self._name}-ns-{name}", name, pulumi.ResourceOptions(parent=self), labels=labels, adopt=self._cluster_adopt,
                         registry=self.cluster.registry)

    def _catalog_uri_of_clients(self, network: CrossClusterNetwork, clients: tuple[str, ...]) -> pulumi.Output[str]:
        """The catalog URI the site's clients call. Under its cluster-local name it resolves only once the client's
        cluster repeats Polaris's Service, so the URI carries those Services: whatever takes it as an input waits for
        them (their URNs are known in a preview, so the value stays known)."""
        if self.polaris_global_service is None:
            return pulumi.Output.from_input(self._catalog_uri)
        repeated = network.consume_global_service(self.polaris_global_service, list(clients))
        uri = self._catalog_uri
        return pulumi.Output.all(*(service.urn for _, service in sorted(repeated.items()))).apply(lambda _: uri)

    def _lb_service(self, network: CrossClusterNetwork, name: str, namespace: str, pool: str, vip: Any, hostname: str,
                    port: tuple[str, int], selector: dict[str, str], depends_on: list[pulumi.Resource],
                    annotations: dict[str, str] | None = None) -> k8s.core.v1.Service:
        """A LoadBalancer Service at a fixed VIP of `pool`, published as `hostname`; `port` is (port name, number), pods
        listen on the same; `annotations` are added (a global service's)."""
        port_name, number = port
        return k8s.core.v1.Service(
            f"{self._name}-svc-{name}",
            metadata={
                "name": name,
                "namespace": namespace,
                "labels": network.lb_service_labels(self._cluster_key, pool),
                # The name clients use (a record of `dns_records`): external-dns publishes it where it runs, and the
                # policy pack reads it to know which URIs reach this endpoint.
                "annotations": {"lbipam.cilium.io/ips": str(vip), HOSTNAME_ANNOTATION: hostname, **(annotations or {})},
            },
            spec={
                "type": "LoadBalancer",
                # Keeps the client address, which the cross-cluster flow rules match on.
                "externalTrafficPolicy": "Local",
                "selector": selector,
                "ports": [{"name": port_name, "port": number, "targetPort": number, "protocol": "TCP"}],
            },
            # Pulumi waits for the address, which only the pool can give, and for ready endpoints; `depends_on` is the
            # namespace, or what brings it (the object store release, which also runs the S3 pods).
            opts=pulumi.ResourceOptions(parent=self, depends_on=[*depends_on, network.lb_pool(self._cluster_key, pool)]),
        )

    def _s3_services(self, network: CrossClusterNetwork) -> None:
        store, s3 = self._config.object_store, self._config.s3
        selector = store.s3_pod_labels
        port = ("s3", store.s3_port)
        domain = self._site.domain
        self._lb_service(network, "s3-internal", store.namespace, s3.internal_pool, s3.internal_vip, names.S3_HOST(domain), port,
                         selector, self.object_store)
        if s3.external_pool is not None:
            self._lb_service(network, "s3-external", store.namespace, s3.external_pool, s3.external_vip, names.S3_EXTERNAL_HOST(domain),
                             port, selector, self.object_store)

    def _buckets(self) -> dict[str, minio.S3Bucket]:
        resources = {}
        for bucket, spec in sorted(self._config.buckets.items()):
            prefix = f"{self._name}-bucket-{bucket}"
            resources[bucket] = minio.S3Bucket(
                prefix,
                bucket=bucket,
                acl="private",
                force_destroy=False,
                # Buckets hold the fab's data: protected, and kept if ever removed from the stack. Created through the
                # store's S3 API: after a store the program installs, and once the name check found the name free.
                opts=pulumi.ResourceOptions.merge(
                    pulumi.ResourceOptions(parent=self, protect=True, retain_on_delete=True, depends_on=[*self.object_store, *guard(self._names_free)]),
                    adopted(self._adopt.claims("bucket", bucket), bucket),
                ),
            )
            # Versioning, lifecycle and tags are set on the bucket (named as a plain string), which must exist.
            child = pulumi.ResourceOptions(parent=self, depends_on=[resources[bucket]])
            if spec.versioned:
                minio.S3BucketVersioning(
                    f"{prefix}-versioning",
                    bucket=bucket,
                    versioning_configuration=minio.S3BucketVersioningVersioningConfigurationArgs(status="Enabled"),
                    opts=pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(retain_on_delete=True)),
                )
            rules = lifecycle_rules(spec)
            if rules:
                minio.IlmPolicy(f"{prefix}-lifecycle", bucket=bucket, rules=rules, opts=child)
            BucketTags(f"{prefix}-tags", bucket=bucket, tags=bucket_tags(self._site.name, spec, self._replicated),
                       endpoint=self.admin_endpoint, opts=child)
        return resources

    def minio_names_guard(self, logical: str, users: list[str], policies: list[str], buckets: list[str],
                          opts: pulumi.ResourceOptions) -> MinioNamesFree | None:
        """A check, at preview and before any create, that none of these MinIO names exists unless adopted.

        None when the program installs the object store: a store it creates holds nothing it did not put
        there (and it does not exist yet when the first preview runs the check).
        """
        if self._config.object_store.install:
            return None
        adopt = self._adopt
        declared = {"users": adopt.minio_users, "policies": adopt.minio_policies, "buckets": adopt.buckets}
        return MinioNamesFree(
            logical,
            names={"users": users, "policies": policies, "buckets": buckets},
            adopted={field: [n for n in names if n in declared[field]]
                     for field, names in (("users", users), ("policies", policies), ("buckets", buckets))},
            endpoint=self.admin_endpoint,
            opts=opts,
        )

    def _minio_identity(self, opts: pulumi.ResourceOptions, kind: str, name: str,
                        names_free: MinioNamesFree | None) -> pulumi.ResourceOptions:
        """A MinIO user or policy: imported when adopted, else created only once the guard found its name free."""
        guarded = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=guard(names_free)))
        return pulumi.ResourceOptions.merge(guarded, adopted(self._adopt.claims(kind, name), name))

    def _minio_principal(self, prefix: str, name: str, document: dict[str, Any], tags: dict[str, str], buckets: list[str],
                         names_free: MinioNamesFree | None) -> _Credentials:
        """A MinIO policy `name` with `document`, a user of that name holding it, and a service account for its keys.

        A policy is a document naming buckets by ARN; MinIO does not need them to exist. The user, its policy and
        its keys are created side by side, and the Secret that delivers the keys waits for the attachment and the
        buckets (`usable_after`), so keys never reach a pod before they work. The attachment names both by the
        program's names, so that the policy pack reads who holds which policy even in a first preview.
        """
        child = pulumi.ResourceOptions(parent=self)
        policy = minio.IamPolicy(
            f"{prefix}-policy", name=name, policy=json.dumps(document, sort_keys=True),
            opts=self._minio_identity(child, "minio_policy", name, names_free),
        )
        user = minio.IamUser(
            f"{prefix}-user",
            name=name,
            tags={**tags, "fab.internal/site": self._site.name},
            opts=self._minio_identity(pulumi.ResourceOptions(parent=self, additional_secret_outputs=["secret"]), "minio_user", name,
                                      names_free),
        )
        # MinIO attaches only an existing policy to an existing user, both named here as plain strings.
        attachment = minio.IamUserPolicyAttachment(
            f"{prefix}-policy-attachment", user_name=name, policy_name=name,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[user, policy]),
        )
        account = minio.IamServiceAccount(
            f"{prefix}-keys",
            target_user=user.name,
            opts=pulumi.ResourceOptions(parent=self, additional_secret_outputs=["secret_key"]),
        )
        return _Credentials(
            access_key=account.access_key, secret_key=pulumi.Output.secret(account.secret_key),
            usable_after=[attachment, *(self.bucket_resources[b] for b in sorted(buckets))],
        )

    def _engine_access(self) -> None:
        """Per engine: a policy with exactly its buckets, a user holding it, and a service account for its keys."""
        for engine in sorted(engine_access()):
            read, read_write = engine_buckets(self._config.buckets, engine, self._replicated)
            read = [b for b in read if b not in read_write]
            document = policy_document(read, read_write)
            if engine == REPLICATION and self.replicated_models:
                # Of the models bucket, only the served models' weights that the copy jobs send (`replicated_models`).
                document = replication_policy_document(read, self.bucket_of("models"), self.replicated_models)
            self._credentials[engine] = self._minio_principal(
                f"{self._name}-{engine}", f"fab-{engine}", document, {ENGINE_LABEL: engine},
                [*read, *read_write], self._names_free,
            )

    def _team_access(self) -> None:
        """Per training team: a policy that reads the training data and reaches the checkpoint and model buckets only under
        the team's prefix, a user holding it and its keys, each named after the team (adding a team adds, and changes
        nothing another team has, not even the name check, which is the team's own)."""
        read, own = engine_buckets(self._config.buckets, TRAINING)
        shared = tuple(f"{self.bucket_of('models')}/{path.strip('/')}/" for path in self._served_weights)
        for team in self._teams:
            name, prefix = team_principal(team), f"{self._name}-{TRAINING}-{team}"
            names_free = self.minio_names_guard(
                f"{prefix}-names-free", users=[name], policies=[name], buckets=[],
                # The check calls the store's admin API (an empty wait: an installed store has no check).
                opts=pulumi.ResourceOptions(parent=self, depends_on=self.object_store),
            )
            self._team_credentials[team] = self._minio_principal(
                prefix, name, team_policy_document(team, read, own, shared), {ENGINE_LABEL: TRAINING, TEAM_LABEL: team},
                [*read, *own], names_free,
            )

    def _maintenance_access(self) -> None:
        """The maintenance principal's MinIO policy (its namespaces' locations: list, read, write, delete), user and keys,
        behind a name check of their own (adding maintenance changes nothing of the engines' check)."""
        name, prefix = f"fab-{MAINTENANCE}", f"{self._name}-{MAINTENANCE}"
        locations = [namespace_location(self._config, ns) for ns in self._maintained]
        names_free = self.minio_names_guard(
            f"{prefix}-names-free", users=[name], policies=[name], buckets=[],
            # The check calls the store's admin API (an empty wait: an installed store has no check).
            opts=pulumi.ResourceOptions(parent=self, depends_on=self.object_store),
        )
        self._credentials[MAINTENANCE] = self._minio_principal(
            prefix, name, maintenance_policy_document(locations), {ENGINE_LABEL: MAINTENANCE},
            sorted({bucket for bucket, _ in locations}), names_free,
        )

    def _metrics_token(self) -> None:
        """A principal that may read AIStor's metrics and nothing else, and its bearer token (the JWT `mc admin prometheus
        generate` makes) as the Secret the PodMonitor `aistor` presents (components/monitors.py), beside the site CA the
        scrape verifies AIStor's certificate with."""
        store = self._config.object_store
        names_free = self.minio_names_guard(
            f"{self._name}-metrics-names-free", users=[METRICS_PRINCIPAL], policies=[METRICS_PRINCIPAL], buckets=[],
            # The check calls the store's admin API (an empty wait: an installed store has no check).
            opts=pulumi.ResourceOptions(parent=self, depends_on=self.object_store),
        )
        credentials = self._minio_principal(
            f"{self._name}-metrics", METRICS_PRINCIPAL, METRICS_POLICY, {ENGINE_LABEL: METRICS_ENGINE}, [], names_free,
        )
        # The object store's namespace exists once its release does, or already (an adopted AIStor).
        here = NamespaceRef(self.cluster, store.namespace, self.object_store[-1] if self.object_store else names_free)
        # The token must work before the monitor presents it (its keys' policy attached).
        token = self._delivered(
            AISTOR_METRICS_TOKEN_SECRET, {ENGINE_LABEL: METRICS_ENGINE}, here, credentials.usable_after,
            {AISTOR_METRICS_TOKEN_KEY: pulumi.Output.all(credentials.access_key, credentials.secret_key).apply(
                lambda keys: pulumi.Output.secret(metrics_token(*keys)))},
        )
        self.metrics_credentials = [token, *self.site_ca(here).resources()]

    # ---------------------------------------------------------------------------------------------
    # Polaris on CloudNativePG.

    def _random_secret(self, name: str) -> pulumi.Output[str]:
        return random_secret(f"{self._name}-{name}", 40, pulumi.ResourceOptions(parent=self))

    def _random_id(self, name: str) -> pulumi.Output[str]:
        return random.RandomId(f"{self._name}-{name}", byte_length=8, opts=pulumi.ResourceOptions(parent=self)).hex

    def _opaque_secret(self, name: str, namespace: str, data: dict[str, pulumi.Input[str]],
                       depends_on: list[pulumi.Resource]) -> k8s.core.v1.Secret:
        return k8s.core.v1.Secret(
            f"{self._name}-secret-{name}",
            metadata={"name": name, "namespace": namespace},
            type="Opaque",
            string_data=data,
            # The namespace must exist (directly, or through the root Secret in it); a vendor's Secret also holds keys
            # that must work before operators hand them over.
            opts=pulumi.ResourceOptions(parent=self, depends_on=depends_on),
        )

    def _polaris(self, network: CrossClusterNetwork) -> None:
        polaris = self._config.polaris
        ns = polaris.namespace
        # Polaris' workloads run as the polaris engine; the database's backups as postgres-backup (its own label).
        ns_resource = self._namespace(ns, labels={ENGINE_LABEL: "polaris"})
        cnpg_ns = self._namespace(CNPG_NAMESPACE)
        # The chart installs into its namespace.
        operator = helm_release(
            f"{self._name}-cnpg", versions.CLOUDNATIVE_PG, name="cnpg", namespace=CNPG_NAMESPACE, values={"replicaCount": 2},
            opts=pulumi.ResourceOptions(parent=self, depends_on=[cnpg_ns]), adopt=self._cluster_adopt,
            registry=self.cluster.registry,
        )
        here = NamespaceRef(self.cluster, ns, ns_resource)
        backup_creds = self.grant(POSTGRES_BACKUP, here)
        ca = self.site_ca(here)
        database = self._postgres_cluster(ns, backup_creds, ca, [operator, ns_resource])

        root_id, root_secret = self._random_id("polaris-root-id"), self._random_secret("polaris-root-secret")
        root = self._opaque_secret("polaris-root", ns, {"client-id": root_id, "client-secret": root_secret}, [ns_resource])
        signing_key = tls.PrivateKey(f"{self._name}-polaris-token-key", algorithm="RSA", rsa_bits=4096, opts=pulumi.ResourceOptions(parent=self))
        token_broker = self._opaque_secret(
            "polaris-token-broker", ns,
            {"private.pem": pulumi.Output.secret(signing_key.private_key_pem_pkcs8), "public.pem": signing_key.public_key_pem},
            [ns_resource],
        )
        storage_creds = self.grant("polaris", here)
        bootstrap = self._polaris_bootstrap_job(ns, root, database)
        trust = self._polaris_trust(ns, ns_resource)

        # Polaris serves the realm the bootstrap Job created (schema and root principal), and its pods read the token
        # broker's keys and their S3 keys from these Secrets.
        release = helm_release(
            f"{self._name}-polaris", versions.POLARIS, name="polaris", namespace=ns, values=self._polaris_values(),
            opts=pulumi.ResourceOptions(parent=self, depends_on=[bootstrap, token_broker, storage_creds, *trust]),
            adopt=self._cluster_adopt, registry=self.cluster.registry,
        )
        # The chart's own ClusterIP Service is `polaris`; this is the cross-cluster endpoint (and, with global services, the
        # ClusterMesh global service the client clusters repeat).
        global_service = self.polaris_global_service
        self._lb_service(network, POLARIS_SERVICE, ns, polaris.pool, polaris.vip, names.POLARIS_HOST(self._site.domain),
                         # Its namespace only: a Service needs no ready pods (it routes to them as they become ready).
                         (POLARIS_PORT_NAME, polaris.port), POLARIS_POD_LABELS, [ns_resource],
                         annotations=global_service.backend_annotations() if global_service else None)

        for engine in sorted(self._principal_engines):
            self._principals[engine] = _Principal(
                client_id=self._random_id(f"polaris-{engine}-id"), client_secret=self._random_secret(f"polaris-{engine}-secret")
            )
        setup = self._polaris_setup_job(ns, ns_resource, root, release)
        for team in self._teams:
            self._team_principals[team] = self._team_principal(team, ns, root, setup)
        for vendor in sorted(self._vendor_credentials):
            self._vendor_principals[vendor] = self._vendor_principal(vendor, ns, root, setup)

    def _postgres_cluster(self, ns: str, backup_creds: k8s.core.v1.Secret, ca: SiteCa,
                          depends_on: list[pulumi.Resource]) -> k8s.apiextensions.CustomResource:
        postgres = self._config.polaris.postgres
        storage: dict[str, Any] = {"size": f"{postgres.storage_gib}Gi"}
        if postgres.storage_class:
            storage["storageClass"] = postgres.storage_class
        s3_key = lambda key: {"name": s3_secret(POSTGRES_BACKUP), "key": key}
        store: dict[str, Any] = {
            "destinationPath": f"s3://{postgres.backup_bucket}/{POLARIS_DB}",
            "endpointURL": self._s3_internal,
            "s3Credentials": {
                "accessKeyId": s3_key(S3_ACCESS_KEY),
                "secretAccessKey": s3_key(S3_SECRET_KEY),
                "region": s3_key(S3_REGION),
            },
            "wal": {"compression": "gzip"},
            "data": {"compression": "gzip"},
        }
        if ca.secret:  # barman-cloud verifies AIStor's certificate against the site CA
            store["endpointCA"] = {"name": SITE_CA_SECRET, "key": SITE_CA_KEY}
        cluster = k8s.apiextensions.CustomResource(
            f"{self._name}-{POLARIS_DB}",
            api_version=versions.CNPG_API,
            kind="Cluster",
            # Reads the backup keys: CloudNativePG's backups act as the postgres-backup principal.
            metadata={"name": POLARIS_DB, "namespace": ns, "labels": {ENGINE_LABEL: POSTGRES_BACKUP}},
            spec={
                "description": "Polaris metastore",
                "instances": postgres.instances,
                "primaryUpdateStrategy": "unsupervised",
                "enableSuperuserAccess": False,
                "bootstrap": {"initdb": {"database": "polaris", "owner": "polaris"}},
                "storage": storage,
                "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"cpu": "2", "memory": "2Gi"}},
                "affinity": {"enablePodAntiAffinity": True, "topologyKey": "kubernetes.io/hostname"},
                "backup": {"retentionPolicy": f"{postgres.backup_retention_days}d", "barmanObjectStore": store},
                **postgres_image(self.cluster.registry),
            },
            # The catalog's database: protected, and its data kept even if the resource leaves the stack. The operator's
            # chart installs the Cluster CRD and runs its webhook; the namespace exists; WAL archiving reads the backup
            # keys (which must work) and the site CA from the first instance on.
            opts=pulumi.ResourceOptions(parent=self, depends_on=[*depends_on, backup_creds, *ca.resources()], protect=True, retain_on_delete=True),
        )
        k8s.apiextensions.CustomResource(
            f"{self._name}-{POLARIS_DB}-daily",
            api_version=versions.CNPG_API,
            kind="ScheduledBackup",
            metadata={"name": f"{POLARIS_DB}-daily", "namespace": ns},
            spec={"schedule": "0 0 2 * * *", "backupOwnerReference": "self", "cluster": {"name": POLARIS_DB}, "immediate": True},
            # It names the Cluster, and `immediate` starts a backup of it at once.
            opts=pulumi.ResourceOptions(parent=self, depends_on=[cluster]),
        )
        return cluster

    def _db_env(self) -> list[dict[str, Any]]:
        app = f"{POLARIS_DB}-app"  # the Secret CloudNativePG creates for the database owner
        return [
            {"name": "POLARIS_PERSISTENCE_TYPE", "value": "relational-jdbc"},
            _secret_env("QUARKUS_DATASOURCE_USERNAME", app, "username"),
            _secret_env("QUARKUS_DATASOURCE_PASSWORD", app, "password"),
            _secret_env("QUARKUS_DATASOURCE_JDBC_URL", app, "jdbc-uri"),
        ]

    def _polaris_bootstrap_job(self, ns: str, root: k8s.core.v1.Secret, database: pulumi.Resource) -> k8s.batch.v1.Job:
        """Creates the realm's schema and root principal once; the admin tool's bootstrap is idempotent."""
        realm = self._config.polaris.realm
        env = [*self._db_env(), _secret_env("ROOT_CLIENT_ID", "polaris-root", "client-id"),
               _secret_env("ROOT_CLIENT_SECRET", "polaris-root", "client-secret")]
        container = restricted_container(
            "bootstrap", self.cluster.registry.image(versions.POLARIS_ADMIN_TOOL_IMAGE), 10000,
            args=["bootstrap", "-r", realm, "-c", f"{realm},$(ROOT_CLIENT_ID),$(ROOT_CLIENT_SECRET)"],
            env=env, volumeMounts=[{"name": "tmp", "mountPath": "/tmp"}],
        )
        # The Job reads the root principal's Secret and connects to the database with the app Secret CloudNativePG makes for it.
        return self._job("polaris-bootstrap", "polaris-bootstrap", ns, container, [{"name": "tmp", "emptyDir": {}}], [root, database])

    def _job(self, role: str, name: str, ns: str, container: dict[str, Any], volumes: list[dict[str, Any]],
             depends_on: list[pulumi.Resource]) -> k8s.batch.v1.Job:
        """A Polaris run-once Job; `role` names it in the stack, `name` in the cluster."""
        return run_once_job(
            f"{self._name}-job-{role}", name=name, namespace=ns, containers=[container], volumes=volumes,
            labels={"app.kubernetes.io/name": role, "app.kubernetes.io/part-of": "polaris"},
            registry=self.cluster.registry,
            # What the pod reads and calls: each caller says.
            opts=pulumi.ResourceOptions(parent=self, depends_on=depends_on),
        )

    def _polaris_trust(self, ns: str, ns_resource: pulumi.Resource) -> list[k8s.core.v1.ConfigMap]:
        """The ConfigMap `polaris-site-ca`: the JVM trust store (public CAs and the site's) that Polaris' server verifies
        the object store with, where the site has its own CA; nothing without one."""
        pem = self._site.ca_bundle_pem
        if pem is None:
            return []
        store = base64.b64encode(public_and_site_store(pem)).decode()
        return [k8s.core.v1.ConfigMap(
            f"{self._name}-{POLARIS_SITE_CA}", metadata={"name": POLARIS_SITE_CA, "namespace": ns},
            binary_data={JVM_TRUST_STORE_KEY: store},
            # The namespace must exist before the ConfigMap is created in it.
            opts=pulumi.ResourceOptions(parent=self, depends_on=[ns_resource]),
        )]

    def _polaris_trust_values(self) -> dict[str, Any]:
        """Polaris' server reads and writes table metadata on S3 (Iceberg's S3FileIO and STS, AWS SDK v2), which verifies
        the object store with the JVM's default trust: with the site's own CA, `JAVA_TOOL_OPTIONS` (which the JVM reads
        whatever the image's launcher, run-java.sh in apache/polaris) makes the mounted store of the public CAs and the
        site's that trust."""
        if self._site.ca_bundle_pem is None:
            return {"extraEnv": []}
        return {
            "extraEnv": [{"name": "JAVA_TOOL_OPTIONS", "value": " ".join(jvm_trust_options(POLARIS_TRUST_STORE))}],
            "extraVolumes": [{"name": "site-ca-jvm", "configMap": {"name": POLARIS_SITE_CA}}],
            "extraVolumeMounts": [{"name": "site-ca-jvm", "mountPath": POLARIS_TRUST_STORE.rsplit("/", 1)[0], "readOnly": True}],
        }

    def _polaris_values(self) -> dict[str, Any]:
        polaris = self._config.polaris
        image, tag = versions.POLARIS_SERVER_IMAGE.rsplit(":", 1)
        trust = self._polaris_trust_values()
        return {
            "replicaCount": polaris.replicas,
            "image": {"repository": image, "tag": tag},
            "realmContext": {"realms": [polaris.realm]},
            "persistence": {
                "type": "relational-jdbc",
                "relationalJdbc": {"secret": {"name": f"{POLARIS_DB}-app", "username": "username", "password": "password", "jdbcUrl": "jdbc-uri"}},
            },
            "authentication": {
                "type": "internal",
                # One signing key for every replica: tokens issued by one pod verify on the others.
                "tokenBroker": {
                    "type": "rsa-key-pair",
                    "secret": {"name": "polaris-token-broker", "rsaKeyPair": {"publicKey": "public.pem", "privateKey": "private.pem"}},
                },
            },
            "storage": {"secret": {"name": "s3-polaris", "awsAccessKeyId": S3_ACCESS_KEY, "awsSecretAccessKey": S3_SECRET_KEY}},
            # Table commits authorized per metadata update (Polaris 1.7.0's default, pinned): the maintenance principal
            # commits snapshots without the privileges of schema, location or property changes (MAINTENANCE_PRIVILEGES).
            "features": {"SUPPORTED_CATALOG_STORAGE_TYPES": ["S3"], "ENABLE_FINE_GRAINED_UPDATE_TABLE_PRIVILEGES": True},
            "extraEnv": [{"name": S3_REGION, "value": self._region}, *trust.pop("extraEnv")],
            **trust,
            "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"cpu": "2", "memory": "2Gi"}},
            "serviceMonitor": {"enabled": False},
        }

    def _setup_env(self, ns: str) -> list[dict[str, Any]]:
        """What every Polaris setup Job is told: where Polaris is, the realm, and the root principal to act as."""
        polaris = self._config.polaris
        return [
            {"name": "PYTHONDONTWRITEBYTECODE", "value": "1"},
            {"name": "POLARIS_URL", "value": f"http://polaris.{ns}.svc:{polaris.port}"},
            {"name": "POLARIS_REALM", "value": polaris.realm},
            _secret_env("ROOT_CLIENT_ID", "polaris-root", "client-id"),
            _secret_env("ROOT_CLIENT_SECRET", "polaris-root", "client-secret"),
        ]

    def _polaris_setup_job(self, ns: str, ns_resource: pulumi.Resource, root: k8s.core.v1.Secret,
                           release: pulumi.Resource) -> k8s.batch.v1.Job:
        """Applies `setup_plan()` through the management API; a changed plan or script is a new Job."""
        plan = json.dumps(polaris_setup_plan(self._config, self._s3_internal, self._region, self._principal_engines,
                                             self._maintained), indent=2, sort_keys=True)
        script = Path(__file__).with_name("polaris_setup.py").read_text()
        digest = hashlib.sha256((plan + script).encode()).hexdigest()[:10]
        config = k8s.core.v1.ConfigMap(
            f"{self._name}-polaris-setup",
            metadata={"name": "polaris-setup", "namespace": ns},
            data={"plan.json": plan, "polaris_setup.py": script},
            # The namespace must exist before the ConfigMap is created in it.
            opts=pulumi.ResourceOptions(parent=self, depends_on=[ns_resource]),
        )
        principals = self._opaque_secret(
            "polaris-principals", ns,
            {
                f"{engine.upper().replace('-', '_')}_{part}": value
                for engine, principal in sorted(self._principals.items())
                for part, value in (("CLIENT_ID", principal.client_id), ("CLIENT_SECRET", principal.client_secret))
            },
            [root],
        )
        env = self._setup_env(ns)
        container = restricted_container(
            "setup", self.cluster.registry.image(versions.SETUP_IMAGE), 65532,
            command=["python", "/etc/polaris-setup/polaris_setup.py"],
            env=[*env[:1], {"name": "PLAN", "value": "/etc/polaris-setup/plan.json"}, *env[1:]],
            envFrom=[{"secretRef": {"name": "polaris-principals"}}],
            volumeMounts=[{"name": "setup", "mountPath": "/etc/polaris-setup", "readOnly": True}],
        )
        # The pod mounts the ConfigMap and reads the principals' Secret; Polaris' management API must be up: the Job calls it.
        return self._job("polaris-setup", f"polaris-setup-{digest}", ns, container,
                         [{"name": "setup", "configMap": {"name": "polaris-setup"}}], [config, principals, release])

    def _team_principal(self, team: str, ns: str, root: k8s.core.v1.Secret,
                        setup: k8s.batch.v1.Job) -> tuple[_Principal, k8s.batch.v1.Job]:
        """A training team's Polaris principal and the Job that creates it, with its own principal role holding the
        training catalog role, once the site's setup Job made the catalog and its roles. Its own Job (the site's setup
        script, its own plan inline): adding a team changes nothing of the site's setup or another team's."""
        principal = _Principal(
            client_id=self._random_id(f"polaris-{TRAINING}-{team}-id"),
            client_secret=self._random_secret(f"polaris-{TRAINING}-{team}-secret"),
        )
        name = names.TEAM_POLARIS_SETUP(team)
        credentials = self._opaque_secret(name, ns, {"client-id": principal.client_id, "client-secret": principal.client_secret}, [root])
        plan = json.dumps(team_setup_plan(self._config.polaris.catalog, team), sort_keys=True)
        container = restricted_container(
            "setup", self.cluster.registry.image(versions.SETUP_IMAGE), 65532,
            command=["python", "/etc/polaris-setup/polaris_setup.py"],
            env=[
                *self._setup_env(ns), {"name": "PLAN_JSON", "value": plan},
                _secret_env(f"{TEAM_CREDENTIALS_ENV}_CLIENT_ID", name, "client-id"),
                _secret_env(f"{TEAM_CREDENTIALS_ENV}_CLIENT_SECRET", name, "client-secret"),
            ],
            volumeMounts=[{"name": "setup", "mountPath": "/etc/polaris-setup", "readOnly": True}],
        )
        # The pod reads the team's credentials Secret; the catalog and roles must exist (the site's setup Job makes them).
        job = self._job(name, name, ns, container, [{"name": "setup", "configMap": {"name": "polaris-setup"}}], [credentials, setup])
        return principal, job

    # ---------------------------------------------------------------------------------------------
    # Equipment vendors (storage.vendors; components/vendor_access.py).

    def _vendor_access(self) -> None:
        """Per vendor: a MinIO policy that lists and reads only its tables' folders in the gold bucket, a user holding it
        and its keys, each named after the vendor (its own name check: adding a vendor changes nothing another has)."""
        gold = self._config.gold_location()
        for vendor, spec in sorted(self._config.vendors.items()):
            if gold is None:  # refused by the vendor rules
                continue
            name, prefix = names.VENDOR_PRINCIPAL(vendor), f"{self._name}-vendor-{vendor}"
            names_free = self.minio_names_guard(
                f"{prefix}-names-free", users=[name], policies=[name], buckets=[],
                # The check calls the store's admin API (an empty wait: an installed store has no check).
                opts=pulumi.ResourceOptions(parent=self, depends_on=self.object_store),
            )
            self._vendor_credentials[vendor] = self._minio_principal(
                prefix, name, vendor_policy_document(gold, spec), {ENGINE_LABEL: "vendor", "fab.internal/vendor": vendor},
                [gold], names_free,
            )

    def _vendor_principal(self, vendor: str, ns: str, root: k8s.core.v1.Secret, setup: k8s.batch.v1.Job) -> _Principal:
        """A vendor's Polaris principal and the Job that creates it and sets its grants to exactly those configured, once
        the site's setup Job made the catalog (the site's setup script, the vendor's plan inline). The Secret
        `vendor-<name>` holds its client and its S3 keys, for operators to hand over."""
        principal = _Principal(
            client_id=self._random_id(f"polaris-vendor-{vendor}-id"),
            client_secret=self._random_secret(f"polaris-vendor-{vendor}-secret"),
        )
        keys = self._vendor_credentials[vendor]
        secret_name = names.VENDOR_SECRET(vendor)
        credentials = self._opaque_secret(secret_name, ns, {
            VENDOR_CLIENT_ID: principal.client_id, VENDOR_CLIENT_SECRET: principal.client_secret,
            VENDOR_ACCESS_KEY: keys.access_key, VENDOR_SECRET_KEY: keys.secret_key,
        }, [root, *keys.usable_after])
        job_name = names.VENDOR_POLARIS_SETUP(vendor)
        plan = json.dumps(vendor_setup_plan(self._config.polaris.catalog, vendor, self._config.vendors[vendor]), sort_keys=True)
        container = restricted_container(
            "setup", self.cluster.registry.image(versions.SETUP_IMAGE), 65532,
            command=["python", "/etc/polaris-setup/polaris_setup.py"],
            env=[
                *self._setup_env(ns), {"name": "PLAN_JSON", "value": plan},
                _secret_env(f"{VENDOR_CREDENTIALS_ENV}_CLIENT_ID", secret_name, VENDOR_CLIENT_ID),
                _secret_env(f"{VENDOR_CREDENTIALS_ENV}_CLIENT_SECRET", secret_name, VENDOR_CLIENT_SECRET),
            ],
            volumeMounts=[{"name": "setup", "mountPath": "/etc/polaris-setup", "readOnly": True}],
        )
        # The pod reads the vendor's Secret; the catalog must exist (the site's setup Job makes it).
        self._job(job_name, job_name, ns, container, [{"name": "setup", "configMap": {"name": "polaris-setup"}}], [credentials, setup])
        return principal

    def _vendor_handover(self) -> pulumi.Output[dict[str, Any]]:
        """What each vendor is given, as one Pulumi secret (`pulumi stack output vendors --show-secrets`).

        Polaris returns the catalog's S3 endpoint (`storageConfigInfo.endpoint`, the internal name `s3.<domain>`) in every
        table's config, and Iceberg clients let it override their own `s3.endpoint`; so the vendor keeps that name and
        resolves it to the external S3 VIP (`s3_address`): the same object store pods, port and certificate."""
        domain, polaris = self._site.domain, self._config.polaris
        handover = {
            vendor: {
                "catalog_uri": f"https://{names.CATALOG_HOST(domain)}/api/catalog",
                "warehouse": polaris.catalog,
                "client_id": self._vendor_principals[vendor].client_id,
                "client_secret": self._vendor_principals[vendor].client_secret,
                "s3_endpoint": self._s3_internal,
                "s3_address": str(self._config.s3.external_vip),
                "s3_access_key": self._vendor_credentials[vendor].access_key,
                "s3_secret_key": self._vendor_credentials[vendor].secret_key,
                "ca_bundle": self._site.ca_bundle_pem,
                "tables": list(spec.tables),
                "views": list(spec.views),
            }
            for vendor, spec in sorted(self._config.vendors.items()) if vendor in self._vendor_principals
        }
        return pulumi.Output.secret(handover)
