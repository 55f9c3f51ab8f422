"""Apache Airflow: the scheduler of batch work, and the submitter of jobs to the GPU clusters (DESIGN section 1).

KubernetesExecutor on its own Postgres; one Airflow connection per GPU cluster, from the submitter kubeconfig
TrainingPool delivers into this namespace; sign-in through Keycloak. Airflow is batch: all its pods (task pods
included) select and tolerate the batch pool, task pods run at the batch PriorityClass, and with Spark on, DAGs
submit Spark jobs from the platform's SparkApplication template, mounted at `SPARK_TEMPLATE_DIR`, into Spark's
namespace (a Role there lets Airflow's pods manage SparkApplications and read their drivers).

The platform ships DAGs (`components/dags/`: the serving loop of docs/mlops.md, Iceberg maintenance) as the ConfigMap `platform-dags`,
mounted read-only at `DAGS_DIR` inside the dags folder of every Airflow pod (scheduler, DAG processor, triggerer, API
server and task pods all take the chart's top-level volumes), with `platform.json` (the site's settings the DAGs read)
and an `.airflowignore` that hides the ConfigMap volume's own `..data` directories, on which Airflow's DAG discovery
otherwise stops ("recursive loop"), and the module the serving loop's DAG loads beside it (`serving_loop_steps.py`,
no DAG). With compute.argocd on, the serving repository's token becomes the Airflow connection `serving_repo`, from the
Secret `serving-repo`.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pulumi
import pulumi_kubernetes as k8s

from components import iceberg_maintenance, versions, yamltext
from components.airgap import mirror_repository
from components.config import names
from components.config.schema.teams import Team
from components.constants import (
    AIRFLOW_NAMESPACE,
    MAINTENANCE_NAMESPACE,
    OIDC_CLIENT_ID,
    OIDC_CLIENT_SECRET,
    OIDC_ISSUER,
    SITE_CA_DIR,
    SITE_CA_FILE,
    SITE_CA_SECRET,
    TRAINING_SUBMISSION_CONFIG_MAP,
    TRAINING_SUBMISSION_DIR,
    submitter_connection_id,
)
from components.engines import spark
from components.engines._base import BATCH, Engine, EngineChart, EngineScope, Quota, Ui, flask_oauth_config
from components.engines._spark_trust import SparkTrust
from components.placement import Pods
from components.providers import NamespaceRef
from components.registry import UPSTREAM, Registry

WEBSERVER_CONFIG = Path(__file__).parents[1] / "airflow_webserver_config.py"
SPARK_TEMPLATE = "spark-application"
"""The ConfigMap holding the SparkApplication template (key `sparkapplication.yaml`)."""
SPARK_TEMPLATE_DIR = "/opt/airflow/spark"
DAGS_SOURCE = Path(__file__).parents[1] / "dags"
DAGS_CONFIG_MAP = "platform-dags"
DAGS_DIR = "/opt/airflow/dags/platform"
"""Inside the chart's dags folder (`dags.mountPath`, /opt/airflow/dags), which the DAG processor walks recursively."""
AIRFLOWIGNORE = ("# The ConfigMap volume's timestamped directories and its ..data link: the DAGs are the links beside them.\n..*\n"
                 "# The serving loop's steps, which its DAG loads: no DAG of its own.\nserving_loop_steps.py\n")
FEATURE_JOB = "feature-job"
"""The ConfigMap in Spark's namespace with the platform's feature job, mounted on the driver at FEATURE_JOB_DIR."""
FEATURE_JOB_SOURCE = Path(__file__).parents[1] / "feature_job.py"
FEATURE_JOB_DIR = "/opt/fab"
AUTH_MANAGER = "airflow.providers.fab.auth_manager.fab_auth_manager.FabAuthManager"
SERVING_REPO_SECRET = "serving-repo"
SERVING_REPO_CONNECTION = "serving_repo"
SPARK_SUBMITTER_RULES = [
    {"apiGroups": ["sparkoperator.k8s.io"], "resources": ["sparkapplications"],
     "verbs": ["create", "delete", "get", "list", "watch", "patch"]},
    # The SparkKubernetesOperator finds the driver pod, labels it as seen and follows its log.
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch", "patch"]},
    {"apiGroups": [""], "resources": ["pods/log"], "verbs": ["get"]},
    {"apiGroups": [""], "resources": ["events"], "verbs": ["list"]},
]
"""What Airflow's pods may do in Spark's namespace: run SparkApplications and watch their drivers; no Secrets."""


def platform_json(platform: dict[str, Any]) -> str:
    return json.dumps(platform, indent=2, sort_keys=True)


def dag_files(platform: dict[str, Any]) -> dict[str, str]:
    """The ConfigMap `platform-dags`: every DAG of components/dags, its `.airflowignore` and `platform.json`."""
    files = {path.name: path.read_text() for path in sorted(DAGS_SOURCE.glob("*.py"))}
    return {**files, ".airflowignore": AIRFLOWIGNORE, "platform.json": platform_json(platform)}


def serving_loops(teams: Mapping[str, Team]) -> dict[str, dict[str, Any]]:
    """`platform.json` `serving_loop`: per team with one (`teams.<team>.serving_loop`), the Airflow role its DAG's
    access_control names (the team's Keycloak group, which the API server maps to the role of the same name), its
    training image repositories and its feature sets."""
    return {team: {"role": names.TEAM_GROUP(team), "training_images": list(t.serving_loop.training_images),
                   "features": {key: f.model_dump(mode="json") for key, f in t.serving_loop.features.items()}}
            for team, t in sorted(teams.items()) if t.serving_loop is not None}


def team_roles(teams: Mapping[str, Team]) -> tuple[str, ...]:
    """Airflow's team roles (`TEAM_ROLES` of the API server's config): one per team, named as its Keycloak group."""
    return tuple(names.TEAM_GROUP(team) for team in sorted(teams))


def platform_settings(*, models_bucket: str, checkpoints_bucket: str, spark_on: bool, serving_repo: dict[str, str] | None,
                      registry: Registry = UPSTREAM, maintenance: dict[str, Any] | None = None,
                      teams: Mapping[str, Team] | None = None) -> dict[str, Any]:
    """`platform.json`: what the platform's DAGs read about the site (components/dags/serving_loop.py): the images of the
    Jobs they start come from `registry`, whose pull Secret those Jobs name (`image_pull_secrets`, only if it has one);
    the feature step's Spark image, version and packages are the platform's (it runs as the Spark engine); the teams'
    serving loops (`serving_loops`); `iceberg_maintenance` (components/dags/iceberg_maintenance.py), its schedule and
    SparkApplications, or None."""
    return {
        "iceberg_maintenance": maintenance,
        "models_bucket": models_bucket,
        "checkpoints_bucket": checkpoints_bucket,
        "images": {"s3": registry.image(versions.WEIGHTS_SYNC_IMAGE), "python": registry.image(versions.SETUP_IMAGE)},
        **({"image_pull_secrets": registry.pull_secrets} if registry.pull_secret else {}),
        "spark": {
            "namespace": spark.ENGINE.namespace,
            "template": f"{SPARK_TEMPLATE_DIR}/sparkapplication.yaml",
            "image": registry.image(versions.SPARK_IMAGE),
            "spark_version": versions.SPARK_VERSION,
            "packages": list(iceberg_maintenance.ICEBERG_PACKAGES),
            "feature_job": {"config_map": FEATURE_JOB, "mount_path": FEATURE_JOB_DIR, "file": FEATURE_JOB_SOURCE.name},
        } if spark_on else None,
        "serving_loop": serving_loops(teams or {}) if spark_on else {},
        "training_submission": f"{TRAINING_SUBMISSION_DIR}/submission.json",
        "serving_repo": serving_repo,
    }


def serving_repo_settings(argocd: Any, site: str, writable: bool = True, site_ca_domain: str | None = None) -> dict[str, str | None] | None:
    """The serving repository as the DAGs use it (compute.argocd), or None without one; its `connection` is None when
    Airflow has no token that may push (`servingRepoWriteToken`), and the DAG then prints its change. With
    `site_ca_domain` (the site has its own CA, which issued the certificates under that domain) a repository under it
    gets `ca_file`, the site CA's file every Airflow pod mounts, which the DAG's git and pull request call verify with."""
    repo = argocd.serving_repo
    if not argocd.enabled or repo is None:
        return None
    settings = {"url": str(repo.url), "revision": repo.revision, "path": repo.path or f"sites/{site}", "username": repo.username,
                "connection": SERVING_REPO_CONNECTION if writable else None}
    host = (urlsplit(str(repo.url)).hostname or "").lower()
    if site_ca_domain and (host == site_ca_domain.lower() or host.endswith(f".{site_ca_domain.lower()}")):
        settings["ca_file"] = SITE_CA_FILE
    return settings


def serving_repo_connection(url: str, username: str, token: str) -> str:
    """The Airflow connection `serving_repo` (JSON, as AIRFLOW_CONN_SERVING_REPO reads it): the token as its password."""
    return json.dumps({"conn_type": "http", "host": url, "login": username, "password": token})


def _deploy(scope: EngineScope) -> None:
    ns = ENGINE.namespace
    ns_resource = scope.namespace(ENGINE)
    oidc = scope.oidc_secret(ENGINE, ns_resource)
    owner, password = scope.database(ENGINE, ns_resource)
    keys = scope.secret("airflow-keys", "airflow-keys", ns, {
        # A Fernet key is 32 bytes, url-safe base64 encoded.
        "fernet-key": scope.random("airflow-fernet", 32).apply(lambda k: base64.urlsafe_b64encode(k.encode()).decode()),
        "api-secret-key": scope.random("airflow-api-secret"),
        "jwt-secret": scope.random("airflow-jwt-secret"),
        "connection": password.apply(lambda p: f"postgresql://airflow:{p}@airflow-db-rw.{ns}.svc:5432/airflow?sslmode=require"),
    }, ns_resource)
    gpus = [g.key for g in scope.gpu_clusters]
    volumes = [{"name": names.SUBMITTER_KUBECONFIG(g), "secret": {"secretName": names.SUBMITTER_KUBECONFIG(g)}} for g in gpus]
    mounts = [{"name": names.SUBMITTER_KUBECONFIG(g), "mountPath": f"/opt/airflow/kube/{g}", "readOnly": True} for g in gpus]
    delivered = []
    spark_on = spark.ENGINE.config(scope.compute).enabled
    maintenance = scope.compute.iceberg_maintenance
    registry = scope.cluster.registry
    catalog_uri = scope.storage.catalog_uri
    spark_trust = SparkTrust(scope.storage.s3_ca_pem)
    if spark_on:
        delivered.append(scope.config_map(SPARK_TEMPLATE, ns, {
            "sparkapplication.yaml": catalog_uri.apply(lambda uri: yamltext.dump(spark.spark_application_template(uri, registry, spark_trust))),
        }, ns_resource))
        volumes.append({"name": SPARK_TEMPLATE, "configMap": {"name": SPARK_TEMPLATE}})
        mounts.append({"name": SPARK_TEMPLATE, "mountPath": SPARK_TEMPLATE_DIR, "readOnly": True})
        _spark_submitter(scope)
        if iceberg_maintenance.enabled(maintenance):
            delivered.extend(_maintenance(scope))
    site = scope.cluster.name.removesuffix(f"-{scope.cluster.key}")  # a ClusterRef's name is <site>-<key>
    serving_repo = serving_repo_settings(scope.compute.argocd, site, writable=scope.serving_repo_write_token is not None,
                                         site_ca_domain=scope.domain if scope.storage.admin_endpoint.ca_bundle is not None else None)

    def platform(uri: str) -> dict[str, Any]:
        return platform_settings(models_bucket=scope.storage.bucket_of("models"), checkpoints_bucket=scope.storage.bucket_of("checkpoints"),
                                 spark_on=spark_on, serving_repo=serving_repo, registry=registry, teams=scope.teams,
                                 maintenance=iceberg_maintenance.dag_settings(
                                     maintenance, spark.spark_application_template(uri, registry, spark_trust), registry)
                                 if spark_on else None)

    # platform.json holds the maintenance applications, which carry the catalog's URI (an output of the storage cluster).
    files: dict[str, pulumi.Input[str]] = {**dag_files({}), "platform.json": catalog_uri.apply(lambda uri: platform_json(platform(uri)))}
    delivered.append(scope.config_map(DAGS_CONFIG_MAP, ns, files, ns_resource))
    # The submission contract TrainingPool writes here, read by the DAGs (not waited for: the kubelet mounts it once it exists).
    for name, path in ((DAGS_CONFIG_MAP, DAGS_DIR), (TRAINING_SUBMISSION_CONFIG_MAP, TRAINING_SUBMISSION_DIR)):
        volumes.append({"name": name, "configMap": {"name": name}})
        mounts.append({"name": name, "mountPath": path, "readOnly": True})
    secret_env = []
    if serving_repo is not None and serving_repo["connection"] is not None:
        delivered.append(scope.secret(SERVING_REPO_SECRET, SERVING_REPO_SECRET, ns, {
            "connection": pulumi.Output.secret(scope.serving_repo_write_token).apply(
                lambda token: serving_repo_connection(serving_repo["url"], serving_repo["username"], token)),
        }, ns_resource))
        secret_env.append({"envName": f"AIRFLOW_CONN_{SERVING_REPO_CONNECTION.upper()}", "secretName": SERVING_REPO_SECRET,
                           "secretKey": "connection"})
    connections = [
        {"name": f"AIRFLOW_CONN_{submitter_connection_id(g).upper()}",
         "value": json.dumps({"conn_type": "kubernetes", "extra": {"kube_config_path": f"/opt/airflow/kube/{g}/kubeconfig"}})}
        for g in gpus
    ]
    ca = scope.storage.site_ca(NamespaceRef(scope.cluster, ns, ns_resource))
    trust_env = []
    if ca.secret is not None:
        # The sign-in (Flask-AppBuilder's authlib client, a requests Session) verifies the realm against the file
        # REQUESTS_CA_BUNDLE names: the site's CA, mounted in every Airflow pod, named in the API server's environment.
        volumes.append({"name": "site-ca", "secret": {"secretName": SITE_CA_SECRET}})
        mounts.append({"name": "site-ca", "mountPath": SITE_CA_DIR, "readOnly": True})
        trust_env.append({"name": "REQUESTS_CA_BUNDLE", "value": SITE_CA_FILE})
    values = {
        "executor": "KubernetesExecutor",
        "postgresql": {"enabled": False},
        "data": {"metadataSecretName": "airflow-keys"},
        "fernetKeySecretName": "airflow-keys",
        "apiSecretKeySecretName": "airflow-keys",
        "jwtSecretName": "airflow-keys",
        "env": connections,
        **({"secret": secret_env} if secret_env else {}),
        "volumes": volumes,
        "volumeMounts": mounts,
        # Every Airflow pod, task pods included (the chart's pod template falls back to these).
        "nodeSelector": ENGINE.pool.node_selector,
        "tolerations": ENGINE.pool.tolerations,
        "workers": {"kubernetes": {"priorityClassName": ENGINE.pool.priority_class}},
        "apiServer": {
            "apiServerConfig": flask_oauth_config(WEBSERVER_CONFIG, {"TEAM_ROLES": team_roles(scope.teams)}),
            "env": [
                {"name": key, "valueFrom": {"secretKeyRef": {"name": "airflow-oidc", "key": key}}}
                for key in (OIDC_CLIENT_ID, OIDC_CLIENT_SECRET, OIDC_ISSUER)
            ] + trust_env,
        },
        # The chart's default, said here: the teams' roles and their DAGs' access_control are the FAB auth manager's.
        "config": {"api": {"base_url": f"https://{scope.hostname(ENGINE)}"}, "core": {"auth_manager": AUTH_MANAGER}},
        # As Helm hooks these jobs would run after Helm's wait, which waits for pods that wait for the
        # migration: a deadlock. As plain Jobs they run during the wait (the chart's advice for --wait).
        "migrateDatabaseJob": {"useHelmHooks": False, "applyCustomEnv": False},
        # The chart's default user is `admin`/`admin` with the Admin role, and Airflow 3's `/auth/token` trades a database
        # user's password for a token whatever the UI's sign-in: no account but Keycloak's (docs/operations.md).
        "createUserJob": {"useHelmHooks": False, "applyCustomEnv": False, "defaultUser": {"enabled": False}},
    }
    # Its pods read the OIDC client and `airflow-keys` (database connection, keys) when they start, and mount the DAGs,
    # the Spark template and the serving repository's connection; the maintenance DAG's job, rights and keys (`delivered`).
    scope.release("airflow", versions.AIRFLOW, ns, values, [oidc, keys, owner, *delivered, *ca.resources()])
    scope.route(ENGINE, ns_resource)


def _spark_submitter(scope: EngineScope) -> None:
    """Airflow's pods may run SparkApplications in Spark's namespace (SPARK_SUBMITTER_RULES), and Spark's driver mounts the
    platform's feature job from there."""
    spark_ns = spark.ENGINE.namespace
    spark_ns_resource = scope.namespace(spark.ENGINE)
    scope.config_map(FEATURE_JOB, spark_ns, {FEATURE_JOB_SOURCE.name: FEATURE_JOB_SOURCE.read_text()}, spark_ns_resource)
    role = k8s.rbac.v1.Role(
        f"{scope.prefix}-airflow-spark-role", metadata={"name": "airflow-spark-submitter", "namespace": spark_ns},
        # the namespace must exist before anything is created in it
        rules=SPARK_SUBMITTER_RULES, opts=scope.after(spark_ns_resource),
    )
    k8s.rbac.v1.RoleBinding(
        f"{scope.prefix}-airflow-spark-binding", metadata={"name": "airflow-spark-submitter", "namespace": spark_ns},
        role_ref={"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "airflow-spark-submitter"},
        # Task pods run as the chart's worker ServiceAccount; the group names every Airflow ServiceAccount without
        # depending on the chart's naming of it.
        subjects=[{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": f"system:serviceaccounts:{AIRFLOW_NAMESPACE}"}],
        # the Role first: binding a Role the API server cannot resolve takes the `bind` verb
        opts=scope.after(role),
    )


def _maintenance(scope: EngineScope) -> list[pulumi.Resource]:
    """In the maintenance namespace (spark.maintenance_namespace), what the maintenance SparkApplications read: the
    platform's job and the maintenance principal's Secrets (components/iceberg_maintenance.py); and Airflow's right to
    submit them there (SPARK_SUBMITTER_RULES: no Secrets). Nothing else runs there: the operator's Role for the drivers'
    ServiceAccount names no Secrets either, and Spark's other jobs run in Spark's namespace."""
    name = MAINTENANCE_NAMESPACE
    ns = spark.maintenance_namespace(scope)
    job = scope.config_map(iceberg_maintenance.JOB_CONFIG_MAP, name,
                           {iceberg_maintenance.JOB_SOURCE.name: iceberg_maintenance.JOB_SOURCE.read_text()}, ns)
    role = k8s.rbac.v1.Role(
        f"{scope.prefix}-airflow-maintenance-role", metadata={"name": "airflow-spark-submitter", "namespace": name},
        # the namespace must exist before anything is created in it
        rules=SPARK_SUBMITTER_RULES, opts=scope.after(ns),
    )
    # Every Airflow task holds these rights: the policy admits the platform's applications only (iceberg_maintenance.py).
    config, registry, trust = scope.compute.iceberg_maintenance, scope.cluster.registry, SparkTrust(scope.storage.s3_ca_pem)
    policy = k8s.admissionregistration.v1.ValidatingAdmissionPolicy(
        f"{scope.prefix}-maintenance-policy", metadata={"name": iceberg_maintenance.ADMISSION_POLICY},
        spec=scope.storage.catalog_uri.apply(lambda uri: iceberg_maintenance.admission_policy(
            iceberg_maintenance.applications(config, spark.spark_application_template(uri, registry, trust), registry))),
        opts=scope.child,
    )
    guard = k8s.admissionregistration.v1.ValidatingAdmissionPolicyBinding(
        f"{scope.prefix}-maintenance-policy-binding", metadata={"name": iceberg_maintenance.ADMISSION_POLICY},
        spec={"policyName": iceberg_maintenance.ADMISSION_POLICY, "validationActions": ["Deny"]},
        # the binding puts the guard in force only once the policy it names exists
        opts=scope.after(policy),
    )
    binding = k8s.rbac.v1.RoleBinding(
        f"{scope.prefix}-airflow-maintenance-binding", metadata={"name": "airflow-spark-submitter", "namespace": name},
        role_ref={"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "airflow-spark-submitter"},
        subjects=[{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": f"system:serviceaccounts:{AIRFLOW_NAMESPACE}"}],
        # the Role first: binding a Role the API server cannot resolve takes the `bind` verb; no rights before the guard
        opts=scope.after(role, guard),
    )
    to = NamespaceRef(scope.cluster, name, ns)
    return [job, binding, *scope.storage.maintenance_grants(to)]


def _airflow_images(registry: Registry) -> dict[str, Any]:
    """Chart 1.22.0 (no package in ../shared/charts: from its values.yaml): every Airflow image (scheduler, API server,
    DAG processor, triggerer, migration Jobs and the KubernetesExecutor's task pods) falls back to
    `defaultAirflowRepository`; the others are `images.<name>.repository` (statsd, redis, pgbouncer and its exporter,
    gitSync). `registry.secretName` names the pull Secret in every pod, the task pods' template included."""
    airflow = mirror_repository(registry, "apache/airflow")
    return {
        "defaultAirflowRepository": airflow,
        "images": {
            "statsd": {"repository": mirror_repository(registry, "quay.io/prometheus/statsd-exporter")},
            "redis": {"repository": mirror_repository(registry, "redis")},
            "pgbouncer": {"repository": airflow},
            "pgbouncerExporter": {"repository": airflow},
            "gitSync": {"repository": mirror_repository(registry, "registry.k8s.io/git-sync/git-sync")},
        },
        **({"registry": {"secretName": registry.pull_secret}} if registry.pull_secret else {}),
    }


ENGINE = Engine(
    name=AIRFLOW_NAMESPACE,
    description="Apache Airflow",
    pool=BATCH,
    quota=Quota(cpu="64", memory="256Gi"),
    ui=Ui(host="airflow", service="airflow-api-server", port=8080, callback="/auth/oauth-authorized/keycloak"),
    database=True,
    deploy=_deploy,
    charts=(EngineChart(versions.AIRFLOW, _airflow_images, (
        # Every Airflow pod takes the top-level keys; task pods (the KubernetesExecutor's pod template) read
        # workers.kubernetes first, then the deprecated workers keys, then the top level.
        Pods("task", ("workers.kubernetes.nodeSelector", "workers.nodeSelector", "nodeSelector"),
             ("workers.kubernetes.tolerations", "workers.tolerations", "tolerations"),
             ("workers.kubernetes.priorityClassName", "workers.priorityClassName")),
    )),),
)
