"""Apache Airflow: the scheduler of batch work, and the submitter of jobs to the GPU clusters (DESIGN section 1).

KubernetesExecutor on its own Postgres; one Airflow connection per GPU cluster, from the submitter kubeconfig
TrainingPool delivers into this namespace; sign-in through Keycloak.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

from components import versions
from components.constants import AIRFLOW_NAMESPACE, OIDC_CLIENT_ID, OIDC_CLIENT_SECRET, OIDC_ISSUER, submitter_kubeconfig_secret
from components.engines._base import Engine, EngineScope, Quota, Ui, flask_oauth_config

WEBSERVER_CONFIG = Path(__file__).parents[1] / "airflow_webserver_config.py"


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
    release = scope.release("airflow", versions.AIRFLOW, ns, values, [oidc, keys, owner])
    scope.route(ENGINE, [release])


ENGINE = Engine(
    name=AIRFLOW_NAMESPACE,
    description="Apache Airflow",
    quota=Quota(cpu="64", memory="256Gi"),
    ui=Ui(host="airflow", service="airflow-api-server", port=8080, callback="/auth/oauth-authorized/keycloak"),
    database=True,
    deploy=_deploy,
)
