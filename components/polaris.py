"""Apache Polaris, the site's one catalog, on a CloudNativePG database that backs up to the object store (DESIGN 1, 2).

For a StorageCluster: the CloudNativePG operator and the catalog's database, Polaris' realm bootstrap, its server with the
site's trust, its cross-cluster Service, and its principals: one per engine and federated consumer, one per training team
and one per equipment vendor, each created by a setup Job (components/polaris_setup.py) from a pure plan
(components/data_access.py, components/vendor_access.py). The component hands the principals out (`catalog_grant()`).
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pulumi
import pulumi_kubernetes as k8s
import pulumi_random as random
import pulumi_tls as tls

from components import versions
from components.config import names
from components.constants import (
    CNPG_NAMESPACE,
    ENGINE_LABEL,
    POLARIS_PORT_NAME,
    POLARIS_SERVICE,
    S3_ACCESS_KEY,
    S3_REGION,
    S3_SECRET_KEY,
    SITE_CA_KEY,
    SITE_CA_SECRET,
    SiteCa,
    s3_secret,
)
from components.data_access import TEAM_CREDENTIALS_ENV, TRAINING, polaris_setup_plan, team_setup_plan
from components.jvm_trust import JVM_TRUST_STORE_KEY, jvm_trust_options, public_and_site_store
from components.kube import helm_release, postgres_image, random_secret, restricted_container, run_once_job
from components.object_store import Credentials, ObjectStore
from components.providers import NamespaceRef
from components.vendor_access import (
    VENDOR_ACCESS_KEY,
    VENDOR_CLIENT_ID,
    VENDOR_CLIENT_SECRET,
    VENDOR_CREDENTIALS_ENV,
    VENDOR_SECRET_KEY,
    vendor_setup_plan,
)

if TYPE_CHECKING:
    from components.network import CrossClusterNetwork, GlobalService

POLARIS_POD_LABELS = {"app.kubernetes.io/name": "polaris", "app.kubernetes.io/instance": "polaris"}
POLARIS_DB = "polaris-db"
POLARIS_SITE_CA = "polaris-site-ca"
"""The ConfigMap in Polaris' namespace with its JVM's trust store, where the site has its own CA."""
POLARIS_TRUST_STORE = f"/etc/fab/site-ca/{JVM_TRUST_STORE_KEY}"
"""Where Polaris' server mounts that store."""
POSTGRES_BACKUP = "postgres-backup"
"""The principal of the catalog database's backups (PLATFORM_ACCESS)."""


def credential(principal: Principal) -> pulumi.Output[str]:
    """`<client id>:<client secret>` of a Polaris principal, a Pulumi secret (the Secrets' POLARIS_CREDENTIAL)."""
    return pulumi.Output.secret(pulumi.Output.concat(principal.client_id, ":", principal.client_secret))


def _secret_env(env_name: str, secret: str, key: str) -> dict[str, Any]:
    return {"name": env_name, "valueFrom": {"secretKeyRef": {"name": secret, "key": key}}}


@dataclass
class Principal:
    """A Polaris principal's client."""

    client_id: pulumi.Output[str]
    client_secret: pulumi.Output[str]


class Polaris:
    """Polaris on its database for a StorageCluster: its children are the component's (the object store's `parent`), named
    after it, on the storage cluster, beside the object store (`store`) that holds its tables and its database's backups;
    the component delivers its S3 keys (`grant`, `StorageCluster.grant`) and the site CA (`site_ca`,
    `StorageCluster.site_ca`) into its namespace. Everything is created at construction; `principals`, `team_principals`
    and `vendor_principals` are what the component hands out."""

    def __init__(self, store: ObjectStore, grant: Callable[[str, NamespaceRef], k8s.core.v1.Secret],
                 site_ca: Callable[[NamespaceRef], SiteCa], network: CrossClusterNetwork,
                 global_service: GlobalService | None, principal_engines: dict[str, str], teams: list[str],
                 maintained: tuple[str, ...], vendor_credentials: dict[str, Credentials]):
        self._parent, self._store, self._grant, self._site_ca = store.parent, store, grant, site_ca
        self._name, self._site, self._config, self.cluster = store.name, store.site, store.config, store.cluster
        self._region, self._s3_internal, self._cluster_adopt = store.region, store.s3_internal, store.cluster_adopt
        self._principal_engines, self._teams, self._maintained = principal_engines, teams, maintained
        self._vendor_credentials = vendor_credentials
        self.principals: dict[str, Principal] = {}
        """Per engine, federated consumer (`federation-<site>`) and maintenance: its principal."""
        self.team_principals: dict[str, tuple[Principal, k8s.batch.v1.Job]] = {}
        """Per training team: its principal, and the Job that gives it its role."""
        self.vendor_principals: dict[str, Principal] = {}
        """Per vendor: its principal."""
        self._polaris(network, global_service)

    def _random_secret(self, name: str) -> pulumi.Output[str]:
        return random_secret(f"{self._name}-{name}", 40, pulumi.ResourceOptions(parent=self._parent))

    def _random_id(self, name: str) -> pulumi.Output[str]:
        return random.RandomId(f"{self._name}-{name}", byte_length=8, opts=pulumi.ResourceOptions(parent=self._parent)).hex

    def _opaque_secret(self, name: str, namespace: str, data: dict[str, pulumi.Input[str]],
                       depends_on: list[pulumi.Resource]) -> k8s.core.v1.Secret:
        return k8s.core.v1.Secret(
            f"{self._name}-secret-{name}",
            metadata={"name": name, "namespace": namespace},
            type="Opaque",
            string_data=data,
            # The namespace must exist (directly, or through the root Secret in it); a vendor's Secret also holds keys
            # that must work before operators hand them over.
            opts=pulumi.ResourceOptions(parent=self._parent, depends_on=depends_on),
        )

    def _polaris(self, network: CrossClusterNetwork, global_service: GlobalService | None) -> None:
        polaris = self._config.polaris
        ns = polaris.namespace
        # Polaris' workloads run as the polaris engine; the database's backups as postgres-backup (its own label).
        ns_resource = self._store.namespace(ns, labels={ENGINE_LABEL: "polaris"})
        cnpg_ns = self._store.namespace(CNPG_NAMESPACE)
        # The chart installs into its namespace.
        operator = helm_release(
            f"{self._name}-cnpg", versions.CLOUDNATIVE_PG, name="cnpg", namespace=CNPG_NAMESPACE, values={"replicaCount": 2},
            opts=pulumi.ResourceOptions(parent=self._parent, depends_on=[cnpg_ns]), adopt=self._cluster_adopt,
            registry=self.cluster.registry,
        )
        here = NamespaceRef(self.cluster, ns, ns_resource)
        backup_creds = self._grant(POSTGRES_BACKUP, here)
        ca = self._site_ca(here)
        database = self._postgres_cluster(ns, backup_creds, ca, [operator, ns_resource])

        root_id, root_secret = self._random_id("polaris-root-id"), self._random_secret("polaris-root-secret")
        root = self._opaque_secret("polaris-root", ns, {"client-id": root_id, "client-secret": root_secret}, [ns_resource])
        signing_key = tls.PrivateKey(f"{self._name}-polaris-token-key", algorithm="RSA", rsa_bits=4096, opts=pulumi.ResourceOptions(parent=self._parent))
        token_broker = self._opaque_secret(
            "polaris-token-broker", ns,
            {"private.pem": pulumi.Output.secret(signing_key.private_key_pem_pkcs8), "public.pem": signing_key.public_key_pem},
            [ns_resource],
        )
        storage_creds = self._grant("polaris", here)
        bootstrap = self._polaris_bootstrap_job(ns, root, database)
        trust = self._polaris_trust(ns, ns_resource)

        # Polaris serves the realm the bootstrap Job created (schema and root principal), and its pods read the token
        # broker's keys and their S3 keys from these Secrets.
        release = helm_release(
            f"{self._name}-polaris", versions.POLARIS, name="polaris", namespace=ns, values=self._polaris_values(),
            opts=pulumi.ResourceOptions(parent=self._parent, depends_on=[bootstrap, token_broker, storage_creds, *trust]),
            adopt=self._cluster_adopt, registry=self.cluster.registry,
        )
        # The chart's own ClusterIP Service is `polaris`; this is the cross-cluster endpoint (and, with global services, the
        # ClusterMesh global service the client clusters repeat).
        self._store.lb_service(network, POLARIS_SERVICE, ns, polaris.pool, polaris.vip, names.POLARIS_HOST(self._site.domain),
                               # Its namespace only: a Service needs no ready pods (it routes to them as they become ready).
                               (POLARIS_PORT_NAME, polaris.port), POLARIS_POD_LABELS, [ns_resource],
                               annotations=global_service.backend_annotations() if global_service else None)

        for engine in sorted(self._principal_engines):
            self.principals[engine] = Principal(
                client_id=self._random_id(f"polaris-{engine}-id"), client_secret=self._random_secret(f"polaris-{engine}-secret")
            )
        setup = self._polaris_setup_job(ns, ns_resource, root, release)
        for team in self._teams:
            self.team_principals[team] = self._team_principal(team, ns, root, setup)
        for vendor in sorted(self._vendor_credentials):
            self.vendor_principals[vendor] = self._vendor_principal(vendor, ns, root, setup)

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
            opts=pulumi.ResourceOptions(parent=self._parent, depends_on=[*depends_on, backup_creds, *ca.resources()], protect=True, retain_on_delete=True),
        )
        k8s.apiextensions.CustomResource(
            f"{self._name}-{POLARIS_DB}-daily",
            api_version=versions.CNPG_API,
            kind="ScheduledBackup",
            metadata={"name": f"{POLARIS_DB}-daily", "namespace": ns},
            spec={"schedule": "0 0 2 * * *", "backupOwnerReference": "self", "cluster": {"name": POLARIS_DB}, "immediate": True},
            # It names the Cluster, and `immediate` starts a backup of it at once.
            opts=pulumi.ResourceOptions(parent=self._parent, depends_on=[cluster]),
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
            opts=pulumi.ResourceOptions(parent=self._parent, depends_on=depends_on),
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
            opts=pulumi.ResourceOptions(parent=self._parent, depends_on=[ns_resource]),
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
            opts=pulumi.ResourceOptions(parent=self._parent, depends_on=[ns_resource]),
        )
        principals = self._opaque_secret(
            "polaris-principals", ns,
            {
                f"{engine.upper().replace('-', '_')}_{part}": value
                for engine, principal in sorted(self.principals.items())
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
                        setup: k8s.batch.v1.Job) -> tuple[Principal, k8s.batch.v1.Job]:
        """A training team's Polaris principal and the Job that creates it, with its own principal role holding the
        training catalog role, once the site's setup Job made the catalog and its roles. Its own Job (the site's setup
        script, its own plan inline): adding a team changes nothing of the site's setup or another team's."""
        principal = Principal(
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
    def _vendor_principal(self, vendor: str, ns: str, root: k8s.core.v1.Secret, setup: k8s.batch.v1.Job) -> Principal:
        """A vendor's Polaris principal and the Job that creates it and sets its grants to exactly those configured, once
        the site's setup Job made the catalog (the site's setup script, the vendor's plan inline). The Secret
        `vendor-<name>` holds its client and its S3 keys, for operators to hand over."""
        principal = Principal(
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
