"""ComputeCluster: Spark with YuniKorn, Airflow, Trino, StarRocks, Superset and JupyterHub (DESIGN sections 1, 2).

On the compute cluster, each service switchable in config, all charts pinned. Batch is isolated from
interactive work by priority classes, a tainted batch node pool and per-namespace quotas; every
namespace's quota allows zero GPUs. Every engine reads data through Polaris (Iceberg REST) and the
internal S3 endpoint with its own credentials from StorageCluster; every UI signs in through an OIDC
client from SiteIdentity with exact redirect URIs, and is reachable from outside only through the
one ingress on an external pool. No credential is written into Helm values or ConfigMaps: charts
read them from Secrets, and engines from environment variables set from Secrets.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import pulumi_random as random
import yaml

from components import versions
from components.config import SiteConfig
from components.federation import SiteFederation
from components.gateway import ROUTES_LABEL, envoy_gateway, http_route, https_listener
from components.identity import PLATFORM_USERS, SiteIdentity
from components.kube import WORKLOAD_SKIPS, checkov_skips, helm_release, namespace, restricted_security_context
from components.network import CrossClusterNetwork
from components.providers import SiteProviders
from components.storage import StorageCluster

POOL_LABEL = "fab.internal/compute-pool"
INTERACTIVE_PRIORITY = "compute-interactive"
BATCH_PRIORITY = "compute-batch"
GATEWAY = "compute"
CNPG_NAMESPACE = "cnpg-system"
SPARK_NAMESPACE = "spark"
SPARK_SERVICE_ACCOUNT = "spark"
STARROCKS_CLUSTER = "starrocks"
UI_PORTS = {"airflow": ("airflow-api-server", 8080), "trino": ("trino", 8080), "superset": ("superset", 8088), "jupyterhub": ("proxy-public", 80)}
"""Service and port of each UI, as its chart names them."""
CALLBACKS = {
    "airflow": "/auth/oauth-authorized/keycloak",
    "trino": "/oauth2/callback",
    "superset": "/oauth-authorized/keycloak",
    "jupyterhub": "/hub/oauth_callback",
}
"""The OAuth redirect path each UI uses; its client allows exactly https://<host><path>."""
HOSTS = {"airflow": "airflow", "trino": "trino", "superset": "superset", "jupyterhub": "jupyter"}
NAMESPACE_QUOTAS = {
    SPARK_NAMESPACE: ("512", "4Ti"),
    "airflow": ("64", "256Gi"),
    "trino": ("256", "2Ti"),
    "starrocks": ("256", "2Ti"),
    "superset": ("32", "128Gi"),
    "jupyterhub": ("128", "1Ti"),
}
"""CPU and memory requests each namespace may hold at most."""


def ui_host(site: SiteConfig, ui: str) -> str:
    return f"{HOSTS[ui]}.{site.domain}"


def redirect_uri(site: SiteConfig, ui: str) -> str:
    return f"https://{ui_host(site, ui)}{CALLBACKS[ui]}"


def yunikorn_queues(site: SiteConfig) -> str:
    """YuniKorn's queues.yaml: batch and interactive under root, placed by the queue each application names."""
    def queue(name: str, q: Any) -> dict[str, Any]:
        return {
            "name": name,
            "resources": {
                "guaranteed": {"vcore": str(q.guaranteed_vcores), "memory": f"{q.guaranteed_memory_gib}Gi"},
                "max": {"vcore": str(q.max_vcores), "memory": f"{q.max_memory_gib}Gi"},
            },
        }

    spark = site.compute.spark
    return yaml.safe_dump(
        {
            "partitions": [
                {
                    "name": "default",
                    "placementrules": [{"name": "provided", "create": False}],
                    "queues": [{"name": "root", "submitacl": "*", "queues": [queue("batch", spark.batch), queue("interactive", spark.interactive)]}],
                }
            ]
        },
        sort_keys=False,
    )


def spark_defaults(site: SiteConfig, storage: StorageCluster) -> str:
    """spark-defaults.conf: the Polaris catalog and the internal S3 endpoint; credentials only as ${env:...} references."""
    catalog = "spark.sql.catalog.fab"
    conf = {
        "spark.sql.extensions": "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions",
        "spark.sql.defaultCatalog": "fab",
        catalog: "org.apache.iceberg.spark.SparkCatalog",
        f"{catalog}.type": "rest",
        f"{catalog}.uri": "${env:POLARIS_URI}",
        f"{catalog}.warehouse": "${env:POLARIS_WAREHOUSE}",
        f"{catalog}.credential": "${env:POLARIS_CLIENT_ID}:${env:POLARIS_CLIENT_SECRET}",
        f"{catalog}.scope": "PRINCIPAL_ROLE:ALL",
        f"{catalog}.header.X-Iceberg-Access-Delegation": "vended-credentials",
        f"{catalog}.io-impl": "org.apache.iceberg.aws.s3.S3FileIO",
        f"{catalog}.s3.endpoint": "${env:AWS_ENDPOINT_URL_S3}",
        f"{catalog}.s3.path-style-access": "true",
        "spark.hadoop.fs.s3a.endpoint": "${env:AWS_ENDPOINT_URL_S3}",
        "spark.hadoop.fs.s3a.path.style.access": "true",
        "spark.hadoop.fs.s3a.aws.credentials.provider": "software.amazon.awssdk.auth.credentials.EnvironmentVariableCredentialsProvider",
        "spark.kubernetes.authenticate.driver.serviceAccountName": SPARK_SERVICE_ACCOUNT,
    }
    return "".join(f"{key} {value}\n" for key, value in conf.items())


def trino_catalog(prefix: str = "", s3_endpoint_env: str = "AWS_ENDPOINT_URL_S3") -> str:
    """A Trino Iceberg catalog on a Polaris: REST with OAuth2 client credentials and vended S3 credentials.

    `prefix` selects whose Polaris: none for this site's, `<PEER>_` for a federated peer's.
    """
    props = {
        "connector.name": "iceberg",
        "iceberg.catalog.type": "rest",
        "iceberg.rest-catalog.uri": f"${{ENV:{prefix}POLARIS_URI}}",
        "iceberg.rest-catalog.warehouse": f"${{ENV:{prefix}POLARIS_WAREHOUSE}}",
        "iceberg.rest-catalog.security": "OAUTH2",
        "iceberg.rest-catalog.oauth2.credential": f"${{ENV:{prefix}POLARIS_CLIENT_ID}}:${{ENV:{prefix}POLARIS_CLIENT_SECRET}}",
        "iceberg.rest-catalog.oauth2.scope": "PRINCIPAL_ROLE:ALL",
        "iceberg.rest-catalog.vended-credentials-enabled": "true",
        "fs.native-s3.enabled": "true",
        "s3.endpoint": f"${{ENV:{s3_endpoint_env}}}",
        "s3.path-style-access": "true",
        "s3.region": "${ENV:AWS_REGION}",
    }
    return "".join(f"{key}={value}\n" for key, value in props.items())


def trino_resource_groups() -> str:
    """Interactive users ahead of batch: Airflow's queries (source airflow) queue in their own group."""
    return json.dumps(
        {
            "rootGroups": [
                {"name": "interactive", "softMemoryLimit": "60%", "hardConcurrencyLimit": 40, "maxQueued": 200, "schedulingWeight": 3},
                {"name": "batch", "softMemoryLimit": "40%", "hardConcurrencyLimit": 10, "maxQueued": 1000, "schedulingWeight": 1},
            ],
            "selectors": [{"source": "(?i).*airflow.*", "group": "batch"}, {"group": "interactive"}],
        },
        indent=2,
    )


@dataclass(frozen=True)
class ComputeClusterArgs:
    site: SiteConfig
    providers: SiteProviders
    network: CrossClusterNetwork
    storage: StorageCluster
    identity: SiteIdentity
    federation: SiteFederation | None = None
    """Peers whose gold Trino reads through their own Polaris."""


class ComputeCluster(pulumi.ComponentResource):
    """The compute cluster's engines and UIs, and its ingress."""

    ui_urls: pulumi.Output[dict[str, str]]
    """Sign-in URL of each enabled UI."""
    dns_records: pulumi.Output[dict[str, str]]
    """A records for the UI host names: all point at the ingress VIP."""
    airflow_namespace: k8s.core.v1.Namespace
    """Where Airflow runs; TrainingPool delivers the GPU clusters' submitter kubeconfigs into it."""

    def __init__(self, name: str, args: ComputeClusterArgs, opts: pulumi.ResourceOptions | None = None):
        site = args.site
        (self._key,) = site.keys_with_role("compute")
        provider = args.providers.for_cluster(self._key)
        super().__init__("fab:compute:ComputeCluster", name, None, pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(providers=[provider])))
        self._name, self._site, self._storage, self._identity = name, site, args.storage, args.identity
        self._federation = args.federation
        compute = site.compute
        self._child = pulumi.ResourceOptions(parent=self)

        self._priorities()
        # Labels only: a Node's taints are one list that the kubelet and the node lifecycle controller also
        # write, so batch nodes register with their taint (docs/operations.md, "Node pools").
        for node in compute.batch_nodes:
            k8s.core.v1.NodePatch(
                f"{name}-node-{node}",
                metadata={"name": node, "labels": {POOL_LABEL: "batch"}},
                opts=self._child,
            )
        uis = [ui for ui in ("airflow", "trino", "superset", "jupyterhub") if getattr(compute, ui).enabled]
        # The namespace was first created by TrainingPool (as `training-<compute>-ns-airflow`); the alias
        # keeps a stack that deployed that version from deleting and re-creating it.
        previous = pulumi.Alias(
            name=f"training-{self._key}-ns-airflow",
            parent=f"urn:pulumi:{pulumi.get_stack()}::{pulumi.get_project()}::fab:training:TrainingPool::training",
        )
        self.airflow_namespace = self._namespace("airflow", aliases=[previous])
        self._gateway(args.network, uis)
        self._cnpg = self._cnpg_operator() if compute.airflow.enabled or compute.superset.enabled else None
        if compute.spark.enabled:
            self._spark()
        if compute.airflow.enabled:
            self._airflow()
        if compute.trino.enabled:
            self._trino()
        if compute.starrocks.enabled:
            self._starrocks()
        if compute.superset.enabled:
            self._superset()
        if compute.jupyterhub.enabled:
            self._jupyterhub()

        self.ui_urls = pulumi.Output.from_input({ui: f"https://{ui_host(site, ui)}" for ui in uis})
        self.dns_records = pulumi.Output.from_input({ui_host(site, ui): str(compute.ingress.vip) for ui in uis})
        self.register_outputs({"ui_urls": self.ui_urls, "dns_records": self.dns_records})

    # ---------------------------------------------------------------------------------------------
    # Isolation.

    def _priorities(self) -> None:
        k8s.scheduling.v1.PriorityClass(
            f"{self._name}-priority-interactive", metadata={"name": INTERACTIVE_PRIORITY}, value=100_000,
            preemption_policy="PreemptLowerPriority", description="Dashboards, notebooks and ad-hoc queries.", opts=self._child,
        )
        k8s.scheduling.v1.PriorityClass(
            f"{self._name}-priority-batch", metadata={"name": BATCH_PRIORITY}, value=1_000,
            preemption_policy="Never", description="ETL and backfills: yield to interactive work.", opts=self._child,
        )

    def _plain_namespace(self, ns: str, opts: pulumi.ResourceOptions | None = None, labels: dict[str, str] | None = None) -> k8s.core.v1.Namespace:
        return namespace(f"{self._name}-ns-{ns}", ns, opts or self._child, labels=labels,
                         existing=self._site.adopt.claims("namespace", self._key, ns))

    def _namespace(self, ns: str, ui: bool = True, aliases: list[pulumi.Alias] | None = None) -> k8s.core.v1.Namespace:
        """A namespace with a quota (CPU, memory, and zero GPUs: compute never requests one) and container defaults."""
        cpu, memory = NAMESPACE_QUOTAS[ns]
        resource = self._plain_namespace(ns, pulumi.ResourceOptions(parent=self, aliases=aliases), labels={ROUTES_LABEL: GATEWAY} if ui else None)
        after = pulumi.ResourceOptions(parent=self, depends_on=[resource])
        k8s.core.v1.ResourceQuota(
            f"{self._name}-quota-{ns}",
            metadata={"name": "compute", "namespace": ns},
            spec={"hard": {"requests.cpu": cpu, "requests.memory": memory, "requests.nvidia.com/gpu": "0"}},
            opts=after,
        )
        k8s.core.v1.LimitRange(
            f"{self._name}-limits-{ns}",
            metadata={"name": "defaults", "namespace": ns},
            spec={"limits": [{
                "type": "Container",
                "defaultRequest": {"cpu": "250m", "memory": "512Mi"},
                "default": {"cpu": "2", "memory": "4Gi"},
            }]},
            opts=after,
        )
        return resource

    def _gateway(self, network: CrossClusterNetwork, uis: list[str]) -> None:
        ingress = self._site.compute.ingress
        listeners = [https_listener(ui, ui_host(self._site, ui), ingress.tls_secret, GATEWAY) for ui in uis]
        self._gateway_resource = envoy_gateway(
            self._name, self._child,
            adopt=self._site.adopt,
            cluster=self._key,
            gateway=GATEWAY,
            gateway_class="fab-compute",
            description="The site's only entry for outside users.",
            service_labels=network.lb_service_labels(self._key, ingress.pool),
            vip=str(ingress.vip),
            listeners=listeners,
        )

    def _route(self, ui: str, ns: str, depends_on: list[pulumi.Resource]) -> None:
        service, port = UI_PORTS[ui]
        http_route(
            f"{self._name}-route-{ui}", pulumi.ResourceOptions(parent=self, depends_on=[self._gateway_resource, *depends_on]),
            name=ui, namespace_=ns, gateway=GATEWAY, listener=ui, hostname=ui_host(self._site, ui),
            rules=[{"backendRefs": [{"name": service, "port": port}]}],
        )

    def _oidc_secret(self, ui: str, ns: str, ns_resource: pulumi.Resource) -> k8s.core.v1.Secret:
        client = self._identity.oidc_client(ui, "browser", [redirect_uri(self._site, ui)], description=f"{ui} sign-in")
        return k8s.core.v1.Secret(
            f"{self._name}-{ui}-oidc",
            metadata={"name": f"{ui}-oidc", "namespace": ns},
            type="Opaque",
            string_data={
                "OIDC_CLIENT_ID": client.client_id,
                "OIDC_CLIENT_SECRET": client.client_secret,
                "OIDC_ISSUER": client.issuer_url,
            },
            opts=pulumi.ResourceOptions(parent=self, depends_on=[ns_resource]),
        )

    def _random(self, logical: str, length: int = 48) -> pulumi.Output[str]:
        password = random.RandomPassword(f"{self._name}-{logical}", length=length, special=False, opts=self._child)
        return pulumi.Output.secret(password.result)

    def _release(self, logical: str, chart: versions.HelmChart, ns: str, values: dict[str, Any],
                 depends_on: list[pulumi.Resource], release: str | None = None) -> k8s.helm.v3.Release:
        name = release or logical
        return helm_release(f"{self._name}-{logical}", chart, name=name, namespace=ns, values=values,
                            opts=pulumi.ResourceOptions(parent=self, depends_on=depends_on),
                            existing=self._site.adopt.claims("helm_release", self._key, f"{ns}/{name}"))

    # ---------------------------------------------------------------------------------------------
    # Databases of the UIs (CloudNativePG, protected).

    def _cnpg_operator(self) -> k8s.helm.v3.Release:
        ns = self._plain_namespace(CNPG_NAMESPACE)
        return self._release("cnpg", versions.CLOUDNATIVE_PG, CNPG_NAMESPACE, {"replicaCount": 2}, [ns])

    def _database(self, app: str, ns: str, ns_resource: pulumi.Resource) -> tuple[k8s.core.v1.Secret, pulumi.Output[str]]:
        """A two-instance Postgres for an app, owned by `app` with a generated password (a Pulumi secret)."""
        password = self._random(f"{app}-db-password", 32)
        owner = k8s.core.v1.Secret(
            f"{self._name}-{app}-db-owner",
            metadata={"name": f"{app}-db-owner", "namespace": ns},
            type="kubernetes.io/basic-auth",
            string_data={"username": app, "password": password},
            opts=pulumi.ResourceOptions(parent=self, depends_on=[ns_resource]),
        )
        k8s.apiextensions.CustomResource(
            f"{self._name}-{app}-db",
            api_version=versions.CNPG_API,
            kind="Cluster",
            metadata={"name": f"{app}-db", "namespace": ns},
            spec={
                "instances": 2,
                "enableSuperuserAccess": False,
                "bootstrap": {"initdb": {"database": app, "owner": app, "secret": {"name": f"{app}-db-owner"}}},
                "storage": {"size": "20Gi"},
                "resources": {"requests": {"cpu": "250m", "memory": "512Mi"}, "limits": {"cpu": "1", "memory": "1Gi"}},
            },
            # The app's metadata: protected, and kept if it ever leaves the stack.
            opts=pulumi.ResourceOptions(parent=self, depends_on=[self._cnpg, owner], protect=True, retain_on_delete=True),
        )
        return owner, password

    # ---------------------------------------------------------------------------------------------
    # Engines and UIs.

    def _spark(self) -> None:
        site = self._site
        ns = self._namespace(SPARK_NAMESPACE, ui=False)
        yunikorn = self._release(
            "yunikorn", versions.YUNIKORN, "yunikorn",
            {"yunikornDefaults": {
                "queues.yaml": yunikorn_queues(site),
                "admissionController.filtering.processNamespaces": f"^{SPARK_NAMESPACE}$",
            }},
            [self._plain_namespace("yunikorn")],
        )
        self._release(
            "spark-operator", versions.SPARK_OPERATOR, "spark-operator",
            {
                "spark": {"jobNamespaces": [SPARK_NAMESPACE], "serviceAccount": {"create": True, "name": SPARK_SERVICE_ACCOUNT}},
                "controller": {"batchScheduler": {"enable": True, "default": "yunikorn"}},
                # env/envFrom on drivers and executors (the credentials) are injected by the webhook.
                "webhook": {"enable": True},
            },
            [yunikorn, ns, self._plain_namespace("spark-operator")],
        )
        k8s.core.v1.ConfigMap(
            f"{self._name}-spark-defaults",
            metadata={"name": "spark-defaults", "namespace": SPARK_NAMESPACE},
            data={"spark-defaults.conf": spark_defaults(site, self._storage)},
            opts=pulumi.ResourceOptions(parent=self, depends_on=[ns]),
        )
        self._storage.grant("spark", self._key, SPARK_NAMESPACE, depends_on=[ns])
        self._storage.catalog_grant("spark", self._key, SPARK_NAMESPACE, depends_on=[ns])

    def _airflow(self) -> None:
        site, ns = self._site, "airflow"
        ns_resource = self.airflow_namespace
        oidc = self._oidc_secret("airflow", ns, ns_resource)
        owner, password = self._database("airflow", ns, ns_resource)
        keys = k8s.core.v1.Secret(
            f"{self._name}-airflow-keys",
            metadata={"name": "airflow-keys", "namespace": ns},
            type="Opaque",
            string_data={
                # A Fernet key is 32 bytes, url-safe base64 encoded.
                "fernet-key": self._random("airflow-fernet", 32).apply(lambda k: base64.urlsafe_b64encode(k.encode()).decode()),
                "api-secret-key": self._random("airflow-api-secret"),
                "jwt-secret": self._random("airflow-jwt-secret"),
                "connection": password.apply(lambda p: f"postgresql://airflow:{p}@airflow-db-rw.airflow.svc:5432/airflow?sslmode=require"),
            },
            opts=pulumi.ResourceOptions(parent=self, depends_on=[ns_resource]),
        )
        gpus = site.keys_with_role("gpu", "gpu-train")
        volumes = [{"name": f"gpu-{g}-kubeconfig", "secret": {"secretName": f"gpu-{g}-kubeconfig"}} for g in gpus]
        mounts = [{"name": f"gpu-{g}-kubeconfig", "mountPath": f"/opt/airflow/kube/{g}", "readOnly": True} for g in gpus]
        connections = [
            {"name": f"AIRFLOW_CONN_GPU_{g.upper().replace('-', '_')}",
             "value": json.dumps({"conn_type": "kubernetes", "extra": {"kube_config_path": f"/opt/airflow/kube/{g}/kubeconfig"}})}
            for g in gpus
        ]
        config = Path(__file__).with_name("airflow_webserver_config.py").read_text()
        values = {
            "executor": "KubernetesExecutor",
            "postgresql": {"enabled": False},
            "data": {"metadataSecretName": "airflow-keys"},
            "fernetKeySecretName": "airflow-keys",
            "apiSecretKeySecretName": "airflow-keys",
            "jwtSecretName": "airflow-keys",
            "env": connections,
            "volumes": volumes,
            "volumeMounts": mounts,
            "apiServer": {
                "apiServerConfig": config,
                "env": [
                    {"name": key, "valueFrom": {"secretKeyRef": {"name": "airflow-oidc", "key": key}}}
                    for key in ("OIDC_CLIENT_ID", "OIDC_CLIENT_SECRET", "OIDC_ISSUER")
                ],
            },
            "config": {"api": {"base_url": f"https://{ui_host(site, 'airflow')}"}},
            # As Helm hooks these jobs would run after Helm's wait, which waits for pods that wait for the
            # migration: a deadlock. As plain Jobs they run during the wait (the chart's advice for --wait).
            "migrateDatabaseJob": {"useHelmHooks": False, "applyCustomEnv": False},
            "createUserJob": {"useHelmHooks": False, "applyCustomEnv": False},
        }
        release = self._release("airflow", versions.AIRFLOW, ns, values, [oidc, keys, owner])
        self._route("airflow", ns, [release])

    def _trino(self) -> None:
        site, ns = self._site, "trino"
        ns_resource = self._namespace(ns)
        oidc = self._oidc_secret("trino", ns, ns_resource)
        shared = k8s.core.v1.Secret(
            f"{self._name}-trino-internal",
            metadata={"name": "trino-internal", "namespace": ns},
            type="Opaque",
            string_data={"TRINO_SHARED_SECRET": self._random("trino-shared-secret", 64)},
            opts=pulumi.ResourceOptions(parent=self, depends_on=[ns_resource]),
        )
        catalog = self._storage.catalog_grant("trino", self._key, ns, depends_on=[ns_resource])
        s3 = self._storage.grant("trino", self._key, ns, depends_on=[ns_resource])
        values = {
            "server": {
                "workers": site.compute.trino.workers,
                "config": {"authenticationType": "OAUTH2"},
                "coordinatorExtraConfig": "".join(f"{line}\n" for line in (
                    "http-server.authentication.oauth2.issuer=${ENV:OIDC_ISSUER}",
                    "http-server.authentication.oauth2.client-id=${ENV:OIDC_CLIENT_ID}",
                    "http-server.authentication.oauth2.client-secret=${ENV:OIDC_CLIENT_SECRET}",
                    "http-server.authentication.oauth2.principal-field=preferred_username",
                    "web-ui.authentication.type=oauth2",
                    "http-server.process-forwarded=true",
                )),
            },
            "additionalConfigProperties": ["internal-communication.shared-secret=${ENV:TRINO_SHARED_SECRET}"],
            "catalogs": {"fab": trino_catalog()},
            "resourceGroups": {"type": "configmap", "resourceGroupsConfig": trino_resource_groups()},
            "envFrom": [{"secretRef": {"name": name}} for name in ("trino-oidc", "trino-internal", "polaris-trino", "s3-trino")],
        }
        peers = self._peer_catalogs(ns, ns_resource, values)
        release = self._release("trino", versions.TRINO, ns, values, [oidc, shared, catalog, s3, *peers])
        self._route("trino", ns, [release])

    def _peer_catalogs(self, ns: str, ns_resource: pulumi.Resource, values: dict[str, Any]) -> list[pulumi.Resource]:
        """One Iceberg catalog per federated peer: its Polaris, with the gold-only principal it created for this site."""
        if self._federation is None:
            return []
        secrets = []
        for peer in self._federation.linked_peers():
            prefix = peer.upper().replace("-", "_")
            found = self._federation.peer_catalog(peer)
            secrets.append(k8s.core.v1.Secret(
                f"{self._name}-trino-peer-{peer}",
                metadata={"name": f"polaris-peer-{peer}", "namespace": ns},
                type="Opaque",
                string_data={
                    f"{prefix}_POLARIS_URI": found["uri"],
                    f"{prefix}_POLARIS_WAREHOUSE": found["warehouse"],
                    f"{prefix}_POLARIS_CLIENT_ID": found["client_id"],
                    f"{prefix}_POLARIS_CLIENT_SECRET": found["client_secret"],
                    f"{prefix}_S3_ENDPOINT": found["s3_endpoint"],
                },
                opts=pulumi.ResourceOptions(parent=self, depends_on=[ns_resource]),
            ))
            values["catalogs"][peer.replace("-", "_")] = trino_catalog(prefix=f"{prefix}_", s3_endpoint_env=f"{prefix}_S3_ENDPOINT")
            values["envFrom"].append({"secretRef": {"name": f"polaris-peer-{peer}"}})
        return secrets

    def _starrocks(self) -> None:
        site, ns = self._site, "starrocks"
        cfg = site.compute.starrocks
        ns_resource = self._namespace(ns, ui=False)
        operator = self._release("starrocks-operator", versions.STARROCKS_OPERATOR, ns, {"timeZone": "UTC"}, [ns_resource])
        catalog = self._storage.catalog_grant("starrocks", self._key, ns, depends_on=[ns_resource])
        s3 = self._storage.grant("starrocks", self._key, ns, depends_on=[ns_resource])
        fe_conf = k8s.core.v1.ConfigMap(
            f"{self._name}-starrocks-fe-conf",
            metadata={"name": "starrocks-fe-conf", "namespace": ns},
            # Shared-data: CN keep no state; the storage volume (and its keys) is created by the setup Job.
            data={"fe.conf": "run_mode = shared_data\ncloud_native_storage_type = S3\nenable_load_volume_from_conf = false\n"},
            opts=pulumi.ResourceOptions(parent=self, depends_on=[ns_resource]),
        )
        cluster = k8s.apiextensions.CustomResource(
            f"{self._name}-starrocks",
            api_version=versions.STARROCKS_API,
            kind="StarRocksCluster",
            metadata={"name": STARROCKS_CLUSTER, "namespace": ns},
            spec={
                "starRocksFeSpec": {
                    "image": versions.STARROCKS_FE_IMAGE,
                    "replicas": 3,
                    "requests": {"cpu": "4", "memory": "16Gi"},
                    "limits": {"cpu": "8", "memory": "32Gi"},
                    "configMapInfo": {"configMapName": "starrocks-fe-conf", "resolveKey": "fe.conf"},
                    "storageVolumes": [{"name": "fe-meta", "storageSize": "50Gi", "mountPath": "/opt/starrocks/fe/meta"}],
                    "runAsNonRoot": True,
                },
                "starRocksCnSpec": {
                    "image": versions.STARROCKS_CN_IMAGE,
                    "requests": {"cpu": "8", "memory": "32Gi"},
                    "limits": {"cpu": "16", "memory": "64Gi"},
                    "runAsNonRoot": True,
                    "autoScalingPolicy": {
                        "version": "v2",
                        "minReplicas": cfg.cn_min_replicas,
                        "maxReplicas": cfg.cn_max_replicas,
                        "hpaPolicy": {"metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 70}}}]},
                    },
                    "storageVolumes": [{
                        "name": "cn-cache",
                        "storageClassName": cfg.cache_storage_class,
                        "storageSize": f"{cfg.cache_size_gib}Gi",
                        "mountPath": "/opt/starrocks/cn/storage",
                    }],
                },
            },
            opts=pulumi.ResourceOptions(parent=self, depends_on=[operator, fe_conf]),
        )
        root = k8s.core.v1.Secret(
            f"{self._name}-starrocks-root",
            metadata={"name": "starrocks-root", "namespace": ns},
            type="Opaque",
            string_data={"STARROCKS_ROOT_PASSWORD": self._random("starrocks-root", 32)},
            opts=pulumi.ResourceOptions(parent=self, depends_on=[ns_resource]),
        )
        (olap,) = sorted(n for n, b in site.storage.buckets.items() if b.data_class == "olap")
        script = Path(__file__).with_name("starrocks_setup.sh").read_text()
        setup = k8s.core.v1.ConfigMap(
            f"{self._name}-starrocks-setup",
            metadata={"name": "starrocks-setup", "namespace": ns},
            data={"setup.sh": script},
            opts=pulumi.ResourceOptions(parent=self, depends_on=[ns_resource]),
        )
        container = {
            "name": "setup",
            "image": versions.MYSQL_CLIENT_IMAGE,
            "imagePullPolicy": "Always",
            "command": ["bash", "/etc/starrocks-setup/setup.sh"],
            "env": [
                {"name": "HOME", "value": "/tmp"},
                {"name": "MYSQL_HISTFILE", "value": "/dev/null"},
                {"name": "STARROCKS_HOST", "value": f"{STARROCKS_CLUSTER}-fe-service.{ns}.svc"},
                {"name": "OLAP_LOCATION", "value": f"s3://{olap}/starrocks"},
            ],
            "envFrom": [{"secretRef": {"name": name}} for name in ("starrocks-root", "polaris-starrocks", "s3-starrocks")],
            "securityContext": restricted_security_context(10001),
            "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"cpu": "500m", "memory": "256Mi"}},
            "volumeMounts": [{"name": "setup", "mountPath": "/etc/starrocks-setup", "readOnly": True}, {"name": "tmp", "mountPath": "/tmp"}],
        }
        k8s.batch.v1.Job(
            f"{self._name}-starrocks-setup-job",
            metadata={"name": "starrocks-setup", "namespace": ns, "annotations": checkov_skips(*WORKLOAD_SKIPS)},
            spec={
                "backoffLimit": 20,
                "template": {"spec": {
                    "restartPolicy": "OnFailure",
                    "automountServiceAccountToken": False,
                    "securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
                    "containers": [container],
                    "volumes": [{"name": "setup", "configMap": {"name": "starrocks-setup"}}, {"name": "tmp", "emptyDir": {}}],
                }},
            },
            opts=pulumi.ResourceOptions(parent=self, depends_on=[cluster, root, setup, catalog, s3], replace_on_changes=["spec"], delete_before_replace=True),
        )

    def _superset(self) -> None:
        ns = "superset"
        ns_resource = self._namespace(ns)
        self._oidc_secret("superset", ns, ns_resource)
        owner, password = self._database("superset", ns, ns_resource)
        env = k8s.core.v1.Secret(
            f"{self._name}-superset-env",
            metadata={"name": "superset-env", "namespace": ns},
            type="Opaque",
            string_data={
                "DB_HOST": "superset-db-rw.superset.svc",
                "DB_PORT": "5432",
                "DB_USER": "superset",
                "DB_PASS": password,
                "DB_NAME": "superset",
                "SUPERSET_SECRET_KEY": self._random("superset-secret-key", 64),
            },
            opts=pulumi.ResourceOptions(parent=self, depends_on=[ns_resource]),
        )
        config = Path(__file__).with_name("superset_config_overrides.py").read_text()
        values = {
            "secretEnv": {"create": False},
            "envFromSecret": "superset-env",
            "envFromSecrets": ["superset-oidc"],
            "postgresql": {"enabled": False},
            "redis": {"enabled": False},
            # No Redis, so no Celery: the worker runs no pod (the chart reads replicas.replicaCount, not replicaCount).
            "supersetWorker": {"replicas": {"enabled": True, "replicaCount": 0}},
            # Sign-in is Keycloak's: no local admin with the chart's default password.
            "init": {"createAdmin": False},
            "supersetCeleryBeat": {"enabled": False},
            "runAsUser": 1000,
            "configOverrides": {"fab": config},
        }
        release = self._release("superset", versions.SUPERSET, ns, values, [env, owner])
        self._route("superset", ns, [release])

    def _jupyterhub(self) -> None:
        site, ns = self._site, "jupyterhub"
        ns_resource = self._namespace(ns)
        oidc = self._oidc_secret("jupyterhub", ns, ns_resource)
        issuer = self._identity.issuer
        profiles = [
            {
                "display_name": name,
                "description": spec.description,
                "default": i == 0,
                "kubespawner_override": {
                    "cpu_guarantee": spec.cpu, "cpu_limit": spec.cpu,
                    "mem_guarantee": f"{spec.memory_gib}G", "mem_limit": f"{spec.memory_gib}G",
                },
            }
            for i, (name, spec) in enumerate(site.compute.jupyterhub.profiles.items())
        ]
        values = {
            "hub": {
                "config": {
                    "JupyterHub": {"authenticator_class": "generic-oauth"},
                    "GenericOAuthenticator": {
                        "oauth_callback_url": redirect_uri(site, "jupyterhub"),
                        "authorize_url": f"{issuer}/protocol/openid-connect/auth",
                        "token_url": f"{issuer}/protocol/openid-connect/token",
                        "userdata_url": f"{issuer}/protocol/openid-connect/userinfo",
                        "scope": ["openid", "profile", "email"],
                        "username_claim": "preferred_username",
                        "login_service": "Keycloak",
                        "manage_groups": True,
                        "auth_state_groups_key": "oauth_user.groups",
                        "allowed_groups": [PLATFORM_USERS],
                    },
                },
                # OAuthenticator reads the client id and secret from these variables when config leaves them out.
                "extraEnv": {
                    "OAUTH_CLIENT_ID": {"valueFrom": {"secretKeyRef": {"name": "jupyterhub-oidc", "key": "OIDC_CLIENT_ID"}}},
                    "OAUTH_CLIENT_SECRET": {"valueFrom": {"secretKeyRef": {"name": "jupyterhub-oidc", "key": "OIDC_CLIENT_SECRET"}}},
                },
            },
            "proxy": {"service": {"type": "ClusterIP"}},
            "scheduling": {"userScheduler": {"enabled": False}},
            "prePuller": {"hook": {"enabled": False}, "continuous": {"enabled": False}},
            "singleuser": {
                "profileList": profiles,
                "networkPolicy": {"egressAllowRules": {"privateIPs": True}},
                "extraEnv": {"SPARK_CONF_DIR": "/etc/spark"},
            },
        }
        release = self._release("jupyterhub", versions.JUPYTERHUB, ns, values, [oidc])
        self._route("jupyterhub", ns, [release])
