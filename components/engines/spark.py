"""Spark: the Spark operator with Apache YuniKorn as its batch scheduler (DESIGN section 2, compute row).

Batch and interactive applications queue separately in YuniKorn; drivers and executors get the Polaris
catalog and the internal S3 endpoint in their SparkApplication's `sparkConf` (the catalog's URI written out, so that the
policy pack can check it is Polaris's), their credentials as environment variables from the delivered Secrets, injected
by the operator's webhook. Not through the operator's `sparkConfigMap`: the webhook mounts it and sets SPARK_CONF_DIR,
but a Spark 3.5 driver starts with `--properties-file` only and never reads its spark-defaults.conf (Spark 4's
`--load-spark-defaults` is behind the operator's LoadSparkDefaults gate, off; kubeflow/spark-operator#1183, #691); the
operator's controller hands `sparkConf` to spark-submit as `--conf` (2.5.2 `sparkConfOption`), which the driver gets.
With `compute.spark.connect`, a Spark Connect server per team for its members' notebooks (engines/_spark_connect.py)
runs here too, the server in the interactive pool and queue, its executors in the batch pool and queue unless
`compute.spark.connect_executors_pool` says interactive, as the team's own principal. Spark is batch: the operator's chart has no values for drivers and executors, so their
pool, tolerations and PriorityClass are SparkApplication fields, handed out in `spark_application_template()`
(Airflow submits from it).
"""

from __future__ import annotations

from typing import Any

from components import versions, yamltext
from components.airgap import mirror_repository, named_secrets
from components.config import BucketAccess, SparkConfig
from components.constants import (
    CATALOG_CONF,
    ENGINE_LABEL,
    MAINTENANCE_NAMESPACE,
    MAINTENANCE_PRINCIPAL,
    POLARIS_CREDENTIAL,
    POLARIS_WAREHOUSE,
    S3_ENDPOINT,
    credentials,
)
from components.engines import _spark_connect as spark_connect
from components.engines import _spark_packages as packages
from components.engines import _spark_trust as jvm_trust
from components.engines._base import BATCH, POOL_LABEL, Engine, EngineChart, EngineScope, Quota
from components.engines._spark_trust import SparkTrust
from components.placement import Pods
from components.registry import UPSTREAM, Registry

SERVICE_ACCOUNT = "spark"
DEFAULTS_CONFIG_MAP = "spark-defaults"


def yunikorn_queues(spark: Any) -> str:
    """YuniKorn's queues.yaml: batch and interactive under root, placed by the queue each application names."""
    def queue(name: str, q: Any) -> dict[str, Any]:
        return {
            "name": name,
            "resources": {
                "guaranteed": {"vcore": str(q.guaranteed_vcores), "memory": f"{q.guaranteed_memory_gib}Gi"},
                "max": {"vcore": str(q.max_vcores), "memory": f"{q.max_memory_gib}Gi"},
            },
        }

    return yamltext.dump(
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


def spark_conf(catalog_uri: str) -> dict[str, str]:
    """The Spark settings of the Polaris catalog at `catalog_uri` and the internal S3 endpoint; credentials only as
    references to the environment (`credentials()`), each in the syntax of what reads it. Spark hands the catalog's options
    to Iceberg as written (Spark 3.5 `Catalogs.catalogOptions`, no substitution), and Iceberg's REST catalog replaces an
    option whose WHOLE value is `env:NAME` by that variable (1.10 `RESTSessionCatalog.initialize`,
    `EnvironmentUtil.resolveAll`; `${env:NAME}` would reach Polaris literally): hence one variable holding
    `<id>:<secret>` (POLARIS_CREDENTIAL). Hadoop's Configuration expands `${env.NAME}` in the `spark.hadoop.*` values
    Spark copies into it (Hadoop 3.3 `Configuration.substituteVars`)."""
    catalog = CATALOG_CONF
    conf = {
        "spark.sql.extensions": "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions",
        "spark.sql.defaultCatalog": "fab",
        catalog: "org.apache.iceberg.spark.SparkCatalog",
        f"{catalog}.type": "rest",
        f"{catalog}.uri": catalog_uri,
        f"{catalog}.warehouse": f"env:{POLARIS_WAREHOUSE}",
        f"{catalog}.credential": f"env:{POLARIS_CREDENTIAL}",
        f"{catalog}.scope": "PRINCIPAL_ROLE:ALL",
        f"{catalog}.header.X-Iceberg-Access-Delegation": "vended-credentials",
        f"{catalog}.io-impl": "org.apache.iceberg.aws.s3.S3FileIO",
        f"{catalog}.s3.endpoint": f"env:{S3_ENDPOINT}",
        f"{catalog}.s3.path-style-access": "true",
        "spark.hadoop.fs.s3a.endpoint": f"${{env.{S3_ENDPOINT}}}",
        "spark.hadoop.fs.s3a.path.style.access": "true",
        "spark.hadoop.fs.s3a.aws.credentials.provider": "software.amazon.awssdk.auth.credentials.EnvironmentVariableCredentialsProvider",
        "spark.kubernetes.authenticate.driver.serviceAccountName": SERVICE_ACCOUNT,
    }
    return conf


def spark_defaults(catalog_uri: str) -> str:
    """spark-defaults.conf with `spark_conf`."""
    return "".join(f"{key} {value}\n" for key, value in spark_conf(catalog_uri).items())


SCRATCH_VOLUME = "tmp"
SCRATCH = {"volumes": [{"name": SCRATCH_VOLUME, "emptyDir": {"sizeLimit": "4Gi"}}],
           "volumeMounts": [{"name": SCRATCH_VOLUME, "mountPath": "/tmp"}]}
"""A writable /tmp (emptyDir) for the drivers and executors of the platform's SparkApplications, mounted by the operator's
webhook: Ivy's cache and the resolved packages (`_spark_packages.IVY_DIR`) and the JVM's temporary files, whatever the
image's root filesystem."""


def registry_fields(registry: Registry, trust: SparkTrust = jvm_trust.NONE) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """What a SparkApplication adds for package resolution, the site's registry and its CA: in its spec, Ivy's directory on
    the scratch volume (`sparkConf`, read by the controller's spark-submit and the driver, which both resolve packages),
    the scratch volume, and on a site with a registry the pull Secret (driver and executors) and, with a Maven repository,
    the settings and the volume that resolve packages from it only (engines/_spark_packages.py); with `trust` (the site's
    CA issued the S3 endpoint's certificate), the trust store's volume (engines/_spark_trust.py). In its driver and
    executor: the volumes' mounts and the JVM's trust store (one JAVA_TOOL_OPTIONS)."""
    spec: dict[str, Any] = {"sparkConf": packages.spark_conf(registry)}
    driver: dict[str, Any] = {}
    executor: dict[str, Any] = {"volumeMounts": [*SCRATCH["volumeMounts"], *jvm_trust.volume_mounts(trust)]}
    if registry.pull_secret:
        spec["imagePullSecrets"] = [registry.pull_secret]
    spec["volumes"] = [*SCRATCH["volumes"], *packages.volumes(registry), *jvm_trust.volumes(trust)]
    driver["volumeMounts"] = [*SCRATCH["volumeMounts"], *packages.volume_mounts(registry), *jvm_trust.volume_mounts(trust)]
    if jvm_trust.java_env(trust, registry):
        driver["env"] = jvm_trust.java_env(trust, registry)
    if trust.needed:
        executor["env"] = jvm_trust.java_env(trust, registry)
    return spec, driver, executor


def spark_application_template(catalog_uri: str, registry: Registry = UPSTREAM, trust: SparkTrust = jvm_trust.NONE) -> dict[str, Any]:
    """A SparkApplication with what the platform decides for every Spark job: its namespace and service account, the
    Polaris catalog at `catalog_uri` and the internal S3 endpoint in `sparkConf` (`spark_conf`), the engine's credentials
    as driver and executor environment, the batch YuniKorn queue, and the batch pool's node selector, tolerations and
    PriorityClass for driver and executors, a writable /tmp (`SCRATCH`) and `registry_fields` (with `trust`, the site's
    CA in every JVM). A job adds its own name,
    type, image, sparkVersion and mainApplicationFile."""
    pool = ENGINE.pool

    def pod() -> dict[str, Any]:
        return {"tolerations": pool.tolerations, "priorityClassName": pool.priority_class, "envFrom": credentials()}

    spec, driver, executor = registry_fields(registry, trust)
    return {
        "apiVersion": versions.SPARK_OPERATOR_API,
        "kind": "SparkApplication",
        "metadata": {"namespace": ENGINE.namespace},
        "spec": {
            "mode": "cluster",
            "batchScheduler": "yunikorn",
            "batchSchedulerOptions": {"queue": "root.batch"},
            "nodeSelector": pool.node_selector,
            "driver": {"serviceAccount": SERVICE_ACCOUNT, **pod(), **driver},
            "executor": {**pod(), **executor},
            **spec,
            "sparkConf": {**spark_conf(catalog_uri), **spec["sparkConf"]},
        },
    }


def maintenance_namespace(scope: EngineScope) -> Any:
    """With compute.iceberg_maintenance on, its namespace (MAINTENANCE_NAMESPACE, running as the maintenance principal on
    the batch pool), else None: the maintenance SparkApplications, their job and the principal's Secrets are there, out of
    reach of Spark's other jobs."""
    maintenance = scope.compute.iceberg_maintenance
    if maintenance is None or not maintenance.enabled:
        return None
    return scope.labelled_namespace(MAINTENANCE_NAMESPACE, {ENGINE_LABEL: MAINTENANCE_PRINCIPAL, POOL_LABEL: BATCH.name})


def _deploy(scope: EngineScope) -> None:
    config = ENGINE.config(scope.compute)
    ns = scope.namespace(ENGINE)
    # Spark Connect runs per team, each in its own interactive namespace; the operator's chart gives each the drivers'
    # ServiceAccount.
    connect = {team: spark_connect.namespace(scope, config, team) for team in sorted(scope.teams)} if config.connect else {}
    connect_names = [spark_connect.namespace_of(team) for team in connect]
    # So does Iceberg maintenance (its ServiceAccount and the operator's Role there name no Secrets).
    maintenance_ns = maintenance_namespace(scope)
    spark_namespaces = [ENGINE.namespace, *connect_names, *([MAINTENANCE_NAMESPACE] if maintenance_ns else [])]
    yunikorn = scope.release(
        "yunikorn", versions.YUNIKORN, "yunikorn",
        {"yunikornDefaults": {
            "queues.yaml": yunikorn_queues(config),
            "admissionController.filtering.processNamespaces": f"^({'|'.join(spark_namespaces)})$",
        }},
        # the chart's objects go in its namespace, which must exist first
        [scope.plain_namespace("yunikorn")],
    )
    registry = scope.cluster.registry
    operator_ns = scope.plain_namespace("spark-operator")
    # On a site with a Maven repository the controller's spark-submit and the drivers read its ivysettings.xml.
    maven = [spark_connect.packages_config_map(scope, name, after) for name, after in (
        ("spark-operator", operator_ns), (ENGINE.namespace, ns), *([(MAINTENANCE_NAMESPACE, maintenance_ns)] if maintenance_ns else []))
             ] if packages.resolves_from_site(registry) else []
    # Where the site's CA issued S3's certificate, the drivers and executors of every namespace trust it (`spark-trust`).
    trusts = [spark_connect.trust_config_map(scope, name, after) for name, after in (
        (ENGINE.namespace, ns), *([(MAINTENANCE_NAMESPACE, maintenance_ns)] if maintenance_ns else []))
              ] if spark_connect.site_trust(scope).needed else []
    operator = scope.release(
        "spark-operator", versions.SPARK_OPERATOR, "spark-operator",
        {
            "spark": {"jobNamespaces": spark_namespaces, "serviceAccount": {"create": True, "name": SERVICE_ACCOUNT}},
            "controller": {"batchScheduler": {"enable": True, "default": "yunikorn"}, **packages.operator_controller_values(registry)},
            # env/envFrom on drivers and executors (the credentials) are injected by the webhook.
            "webhook": {"enable": True},
        },
        # The chart makes the drivers' ServiceAccount and Role in each job namespace, and the controller's spark-submit and
        # the drivers it launches mount `spark-maven` (`maven`).
        # Not YuniKorn: the operator only names it as its pods' scheduler (YuniKorn has no CRDs, and its admission
        # controller registers its own webhook when it runs); what runs pods in its queues waits for it.
        [ns, *connect.values(), *([maintenance_ns] if maintenance_ns else []), operator_ns, *maven, *trusts],
    )
    # spark-defaults.conf for the Spark Connect servers alone, which read it (SPARK_CONF_DIR, mounted): the operator's
    # drivers would not (the module's docstring), so their SparkApplications carry the same settings in `sparkConf`.
    defaults = scope.storage.catalog_uri.apply(spark_defaults)
    scope.grants(ENGINE, ns)
    for team, connect_ns in connect.items():
        spark_connect.deploy(scope, config, team, connect_ns, operator, yunikorn, defaults, DEFAULTS_CONFIG_MAP)


def _spark_operator_images(registry: Registry) -> dict[str, Any]:
    """Chart 2.5.2: `image` (controller and webhook, one image) and `hook.image` take registry and repository apart; the
    pull Secrets are `image.pullSecrets` (both Deployments and the hook Job). The operator launches no image of its own:
    a SparkApplication without `image` gets none from it (spark-submit then refuses it), so the images Spark runs are
    the applications' (components/engines/spark.py)."""
    ghcr = registry.ref("ghcr.io/kubeflow/spark-operator/controller")
    return {
        "image": {"registry": ghcr.registry, "repository": ghcr.repository, "pullSecrets": named_secrets(registry)},
        "hook": {"image": {"registry": ghcr.registry,
                           "repository": registry.ref("ghcr.io/kubeflow/spark-operator/kubectl").repository}},
    }


def _yunikorn_images(registry: Registry) -> dict[str, Any]:
    """Chart 1.8.0: one `repository` and a tag per component (scheduler, plugin, admission controller, web); the pull
    Secrets by name (`imagePullSecrets`). At run time the scheduler starts placeholder pods for gang scheduling from
    `service.placeholderImage` (yunikorn-k8shim v1.8.0 defaults it to YUNIKORN_PLACEHOLDER_IMAGE); they carry the pull
    Secrets of the application's pods."""
    repository = mirror_repository(registry, "apache/yunikorn")
    return {
        "image": {"repository": repository},
        "pluginImage": {"repository": repository},
        "admissionController": {"image": {"repository": repository}},
        "web": {"image": {"repository": repository}},
        "imagePullSecrets": [registry.pull_secret] if registry.pull_secret else [],
        "yunikornDefaults": {"service.placeholderImage": registry.image(versions.YUNIKORN_PLACEHOLDER_IMAGE)},
    }


def _spark_pods(prefix: str) -> tuple[Pods, ...]:
    # The operator's webhook adds the driver's or executor's own node selector to the application's.
    return tuple(Pods(role, (f"{prefix}{role}.nodeSelector", f"{prefix}nodeSelector"), (f"{prefix}{role}.tolerations",),
                      (f"{prefix}{role}.priorityClassName",)) for role in ("driver", "executor"))


OPERATOR_CHART = EngineChart(versions.SPARK_OPERATOR, _spark_operator_images)
"""The operator's chart (also the GPU training cluster's, components/spark_rapids.py)."""
YUNIKORN_CHART = EngineChart(versions.YUNIKORN, _yunikorn_images)


ENGINE = Engine(
    name="spark",
    description="Spark ingest and ETL",
    pool=BATCH,
    quota=Quota(cpu="512", memory="4Ti"),
    buckets=BucketAccess(read_write=("raw", "warehouse")),
    catalog_role="writer",
    deploy=_deploy,
    section=SparkConfig,
    charts=(OPERATOR_CHART, YUNIKORN_CHART),
    kinds={"SparkApplication": _spark_pods("spec."), "ScheduledSparkApplication": _spark_pods("spec.template.")},
)
