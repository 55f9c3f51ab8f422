"""Apache Superset: dashboards on StarRocks and Trino (DESIGN section 1, SPC/OEE dashboards).

Its metadata in its own Postgres; no Redis and so no Celery worker; sign-in through Keycloak only (no
local admin with the chart's default password). Superset is interactive: its pods and its init Job run in the
interactive pool at its PriorityClass.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from components import versions
from components.airgap import mirror_repository, named_secrets
from components.constants import SITE_CA_DIR, SITE_CA_FILE, SITE_CA_SECRET
from components.engines._base import INTERACTIVE, Engine, EngineChart, EngineScope, Quota, Ui, flask_oauth_config
from components.placement import Pods, same
from components.providers import NamespaceRef
from components.registry import Registry

CONFIG_OVERRIDES = Path(__file__).parents[1] / "superset_config_overrides.py"
USER = 1000


def _deploy(scope: EngineScope) -> None:
    ns = ENGINE.namespace
    ns_resource = scope.namespace(ENGINE)
    scope.oidc_secret(ENGINE, ns_resource)
    owner, password = scope.database(ENGINE, ns_resource)
    env = scope.secret("superset-env", "superset-env", ns, {
        "DB_HOST": f"superset-db-rw.{ns}.svc",
        "DB_PORT": "5432",
        "DB_USER": "superset",
        "DB_PASS": password,
        "DB_NAME": "superset",
        "SUPERSET_SECRET_KEY": scope.random("superset-secret-key", 64),
    }, ns_resource)
    values = {
        "secretEnv": {"create": False},
        "envFromSecret": "superset-env",
        "envFromSecrets": ["superset-oidc"],
        "postgresql": {"enabled": False},
        "redis": {"enabled": False},
        # No Redis, so no Celery: the worker runs no pod (the chart reads replicas.replicaCount, not replicaCount).
        "supersetWorker": {"replicas": {"enabled": True, "replicaCount": 0}},
        # Sign-in is Keycloak's: no local admin with the chart's default password.
        "init": {"createAdmin": False, "priorityClassName": ENGINE.pool.priority_class},
        # Every Superset pod and the init Job; the web pods' PriorityClass (the init Job's is under init).
        "nodeSelector": ENGINE.pool.node_selector,
        "tolerations": ENGINE.pool.tolerations,
        "priorityClassName": ENGINE.pool.priority_class,
        "supersetCeleryBeat": {"enabled": False},
        "runAsUser": USER,
        "configOverrides": {"fab": flask_oauth_config(CONFIG_OVERRIDES)},
    }
    ca = scope.storage.site_ca(NamespaceRef(scope.cluster, ns, ns_resource))
    if ca.secret is not None:
        # The sign-in (Flask-AppBuilder's authlib client, a requests Session) verifies the realm against the file
        # REQUESTS_CA_BUNDLE names: the site's CA, mounted in every Superset pod.
        values["extraEnv"] = {"REQUESTS_CA_BUNDLE": SITE_CA_FILE}
        values["extraVolumes"] = [{"name": "site-ca", "secret": {"secretName": SITE_CA_SECRET}}]
        values["extraVolumeMounts"] = [{"name": "site-ca", "mountPath": SITE_CA_DIR, "readOnly": True}]
    # its pods read their database and secret key from `superset-env` (and the site CA) when they start
    scope.release("superset", versions.SUPERSET, ns, values, [env, owner, *ca.resources()])
    scope.route(ENGINE, ns_resource)


def _superset_images(registry: Registry) -> dict[str, Any]:
    """Chart 0.22.4 (no package in ../shared/charts: from its values.yaml): `image.repository` (web, worker, init Job),
    `initImage.repository` (the dockerize wait containers), the websocket server's (off), `imagePullSecrets`. Its
    postgresql and redis subcharts are off (components/engines/superset.py)."""
    return {
        "image": {"repository": mirror_repository(registry, "apachesuperset.docker.scarf.sh/apache/superset")},
        "initImage": {"repository": mirror_repository(registry, "apache/superset")},
        "supersetWebsockets": {"image": {"repository": mirror_repository(registry, "oneacrefund/superset-websocket")}},
        "imagePullSecrets": named_secrets(registry),
    }


ENGINE = Engine(
    name="superset",
    description="Apache Superset",
    pool=INTERACTIVE,
    quota=Quota(cpu="32", memory="128Gi"),
    ui=Ui(host="superset", service="superset", port=8088, callback="/oauth-authorized/keycloak"),
    database=True,
    deploy=_deploy,
    charts=(EngineChart(versions.SUPERSET, _superset_images, (
        same("web"), Pods("init", ("nodeSelector",), ("tolerations",), ("init.priorityClassName",)))),),
)
