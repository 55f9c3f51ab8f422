"""Apache Airflow: the scheduler of batch work, and the submitter of jobs to the GPU clusters (DESIGN section 1).

KubernetesExecutor on its own Postgres; one Airflow connection per GPU cluster, from the submitter kubeconfig
TrainingPool delivers into this namespace; sign-in through Keycloak. Airflow is batch: all its pods (task pods
included) select and tolerate the batch pool, task pods run at the batch PriorityClass, and with Spark on, DAGs
submit Spark jobs from the platform's SparkApplication template, mounted at `SPARK_TEMPLATE_DIR`.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

import yaml

from components import versions
from components.constants import AIRFLOW_NAMESPACE, OIDC_CLIENT_ID, OIDC_CLIENT_SECRET, OIDC_ISSUER, submitter_kubeconfig_secret
from components.engines import spark
from components.engines._base import BATCH, Engine, EngineScope, Quota, Ui, flask_oauth_config

WEBSERVER_CONFIG = Path(__file__).parents[1] / "airflow_webserver_config.py"
SPARK_TEMPLATE = "spark-application"
"""The ConfigMap holding the SparkApplication template (key `sparkapplication.yaml`)."""
SPARK_TEMPLATE_DIR = "/opt/airflow/spark"


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
    volumes = [{"name": submitter_kubeconfig_secret(g), "secret": {"secretName": submitter_kubeconfig_secret(g)}} for g in gpus]
    mounts = [{"name": submitter_kubeconfig_secret(g), "mountPath": f"/opt/airflow/kube/{g}", "readOnly": True} for g in gpus]
    delivered = []
    if spark.ENGINE.config(scope.compute).enabled:
        delivered.append(scope.config_map(SPARK_TEMPLATE, ns, {
            "sparkapplication.yaml": yaml.safe_dump(spark.spark_application_template(), sort_keys=False),
        }, ns_resource))
        volumes.append({"name": SPARK_TEMPLATE, "configMap": {"name": SPARK_TEMPLATE}})
        mounts.append({"name": SPARK_TEMPLATE, "mountPath": SPARK_TEMPLATE_DIR, "readOnly": True})
    connections = [
        {"name": f"AIRFLOW_CONN_GPU_{g.upper().replace('-', '_')}",
         "value": json.dumps({"conn_type": "kubernetes", "extra": {"kube_config_path": f"/opt/airflow/kube/{g}/kubeconfig"}})}
        for g in gpus
    ]
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
        # Every Airflow pod, task pods included (the chart's pod template falls back to these).
        "nodeSelector": ENGINE.pool.node_selector,
        "tolerations": ENGINE.pool.tolerations,
        "workers": {"kubernetes": {"priorityClassName": ENGINE.pool.priority_class}},
        "apiServer": {
            "apiServerConfig": flask_oauth_config(WEBSERVER_CONFIG),
            "env": [
                {"name": key, "valueFrom": {"secretKeyRef": {"name": "airflow-oidc", "key": key}}}
                for key in (OIDC_CLIENT_ID, OIDC_CLIENT_SECRET, OIDC_ISSUER)
            ],
        },
        "config": {"api": {"base_url": f"https://{scope.hostname(ENGINE)}"}},
        # As Helm hooks these jobs would run after Helm's wait, which waits for pods that wait for the
        # migration: a deadlock. As plain Jobs they run during the wait (the chart's advice for --wait).
        "migrateDatabaseJob": {"useHelmHooks": False, "applyCustomEnv": False},
        "createUserJob": {"useHelmHooks": False, "applyCustomEnv": False},
    }
    release = scope.release("airflow", versions.AIRFLOW, ns, values, [oidc, keys, owner, *delivered])
    scope.route(ENGINE, [release])


ENGINE = Engine(
    name=AIRFLOW_NAMESPACE,
    description="Apache Airflow",
    pool=BATCH,
    quota=Quota(cpu="64", memory="256Gi"),
    ui=Ui(host="airflow", service="airflow-api-server", port=8080, callback="/auth/oauth-authorized/keycloak"),
    database=True,
    deploy=_deploy,
)
