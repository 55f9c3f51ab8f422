"""Image values of the charts of the compute part of the platform (components/airgap).

Each chart takes its images apart differently (registry, repository and tag; a name and a tag; one whole reference): every
entry keeps the chart's own tag and moves the repository under the mirror (`Registry.ref`), so that a chart upgrade
brings its own tags along. Images a component sets itself (the Spark images, StarRocks' FE and CN, the single-user
images from config) are moved where they are set, by `Registry.image`.
"""

from __future__ import annotations

from typing import Any

from components import versions
from components.registry import Registry


def _repository(registry: Registry, source: str) -> str:
    """The mirror's repository of `source` (a repository without a tag): `<images>/<source host>/<path>`."""
    ref = registry.ref(source)
    return f"{ref.registry}/{ref.repository}"


def _named_secrets(registry: Registry) -> list[dict[str, str]]:
    """`imagePullSecrets` as most charts take it (a list of `{name: ...}`), or none."""
    return registry.pull_secrets


def _spark_operator(registry: Registry) -> dict[str, Any]:
    """Chart 2.5.2: `image` (controller and webhook, one image) and `hook.image` take registry and repository apart; the
    pull Secrets are `image.pullSecrets` (both Deployments and the hook Job). The operator launches no image of its own:
    a SparkApplication without `image` gets none from it (spark-submit then refuses it), so the images Spark runs are
    the applications' (components/engines/spark.py)."""
    ghcr = registry.ref("ghcr.io/kubeflow/spark-operator/controller")
    return {
        "image": {"registry": ghcr.registry, "repository": ghcr.repository, "pullSecrets": _named_secrets(registry)},
        "hook": {"image": {"registry": ghcr.registry,
                           "repository": registry.ref("ghcr.io/kubeflow/spark-operator/kubectl").repository}},
    }


def _yunikorn(registry: Registry) -> dict[str, Any]:
    """Chart 1.8.0: one `repository` and a tag per component (scheduler, plugin, admission controller, web); the pull
    Secrets by name (`imagePullSecrets`). At run time the scheduler starts placeholder pods for gang scheduling from
    `service.placeholderImage` (yunikorn-k8shim v1.8.0 defaults it to YUNIKORN_PLACEHOLDER_IMAGE); they carry the pull
    Secrets of the application's pods."""
    repository = _repository(registry, "apache/yunikorn")
    return {
        "image": {"repository": repository},
        "pluginImage": {"repository": repository},
        "admissionController": {"image": {"repository": repository}},
        "web": {"image": {"repository": repository}},
        "imagePullSecrets": [registry.pull_secret] if registry.pull_secret else [],
        "yunikornDefaults": {"service.placeholderImage": registry.image(versions.YUNIKORN_PLACEHOLDER_IMAGE)},
    }


def _airflow(registry: Registry) -> dict[str, Any]:
    """Chart 1.22.0 (no package in ../shared/charts: from its values.yaml): every Airflow image (scheduler, API server,
    DAG processor, triggerer, migration Jobs and the KubernetesExecutor's task pods) falls back to
    `defaultAirflowRepository`; the others are `images.<name>.repository` (statsd, redis, pgbouncer and its exporter,
    gitSync). `registry.secretName` names the pull Secret in every pod, the task pods' template included."""
    airflow = _repository(registry, "apache/airflow")
    return {
        "defaultAirflowRepository": airflow,
        "images": {
            "statsd": {"repository": _repository(registry, "quay.io/prometheus/statsd-exporter")},
            "redis": {"repository": _repository(registry, "redis")},
            "pgbouncer": {"repository": airflow},
            "pgbouncerExporter": {"repository": airflow},
            "gitSync": {"repository": _repository(registry, "registry.k8s.io/git-sync/git-sync")},
        },
        **({"registry": {"secretName": registry.pull_secret}} if registry.pull_secret else {}),
    }


def _trino(registry: Registry) -> dict[str, Any]:
    """Chart 1.42.2: `image.registry` and `image.repository` (coordinator and workers), the JMX exporter's whole
    reference (off here), `imagePullSecrets`. Its helm-test pods hard-code their images; the program never runs them
    (`helm test`)."""
    trino = registry.ref("trinodb/trino")
    return {
        "image": {"registry": trino.registry, "repository": trino.repository},
        "jmx": {"exporter": {"image": registry.image("bitnamilegacy/jmx-exporter:1.4.0")}},
        "imagePullSecrets": _named_secrets(registry),
    }


def _starrocks_operator(registry: Registry) -> dict[str, Any]:
    """Chart operator 1.11.5: the operator's `starrocksOperator.image.repository` and pull Secrets. The FE and CN images
    are the StarRocksCluster's (components/engines/starrocks.py); the operator launches nothing else while the cluster
    has no FE proxy (whose default is nginx:1.24.0)."""
    return {"starrocksOperator": {"image": {"repository": _repository(registry, "starrocks/operator")},
                                  "imagePullSecrets": _named_secrets(registry)}}


def _superset(registry: Registry) -> dict[str, Any]:
    """Chart 0.22.4 (no package in ../shared/charts: from its values.yaml): `image.repository` (web, worker, init Job),
    `initImage.repository` (the dockerize wait containers), the websocket server's (off), `imagePullSecrets`. Its
    postgresql and redis subcharts are off (components/engines/superset.py)."""
    return {
        "image": {"repository": _repository(registry, "apachesuperset.docker.scarf.sh/apache/superset")},
        "initImage": {"repository": _repository(registry, "apache/superset")},
        "supersetWebsockets": {"image": {"repository": _repository(registry, "oneacrefund/superset-websocket")}},
        "imagePullSecrets": _named_secrets(registry),
    }


def _jupyterhub(registry: Registry) -> dict[str, Any]:
    """Chart 4.4.0: every image is a `name` and a `tag`: hub, proxy (configurable-http-proxy, and traefik for autohttps),
    secret-sync, network-tools (the servers' metadata-blocking init container), the user-scheduler (kube-scheduler),
    the placeholder and pre-puller pause images, the image awaiter and the default single-user image. `imagePullSecrets`
    reaches every chart pod and, through the hub's KubeSpawner, every single-user server. A single-user image set in
    config is moved where it is set (components/notebooks.py)."""
    def name(source: str) -> dict[str, str]:
        return {"name": _repository(registry, source)}

    return {
        "imagePullSecrets": [registry.pull_secret] if registry.pull_secret else [],
        "hub": {"image": name("quay.io/jupyterhub/k8s-hub")},
        "proxy": {
            "chp": {"image": name("quay.io/jupyterhub/configurable-http-proxy")},
            "traefik": {"image": name("traefik")},
            "secretSync": {"image": name("quay.io/jupyterhub/k8s-secret-sync")},
        },
        "singleuser": {
            "image": name("quay.io/jupyterhub/k8s-singleuser-sample"),
            "networkTools": {"image": name("quay.io/jupyterhub/k8s-network-tools")},
        },
        "scheduling": {
            "userScheduler": {"image": name("registry.k8s.io/kube-scheduler")},
            "userPlaceholder": {"image": name("registry.k8s.io/pause")},
        },
        "prePuller": {
            "hook": {"image": name("quay.io/jupyterhub/k8s-image-awaiter")},
            "pause": {"image": name("registry.k8s.io/pause")},
        },
    }


def _argo_cd(registry: Registry) -> dict[str, Any]:
    """Chart 10.1.1: `global.image.repository` is every Argo CD component's (controller, server, repo server and its
    copyutil init container, ApplicationSet, notifications, commit server, the Redis secret init Job); Dex, Redis and
    its exporter, the redis-ha subchart's Redis, exporter and HAProxy, and the server's extension installer have their
    own. `global.imagePullSecrets` reaches every pod."""
    return {
        "global": {"image": {"repository": _repository(registry, "quay.io/argoproj/argocd")},
                   "imagePullSecrets": _named_secrets(registry)},
        "dex": {"image": {"repository": _repository(registry, "ghcr.io/dexidp/dex")}},
        "redis": {"image": {"repository": _repository(registry, "ecr-public.aws.com/docker/library/redis")},
                  "exporter": {"image": {"repository": _repository(registry, "ghcr.io/oliver006/redis_exporter")}}},
        "redis-ha": {
            "image": {"repository": _repository(registry, "ecr-public.aws.com/docker/library/redis")},
            "exporter": {"image": _repository(registry, "ghcr.io/oliver006/redis_exporter")},
            "haproxy": {"image": {"repository": _repository(registry, "ecr-public.aws.com/docker/library/haproxy")}},
        },
        "server": {"extensions": {"image": {"repository": _repository(registry, "quay.io/argoprojlabs/argocd-extension-installer")}}},
    }


VALUES: dict[str, Any] = {
    "spark-operator": _spark_operator,
    "yunikorn": _yunikorn,
    "airflow": _airflow,
    "trino": _trino,
    "operator": _starrocks_operator,
    "superset": _superset,
    "jupyterhub": _jupyterhub,
    "argo-cd": _argo_cd,
}
