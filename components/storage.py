"""StorageCluster: AIStor buckets and least-privilege access, and Polaris on Postgres as the one catalog (DESIGN 1, 2).

On the storage cluster: the object store (adopted by default, or installed from the vendor's pinned
charts), its internal and external S3 VIPs, the buckets of the site with their class, versioning,
lifecycle and tags, one MinIO policy, user and service account per engine, and Apache Polaris
backed by a CloudNativePG cluster that backs up to AIStor. Other components never copy endpoint
strings or keys: they call `grant()` / `catalog_grant()` for a Secret in their namespace and read
`catalog_uri`, `s3_endpoint_internal` and the bucket outputs.

The object store, its buckets and identities, and Polaris on its database are one resource graph (keys wait for their
policy and buckets, Polaris for its database, keys and bootstrap) under one component: this module holds the component,
what it hands out and how it delivers it; components/object_store.py creates the store, its buckets and the MinIO
principals, components/polaris.py Polaris on its database and its principals. Who may do what is pure and lives in
components/data_access.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import pulumi_minio as minio

from components.config import AdoptConfig, MinioEndpoint, PolarisConfig, StorageConfig, names
from components.constants import (
    AISTOR_METRICS_TOKEN_KEY,
    AISTOR_METRICS_TOKEN_SECRET,
    ENGINE_LABEL,
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
    SiteCa,
    polaris_secret,
    s3_secret,
)
from components.data_access import (
    MAINTENANCE,
    TRAINING,
    buckets_of,
    catalog_access,
    catalog_uri,
    catalog_uri_at,
    engine_access,
    principal_engines,
    team_prefix,
)
from components.minio_admin import MinioNamesFree
from components.network import CrossClusterNetwork, GlobalService
from components.object_store import METRICS_ENGINE, ObjectStore, metrics_token
from components.polaris import Polaris, credential
from components.providers import ClusterRef, NamespaceRef, SiteRef


def polaris_global_service(polaris: PolarisConfig) -> GlobalService:
    """Polaris's REST Service as a ClusterMesh global service, local-first (with `global_services`)."""
    return GlobalService(POLARIS_SERVICE, polaris.namespace, ((POLARIS_PORT_NAME, polaris.port),), local_first=True)


def clients_catalog_uri(domain: str, polaris: PolarisConfig, global_services: bool) -> str:
    """The catalog URI the site's own clients call (Spark's `sparkConf`, the engines' POLARIS_URI). With global services,
    Polaris's cluster-local name, pod to pod across the mesh; else its published name (its VIP), which stays for everything
    outside the clusters and other sites in any case."""
    return catalog_uri_at(polaris_global_service(polaris).host, polaris) if global_services else catalog_uri(domain, polaris)


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
        self._config, self._region = args.config, args.admin_endpoint.region
        self._maintained = tuple(sorted(set(args.maintained_namespaces)))
        self._teams = sorted(args.teams)
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
        self._store = ObjectStore(self, name, site, args.cluster, storage, args.admin_endpoint, args.adopt)
        self._s3_internal = self._store.s3_internal
        self.s3_ca_pem = site.ca_bundle_pem if store.tls else None
        """The site CA's certificates when its CA issued the internal S3 endpoint's (TLS, under the site's domain); else None."""
        self.s3_host = names.S3_HOST(site.domain)
        """The host name of the internal S3 endpoint, which its certificate names; pods that reach the object store by
        another address (the IPoIB one) resolve this name to it, so TLS still verifies."""
        self._published_catalog_uri = catalog_uri(site.domain, storage.polaris)
        self.polaris_global_service = polaris_global_service(storage.polaris) if args.network.global_services else None
        """Polaris's REST Service as a ClusterMesh global service (local-first), which the client clusters repeat; None
        without global services."""
        self._catalog_uri = clients_catalog_uri(site.domain, storage.polaris, args.network.global_services)
        self._grants: dict[tuple[str, str, str], k8s.core.v1.Secret] = {}
        self.metrics_credentials: list[pulumi.Resource] = []
        """What the AIStor monitor presents, in the object store's namespace (its token, the site CA), with `metrics`."""

        self.admin_endpoint = self._store.admin_endpoint
        """The object store's admin API, for the program's own MinIO calls (bucket tags, name checks)."""
        self._store.install(args.aistor_license, args.aistor_root_password)
        self.object_store = self._store.releases
        """The operator's and the object store's releases when the program installs the store; none when adopted."""
        self._store.s3_services(args.network)
        self._store.create_buckets(args.replicated_classes)
        self.bucket_resources = self._store.bucket_resources
        """The site's buckets, by name."""
        self._credentials = self._store.engine_access(args.replicated_classes, args.replicated_models)
        self._team_credentials = self._store.team_access(self._teams, args.served_weights)
        self._vendor_credentials = self._store.vendor_access()
        if self._maintained:
            self._credentials[MAINTENANCE] = self._store.maintenance_access(self._maintained)
        if args.metrics:
            self._metrics_token()
        self._polaris = Polaris(
            self._store, self.grant, self.site_ca, args.network, self.polaris_global_service,
            principal_engines(args.federation_consumers, maintenance=bool(self._maintained)), self._teams, self._maintained,
            self._vendor_credentials,
        )

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
        """The bucket of a contract class: warehouse, models or checkpoints (exactly one each, by config check)."""
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
        principal = self._polaris.principals[engine]
        # The namespace must exist (`_delivered`); `depends_on`: what must be done before the principal works.
        return self._delivered(polaris_secret(engine), {ENGINE_LABEL: engine}, to, depends_on, {
            POLARIS_CLIENT_ID: principal.client_id,
            POLARIS_CLIENT_SECRET: principal.client_secret,
            POLARIS_CREDENTIAL: credential(principal),
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
        creds, (principal, setup) = self._team_credentials[team], self._polaris.team_principals[team]
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
            POLARIS_CREDENTIAL: credential(principal),
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
        creds, principal = self._credentials[MAINTENANCE], self._polaris.principals[MAINTENANCE]
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
                POLARIS_CREDENTIAL: credential(principal),
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
        principal = self._polaris.principals[f"federation-{consumer}"]
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

    def buckets_of(self, data_class: str) -> list[str]:
        """The buckets of a data class, by name (gold may have several)."""
        return buckets_of(self._config, data_class)

    def minio_names_guard(self, logical: str, users: list[str], policies: list[str], buckets: list[str],
                          opts: pulumi.ResourceOptions) -> MinioNamesFree | None:
        """A check, at preview and before any create, that none of these MinIO names exists unless adopted; None when the
        program installs the object store (`ObjectStore.names_guard`)."""
        return self._store.names_guard(logical, users, policies, buckets, opts)

    def _catalog_uri_of_clients(self, network: CrossClusterNetwork, clients: tuple[str, ...]) -> pulumi.Output[str]:
        """The catalog URI the site's clients call. Under its cluster-local name it resolves only once the client's
        cluster repeats Polaris's Service, so the URI carries those Services: whatever takes it as an input waits for
        them (their URNs are known in a preview, so the value stays known)."""
        if self.polaris_global_service is None:
            return pulumi.Output.from_input(self._catalog_uri)
        repeated = network.consume_global_service(self.polaris_global_service, list(clients))
        uri = self._catalog_uri
        return pulumi.Output.all(*(service.urn for _, service in sorted(repeated.items()))).apply(lambda _: uri)

    def _metrics_token(self) -> None:
        """A principal that may read AIStor's metrics and nothing else, and its bearer token (the JWT `mc admin prometheus
        generate` makes) as the Secret the PodMonitor `aistor` presents (components/monitors.py), beside the site CA the
        scrape verifies AIStor's certificate with."""
        credentials, here = self._store.metrics_access()
        # The token must work before the monitor presents it (its keys' policy attached).
        token = self._delivered(
            AISTOR_METRICS_TOKEN_SECRET, {ENGINE_LABEL: METRICS_ENGINE}, here, credentials.usable_after,
            {AISTOR_METRICS_TOKEN_KEY: pulumi.Output.all(credentials.access_key, credentials.secret_key).apply(
                lambda keys: pulumi.Output.secret(metrics_token(*keys)))},
        )
        self.metrics_credentials = [token, *self.site_ca(here).resources()]

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
                "client_id": self._polaris.vendor_principals[vendor].client_id,
                "client_secret": self._polaris.vendor_principals[vendor].client_secret,
                "s3_endpoint": self._s3_internal,
                "s3_address": str(self._config.s3.external_vip),
                "s3_access_key": self._vendor_credentials[vendor].access_key,
                "s3_secret_key": self._vendor_credentials[vendor].secret_key,
                "ca_bundle": self._site.ca_bundle_pem,
                "tables": list(spec.tables),
                "views": list(spec.views),
            }
            for vendor, spec in sorted(self._config.vendors.items()) if vendor in self._polaris.vendor_principals
        }
        return pulumi.Output.secret(handover)
