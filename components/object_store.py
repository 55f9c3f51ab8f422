"""The object store of a StorageCluster (DESIGN 1, 2): AIStor adopted or installed, its S3 Services, the site's buckets,
and the MinIO principals (policy, user, keys) of the engines, the training teams, Iceberg maintenance, the vendors and
the metrics scrape.

`ObjectStore` creates these as children of the StorageCluster, under its names; the component hands the keys out
(`StorageCluster.grant()`). Who may do what is pure and lives in components/data_access.py.
"""

from __future__ import annotations

import json
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pulumi
import pulumi_kubernetes as k8s
import pulumi_minio as minio

from components import versions
from components.config import AdoptConfig, MinioEndpoint, StorageConfig, names
from components.constants import ENGINE_LABEL, HOSTNAME_ANNOTATION, TEAM_LABEL
from components.data_access import (
    MAINTENANCE,
    REPLICATION,
    TRAINING,
    bucket_tags,
    buckets_of,
    engine_access,
    engine_buckets,
    lifecycle_rules,
    maintenance_policy_document,
    namespace_location,
    policy_document,
    replication_policy_document,
    s3_endpoint_internal,
    team_policy_document,
    team_principal,
)
from components.kube import Adoption, adopted, helm_release, namespace
from components.minio_admin import AdminEndpoint, BucketTags, MinioNamesFree, guard
from components.providers import ClusterRef, NamespaceRef, SiteRef
from components.vendor_access import vendor_policy_document

if TYPE_CHECKING:
    from components.network import CrossClusterNetwork

AISTOR_OPERATOR_NAMESPACE = "aistor-operator"
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


@dataclass
class Credentials:
    """A MinIO principal's keys."""

    access_key: pulumi.Output[str]
    secret_key: pulumi.Output[str]
    usable_after: list[pulumi.Resource]
    """The keys work once these exist: the engine's policy attachment and its buckets."""


class ObjectStore:
    """The object store's part of a StorageCluster. Its children are the component's (`parent`), named after it (`name`),
    on the storage cluster; `install()`, `s3_services()` and `create_buckets()` make the store, its endpoints and buckets,
    the `*_access()` methods each kind of principal, whose keys they return."""

    def __init__(self, parent: pulumi.Resource, name: str, site: SiteRef, cluster: ClusterRef, config: StorageConfig,
                 admin_endpoint: MinioEndpoint, adopt: AdoptConfig):
        self.parent, self.name, self.site, self.cluster, self.config, self.adopt = parent, name, site, cluster, config, adopt
        self.region = admin_endpoint.region
        self.cluster_adopt = Adoption(adopt, cluster.key)
        self.s3_internal = s3_endpoint_internal(site.domain, config.object_store)
        """The internal S3 endpoint's URL."""
        self.admin_endpoint = AdminEndpoint(admin_endpoint.server, admin_endpoint.ssl, admin_endpoint.region, site.ca_bundle_pem)
        """The object store's admin API, for the program's own MinIO calls (bucket tags, name checks)."""
        self.releases: list[k8s.helm.v3.Release] = []
        """The operator's and the object store's releases when the program installs the store; none when adopted."""
        self.names_free: MinioNamesFree | None = None
        """The name check of the engines' MinIO users and policies and of the buckets."""
        self.bucket_resources: dict[str, minio.S3Bucket] = {}

    def bucket_of(self, data_class: str) -> str:
        """The bucket of a contract class: warehouse, models or checkpoints (exactly one each, by config check)."""
        (name,) = self.buckets_of(data_class)
        return name

    def buckets_of(self, data_class: str) -> list[str]:
        """The buckets of a data class, by name (gold may have several)."""
        return buckets_of(self.config, data_class)

    def install(self, aistor_license: pulumi.Input[str] | None, aistor_root_password: pulumi.Input[str] | None) -> None:
        """Nothing by default (the existing AIStor is adopted); the vendor's operator and object store when asked (`releases`),
        then the name check of the engines' users and policies and of the buckets (`names_free`)."""
        self.releases = self._releases(aistor_license, aistor_root_password)
        engines = [f"fab-{engine}" for engine in sorted(engine_access())]
        # The check calls the store's admin API (an empty wait: an installed store has no check).
        self.names_free = self.names_guard(
            f"{self.name}-names-free", users=engines, policies=engines, buckets=sorted(self.config.buckets),
            opts=pulumi.ResourceOptions(parent=self.parent, depends_on=self.releases),
        )

    def _releases(self, aistor_license: pulumi.Input[str] | None,
                  aistor_root_password: pulumi.Input[str] | None) -> list[k8s.helm.v3.Release]:
        store = self.config.object_store
        if not store.install:
            return []
        if aistor_license is None or aistor_root_password is None:
            raise ValueError("installing the object store needs the AIStor license and root password secrets")
        child = pulumi.ResourceOptions(parent=self.parent)
        namespaces = [
            self.namespace(AISTOR_OPERATOR_NAMESPACE),
            self.namespace(store.namespace),
        ]
        # Each chart installs into its namespace (the object store's comes after this release).
        operator = helm_release(
            f"{self.name}-aistor-operator", versions.AISTOR_OPERATOR, name="aistor-operator", namespace=AISTOR_OPERATOR_NAMESPACE,
            values={"license": aistor_license}, opts=pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(depends_on=namespaces)),
            adopt=self.cluster_adopt, registry=self.cluster.registry,
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
            f"{self.name}-aistor-objectstore", versions.AISTOR_OBJECTSTORE, name=names.OBJECT_STORE_RELEASE(store.name), namespace=store.namespace,
            values={
                "objectStore": {"name": store.name, "pools": [pool], "services": {"minio": {"name": names.OBJECT_STORE_SERVICE(store.name)}}},
                "secrets": {"name": names.OBJECT_STORE_SECRET(store.name), "accessKey": store.root_user, "secretKey": aistor_root_password},
            },
            # The object store holds every byte of the site: never uninstalled by a stack change. The operator's chart
            # installs the CRDs of the object store chart's objects, and the operator runs the pods this release waits for.
            opts=pulumi.ResourceOptions.merge(
                child, pulumi.ResourceOptions(depends_on=[operator], protect=True, retain_on_delete=True)
            ),
            adopt=self.cluster_adopt, registry=self.cluster.registry,
        )
        return [operator, objectstore]

    def namespace(self, name: str, labels: dict[str, str] | None = None) -> k8s.core.v1.Namespace:
        """A namespace on the storage cluster, a child of the component (adopted where declared)."""
        return namespace(f"{self.name}-ns-{name}", name, pulumi.ResourceOptions(parent=self.parent), labels=labels, adopt=self.cluster_adopt,
                         registry=self.cluster.registry)

    def lb_service(self, network: CrossClusterNetwork, name: str, namespace: str, pool: str, vip: Any, hostname: str,
                    port: tuple[str, int], selector: dict[str, str], depends_on: list[pulumi.Resource],
                    annotations: dict[str, str] | None = None) -> k8s.core.v1.Service:
        """A LoadBalancer Service at a fixed VIP of `pool`, published as `hostname`; `port` is (port name, number), pods
        listen on the same; `annotations` are added (a global service's)."""
        port_name, number = port
        return k8s.core.v1.Service(
            f"{self.name}-svc-{name}",
            metadata={
                "name": name,
                "namespace": namespace,
                "labels": network.lb_service_labels(self.cluster.key, pool),
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
            opts=pulumi.ResourceOptions(parent=self.parent, depends_on=[*depends_on, network.lb_pool(self.cluster.key, pool)]),
        )

    def s3_services(self, network: CrossClusterNetwork) -> None:
        """The internal S3 Service at its VIP, and the external one where an external pool is configured."""
        store, s3 = self.config.object_store, self.config.s3
        selector = store.s3_pod_labels
        port = ("s3", store.s3_port)
        domain = self.site.domain
        self.lb_service(network, "s3-internal", store.namespace, s3.internal_pool, s3.internal_vip, names.S3_HOST(domain), port,
                        selector, self.releases)
        if s3.external_pool is not None:
            self.lb_service(network, "s3-external", store.namespace, s3.external_pool, s3.external_vip, names.S3_EXTERNAL_HOST(domain),
                            port, selector, self.releases)

    def create_buckets(self, replicated: frozenset[str]) -> None:
        """The site's buckets (`bucket_resources`) with their versioning, lifecycle and tags; `replicated`: the classes
        that leave the site."""
        resources = self.bucket_resources
        for bucket, spec in sorted(self.config.buckets.items()):
            prefix = f"{self.name}-bucket-{bucket}"
            resources[bucket] = minio.S3Bucket(
                prefix,
                bucket=bucket,
                acl="private",
                force_destroy=False,
                # Buckets hold the fab's data: protected, and kept if ever removed from the stack. Created through the
                # store's S3 API: after a store the program installs, and once the name check found the name free.
                opts=pulumi.ResourceOptions.merge(
                    pulumi.ResourceOptions(parent=self.parent, protect=True, retain_on_delete=True, depends_on=[*self.releases, *guard(self.names_free)]),
                    adopted(self.adopt.claims("bucket", bucket), bucket),
                ),
            )
            # Versioning, lifecycle and tags are set on the bucket (named as a plain string), which must exist.
            child = pulumi.ResourceOptions(parent=self.parent, depends_on=[resources[bucket]])
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
            BucketTags(f"{prefix}-tags", bucket=bucket, tags=bucket_tags(self.site.name, spec, replicated),
                       endpoint=self.admin_endpoint, opts=child)

    def names_guard(self, logical: str, users: list[str], policies: list[str], buckets: list[str],
                          opts: pulumi.ResourceOptions) -> MinioNamesFree | None:
        """A check, at preview and before any create, that none of these MinIO names exists unless adopted.

        None when the program installs the object store: a store it creates holds nothing it did not put
        there (and it does not exist yet when the first preview runs the check).
        """
        if self.config.object_store.install:
            return None
        adopt = self.adopt
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
        return pulumi.ResourceOptions.merge(guarded, adopted(self.adopt.claims(kind, name), name))

    def principal(self, prefix: str, name: str, document: dict[str, Any], tags: dict[str, str], buckets: list[str],
                         names_free: MinioNamesFree | None) -> Credentials:
        """A MinIO policy `name` with `document`, a user of that name holding it, and a service account for its keys.

        A policy is a document naming buckets by ARN; MinIO does not need them to exist. The user, its policy and
        its keys are created side by side, and the Secret that delivers the keys waits for the attachment and the
        buckets (`usable_after`), so keys never reach a pod before they work. The attachment names both by the
        program's names, so that the policy pack reads who holds which policy even in a first preview.
        """
        child = pulumi.ResourceOptions(parent=self.parent)
        policy = minio.IamPolicy(
            f"{prefix}-policy", name=name, policy=json.dumps(document, sort_keys=True),
            opts=self._minio_identity(child, "minio_policy", name, names_free),
        )
        user = minio.IamUser(
            f"{prefix}-user",
            name=name,
            tags={**tags, "fab.internal/site": self.site.name},
            opts=self._minio_identity(pulumi.ResourceOptions(parent=self.parent, additional_secret_outputs=["secret"]), "minio_user", name,
                                      names_free),
        )
        # MinIO attaches only an existing policy to an existing user, both named here as plain strings.
        attachment = minio.IamUserPolicyAttachment(
            f"{prefix}-policy-attachment", user_name=name, policy_name=name,
            opts=pulumi.ResourceOptions(parent=self.parent, depends_on=[user, policy]),
        )
        account = minio.IamServiceAccount(
            f"{prefix}-keys",
            target_user=user.name,
            opts=pulumi.ResourceOptions(parent=self.parent, additional_secret_outputs=["secret_key"]),
        )
        return Credentials(
            access_key=account.access_key, secret_key=pulumi.Output.secret(account.secret_key),
            usable_after=[attachment, *(self.bucket_resources[b] for b in sorted(buckets))],
        )

    def engine_access(self, replicated: frozenset[str], replicated_models: tuple[str, ...]) -> dict[str, Credentials]:
        """Per engine: a policy with exactly its buckets, a user holding it, and a service account for its keys."""
        credentials = {}
        for engine in sorted(engine_access()):
            read, read_write = engine_buckets(self.config.buckets, engine, replicated)
            read = [b for b in read if b not in read_write]
            document = policy_document(read, read_write)
            if engine == REPLICATION and replicated_models:
                # Of the models bucket, only the served models' weights that the copy jobs send (`replicated_models`).
                document = replication_policy_document(read, self.bucket_of("models"), replicated_models)
            credentials[engine] = self.principal(
                f"{self.name}-{engine}", f"fab-{engine}", document, {ENGINE_LABEL: engine},
                [*read, *read_write], self.names_free,
            )
        return credentials

    def team_access(self, teams: list[str], served_weights: tuple[str, ...]) -> dict[str, Credentials]:
        """Per training team: a policy that reads the training data and reaches the checkpoint and model buckets only under
        the team's prefix, a user holding it and its keys, each named after the team (adding a team adds, and changes
        nothing another team has, not even the name check, which is the team's own)."""
        read, own = engine_buckets(self.config.buckets, TRAINING)
        shared = tuple(f"{self.bucket_of('models')}/{path.strip('/')}/" for path in served_weights)
        credentials = {}
        for team in teams:
            name, prefix = team_principal(team), f"{self.name}-{TRAINING}-{team}"
            names_free = self.names_guard(
                f"{prefix}-names-free", users=[name], policies=[name], buckets=[],
                # The check calls the store's admin API (an empty wait: an installed store has no check).
                opts=pulumi.ResourceOptions(parent=self.parent, depends_on=self.releases),
            )
            credentials[team] = self.principal(
                prefix, name, team_policy_document(team, read, own, shared), {ENGINE_LABEL: TRAINING, TEAM_LABEL: team},
                [*read, *own], names_free,
            )
        return credentials

    def maintenance_access(self, maintained: tuple[str, ...]) -> Credentials:
        """The maintenance principal's MinIO policy (its namespaces' locations: list, read, write, delete), user and keys,
        behind a name check of their own (adding maintenance changes nothing of the engines' check)."""
        name, prefix = f"fab-{MAINTENANCE}", f"{self.name}-{MAINTENANCE}"
        locations = [namespace_location(self.config, ns) for ns in maintained]
        names_free = self.names_guard(
            f"{prefix}-names-free", users=[name], policies=[name], buckets=[],
            # The check calls the store's admin API (an empty wait: an installed store has no check).
            opts=pulumi.ResourceOptions(parent=self.parent, depends_on=self.releases),
        )
        return self.principal(
            prefix, name, maintenance_policy_document(locations), {ENGINE_LABEL: MAINTENANCE},
            sorted({bucket for bucket, _ in locations}), names_free,
        )

    def metrics_access(self) -> tuple[Credentials, NamespaceRef]:
        """A principal that may read AIStor's metrics and nothing else (its token is made from its keys, `metrics_token`),
        and the object store's namespace, where the PodMonitor `aistor` reads the token."""
        store = self.config.object_store
        names_free = self.names_guard(
            f"{self.name}-metrics-names-free", users=[METRICS_PRINCIPAL], policies=[METRICS_PRINCIPAL], buckets=[],
            # The check calls the store's admin API (an empty wait: an installed store has no check).
            opts=pulumi.ResourceOptions(parent=self.parent, depends_on=self.releases),
        )
        credentials = self.principal(
            f"{self.name}-metrics", METRICS_PRINCIPAL, METRICS_POLICY, {ENGINE_LABEL: METRICS_ENGINE}, [], names_free,
        )
        # The object store's namespace exists once its release does, or already (an adopted AIStor).
        return credentials, NamespaceRef(self.cluster, store.namespace, self.releases[-1] if self.releases else names_free)

    def vendor_access(self) -> dict[str, Credentials]:
        """Per vendor: a MinIO policy that lists and reads only its tables' folders in the gold bucket, a user holding it
        and its keys, each named after the vendor (its own name check: adding a vendor changes nothing another has)."""
        gold = self.config.gold_location()
        credentials = {}
        for vendor, spec in sorted(self.config.vendors.items()):
            if gold is None:  # refused by the vendor rules
                continue
            name, prefix = names.VENDOR_PRINCIPAL(vendor), f"{self.name}-vendor-{vendor}"
            names_free = self.names_guard(
                f"{prefix}-names-free", users=[name], policies=[name], buckets=[],
                # The check calls the store's admin API (an empty wait: an installed store has no check).
                opts=pulumi.ResourceOptions(parent=self.parent, depends_on=self.releases),
            )
            credentials[vendor] = self.principal(
                prefix, name, vendor_policy_document(gold, spec), {ENGINE_LABEL: "vendor", "fab.internal/vendor": vendor},
                [gold], names_free,
            )
        return credentials
