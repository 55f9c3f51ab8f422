"""A served model's objects: the vLLM Deployment, its Service, PodDisruptionBudget and HTTPRoute, and a canary's
Deployment and Service (DESIGN section 1, inference: "model path/version in the serving manifest").

Plain manifests, built from the config and the model's sizing with no Pulumi resource in sight. InferencePool
registers them (`inference.delivery: pulumi`); `fabctl serving render` writes them as the serving repository that
Argo CD applies (`argocd`). One builder serves both, so the two deliveries cannot drift apart.

Weights: an init container mirrors `<source>[<revision>/]` of the versioned models bucket to the pod's NVMe cache with
the inference principal's read-only keys, under `/models/<model>[/<revision>]`: the revision is part of the cache path,
so one revision is never served from another's files. A canary is the next revision beside the current one, sent a
share of the model's requests by the route's backend weights; its pods carry `fab.internal/canary-of` instead of
`fab.internal/model`, so the stable Service and PodDisruptionBudget never select them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from components import versions
from components.config import InferenceModelConfig, names
from components.constants import (
    APP_LABEL,
    MC_CA_DIR,
    MODEL_LABEL,
    S3_ACCESS_KEY,
    S3_ENDPOINT,
    S3_SECRET_KEY,
    VLLM_APP,
    s3_secret,
    site_ca_mounts,
    site_ca_volumes,
)
from components.gpu import (
    INFERENCE_NAMESPACE,
    IPOIB_NETWORK,
    NVME_STORAGE_CLASS,
    POOL_LABEL,
    RDMA_RESOURCE,
    SERVING_PRIORITY,
    toleration,
)
from components.kube import WORKLOAD_SKIPS, checkov_skips, restricted_container, restricted_pod_security_context
from components.registry import UPSTREAM, Registry

if TYPE_CHECKING:  # the sizing arithmetic is the config's to run (`SiteConfig.model_capacity`); here it is only a type
    from components.capacity import ModelCapacity

GATEWAY_NAME = "llm"
VLLM_PORT = 8000
CANARY_LABEL = "fab.internal/canary-of"
"""On a canary's pods instead of MODEL_LABEL: the model whose next revision they serve."""
REVISION_LABEL = "fab.internal/model-revision"
VLLM_USER = 10001
"""vLLM runs unprivileged (the image defaults to root); its HOME and caches are emptyDirs, so any high UID works."""
PRINCIPAL = "inference"
"""The S3 principal of weight loading (PLATFORM_ACCESS): its keys are `s3-inference`, its namespace runs as it."""

PROBE_PERIOD_SEC = 10
STARTUP_FLOOR_SEC = 1800
"""Every model gets at least 30 minutes from container start to its first healthy answer."""
STARTUP_BASE_SEC = 600
"""What a start costs besides reading the weights: CUDA context, graph capture, the KV cache's allocation."""
NVME_READ_GIB_PER_SEC = 0.5
"""Weights read from the pod's NVMe cache into GPU memory, per pod, taken low (safetensors loads at several GiB/s)."""
DOWNLOAD_GIB_PER_SEC = 0.25
"""Weights copied from AIStor to a pod's NVMe cache by its init container, taken low (a shared 100 GbE link moves several)."""
SCHEDULE_AND_PULL_SEC = 900
"""What a pod costs before its init container copies: scheduling, attaching the NVMe volume, pulling the vLLM image."""



def model_path(model: str, revision: str | None = None) -> str:
    """Where a revision's weights are in the pod (its NVMe cache): the revision is part of the path."""
    return f"/models/{model}" if revision is None else f"/models/{model}/{revision}"


def weights_source(bucket: str, source: str, revision: str | None) -> str:
    """The weights in the models bucket, under the `mc` alias `models`."""
    path = source.strip("/")
    return f"models/{bucket}/{path}" if revision is None else f"models/{bucket}/{path}/{revision}"


def route_prefix(model: str) -> str:
    return f"/models/{model}/v1"


def cache_size_gib(weights_gib: float) -> int:
    """NVMe cache per pod: the weights plus a fifth for tokenizer files and safety."""
    return max(10, math.ceil(weights_gib * 1.2))


def startup_failure_threshold(weights_gib: float) -> int:
    """Startup probe failures allowed (every PROBE_PERIOD_SEC): the base cost plus the weights at the NVMe read rate,
    never under STARTUP_FLOOR_SEC. The download from AIStor is the init container's, outside this budget."""
    budget = max(STARTUP_FLOOR_SEC, STARTUP_BASE_SEC + weights_gib / NVME_READ_GIB_PER_SEC)
    return math.ceil(budget / PROBE_PERIOD_SEC)


def rollout_timeouts(model: ServedModel, *, canary: bool = False) -> tuple[int, int]:
    """How long Pulumi may wait for a model's Deployment, in minutes: (create, update).

    pulumi-kubernetes gives up on a Deployment after 10 minutes unless told otherwise, and a vLLM pod needs the image
    pull, the weights' download and its startup budget (`startup_failure_threshold`) before it is ready: a first
    `pulumi up` would report every large model as failed while its pods were still loading. A create starts every
    replica at once; an update rolls them one at a time (`maxUnavailable: 1`, no surge), so it may take each in turn.
    """
    size = model.size
    weights_gib = size.weights_per_gpu_gib * size.tensor_parallel
    per_pod = (SCHEDULE_AND_PULL_SEC + weights_gib / DOWNLOAD_GIB_PER_SEC
               + startup_failure_threshold(weights_gib) * PROBE_PERIOD_SEC)
    replicas = model.spec.canary.replicas if canary and model.spec.canary is not None else size.replicas
    return math.ceil(per_pod / 60), math.ceil(per_pod * max(1, replicas) / 60)


@dataclass(frozen=True)
class ServingSite:
    """What every model of a site is served with: plain values from the site's config."""

    hostname: str
    """The gateway's DNS name, which every route answers on."""
    models_bucket: str
    gpu_memory_utilization: float
    site_ca: bool
    """Whether the site has a CA bundle: then the weight sync trusts it (the Secret `fab-site-ca`)."""
    s3_ipoib: tuple[str, str] | None = None
    """(the object store's IPoIB address, the S3 host name) where weights load over InfiniBand."""
    registry: Registry = UPSTREAM
    """Where the inference cluster pulls vLLM and the MinIO client from, and the pull Secret its pods name."""


@dataclass(frozen=True)
class ServedModel:
    """One model as served: its config and its sizing under the active profile."""

    key: str
    spec: InferenceModelConfig
    size: ModelCapacity


def stable_labels(model: str) -> dict[str, str]:
    """The stable Deployment's selector, which never changes (a Deployment's selector is immutable)."""
    return {APP_LABEL: VLLM_APP, MODEL_LABEL: model}


def canary_labels(model: str) -> dict[str, str]:
    return {APP_LABEL: VLLM_APP, CANARY_LABEL: model}


def deployment(site: ServingSite, model: ServedModel, *, canary: bool = False) -> dict[str, Any]:
    """The vLLM Deployment of a model's current revision, or (`canary`) of its canary's."""
    spec, size, key = model.spec, model.size, model.key
    if canary:
        assert spec.canary is not None
        revision, replicas, name, selector = spec.canary.revision, spec.canary.replicas, names.VLLM_CANARY(key), canary_labels(key)
    else:
        revision, replicas, name, selector = spec.revision, size.replicas, names.VLLM(key), stable_labels(key)
    pod_labels = {**selector, **({REVISION_LABEL: revision} if revision else {})}
    tp = size.tensor_parallel
    weights_gib = size.weights_per_gpu_gib * tp
    cache = model_path(key, revision)
    mc_env = [
        {"name": "MC_CONFIG_DIR", "value": "/work/.mc"},
        *({"name": k, "valueFrom": {"secretKeyRef": {"name": s3_secret(PRINCIPAL), "key": k}}} for k in (S3_ACCESS_KEY, S3_SECRET_KEY, S3_ENDPOINT)),
    ]
    small = {"requests": {"cpu": "500m", "memory": "512Mi"}, "limits": {"cpu": "2", "memory": "2Gi"}}
    work = {"name": "work", "mountPath": "/work"}
    init = [
        restricted_container(
            "weights-alias", site.registry.image(versions.WEIGHTS_SYNC_IMAGE), VLLM_USER,
            args=["alias", "set", "models", f"$({S3_ENDPOINT})", f"$({S3_ACCESS_KEY})", f"$({S3_SECRET_KEY})"],
            env=mc_env, resources=small, volumeMounts=[work, *site_ca_mounts(site.site_ca, MC_CA_DIR)],
        ),
        restricted_container(
            "weights-sync", site.registry.image(versions.WEIGHTS_SYNC_IMAGE), VLLM_USER,
            args=["mirror", "--overwrite", "--remove", weights_source(site.models_bucket, spec.source, revision), cache],
            env=mc_env, resources=small, volumeMounts=[work, {"name": "model-cache", "mountPath": "/models"}, *site_ca_mounts(site.site_ca, MC_CA_DIR)],
        ),
    ]
    gpu_resources: dict[str, Any] = {"nvidia.com/gpu": str(tp)}
    if site.s3_ipoib:
        gpu_resources[RDMA_RESOURCE] = "1"
    host_memory = f"{math.ceil(weights_gib) + 32}Gi"

    def health(period: int, failures: int) -> dict[str, Any]:
        return {"httpGet": {"path": "/health", "port": "http"}, "periodSeconds": period, "failureThreshold": failures}

    container = restricted_container(
        "vllm", site.registry.image(versions.VLLM_IMAGE), VLLM_USER,
        args=[
            "--model", cache,
            "--served-model-name", spec.served_name or key,
            "--tensor-parallel-size", str(tp),
            "--gpu-memory-utilization", str(site.gpu_memory_utilization),
            "--max-model-len", str(spec.max_context),
            "--port", str(VLLM_PORT),
        ],
        env=[{"name": "HOME", "value": "/home/vllm"}, {"name": "HF_HUB_OFFLINE", "value": "1"}],
        ports=[{"name": "http", "containerPort": VLLM_PORT, "protocol": "TCP"}],
        resources={
            "requests": {"cpu": str(4 * tp), "memory": host_memory, **gpu_resources},
            "limits": {"cpu": str(8 * tp), "memory": host_memory, **gpu_resources},
        },
        startupProbe=health(PROBE_PERIOD_SEC, startup_failure_threshold(weights_gib)),
        readinessProbe=health(5, 3),
        livenessProbe=health(10, 6),
        volumeMounts=[
            {"name": "model-cache", "mountPath": "/models", "readOnly": True},
            {"name": "home", "mountPath": "/home/vllm"},
            {"name": "tmp", "mountPath": "/tmp"},
            {"name": "shm", "mountPath": "/dev/shm"},
        ],
    )
    host_aliases = [{"ip": site.s3_ipoib[0], "hostnames": [site.s3_ipoib[1]]}] if site.s3_ipoib else None
    annotations = {"k8s.v1.cni.cncf.io/networks": f"{IPOIB_NETWORK}@ib0"} if host_aliases else {}
    nvme = {
        "ephemeral": {
            "volumeClaimTemplate": {
                "metadata": {"labels": pod_labels},
                "spec": {
                    "accessModes": ["ReadWriteOnce"],
                    "storageClassName": NVME_STORAGE_CLASS,
                    "resources": {"requests": {"storage": f"{cache_size_gib(weights_gib)}Gi"}},
                },
            }
        }
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": INFERENCE_NAMESPACE, "labels": pod_labels, "annotations": checkov_skips(*WORKLOAD_SKIPS)},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": selector},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}},
            "template": {
                "metadata": {"labels": pod_labels, "annotations": annotations},
                "spec": {
                    "priorityClassName": SERVING_PRIORITY,
                    "nodeSelector": {POOL_LABEL: "inference"},
                    "tolerations": [toleration("inference")],
                    "automountServiceAccountToken": False,
                    "securityContext": restricted_pod_security_context(fsGroup=VLLM_USER),
                    **site.registry.pod_fields(),
                    **({"hostAliases": host_aliases} if host_aliases else {}),
                    "initContainers": init,
                    "containers": [container],
                    "volumes": [
                        {"name": "model-cache", **nvme},
                        {"name": "work", "emptyDir": {"sizeLimit": "64Mi"}},
                        {"name": "home", "emptyDir": {"sizeLimit": "8Gi"}},
                        {"name": "tmp", "emptyDir": {"sizeLimit": "8Gi"}},
                        {"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": "16Gi"}},
                        *site_ca_volumes(site.site_ca),
                    ],
                    "terminationGracePeriodSeconds": 120,
                },
            },
        },
    }


def service(model: str, *, canary: bool = False) -> dict[str, Any]:
    name, selector = (names.VLLM_CANARY(model), canary_labels(model)) if canary else (names.VLLM(model), stable_labels(model))
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": INFERENCE_NAMESPACE, "labels": selector},
        "spec": {"type": "ClusterIP", "selector": selector,
                 "ports": [{"name": "http", "port": VLLM_PORT, "targetPort": "http", "protocol": "TCP"}]},
    }


def disruption_budget(model: str) -> dict[str, Any]:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": names.VLLM(model), "namespace": INFERENCE_NAMESPACE},
        "spec": {"maxUnavailable": 1, "selector": {"matchLabels": stable_labels(model)}},
    }


def backend_refs(model: ServedModel) -> list[dict[str, Any]]:
    """The route's backends: the model's Service, and with a canary both Services weighted by its share."""
    stable = {"name": names.VLLM(model.key), "port": VLLM_PORT}
    canary = model.spec.canary
    if canary is None:
        return [stable]
    return [{**stable, "weight": 100 - canary.weight_percent},
            {"name": names.VLLM_CANARY(model.key), "port": VLLM_PORT, "weight": canary.weight_percent}]


def route_rules(model: ServedModel) -> list[dict[str, Any]]:
    """The rules of the model's HTTPRoute: `/models/<model>/v1/...`, rewritten to `/v1/...`, to its backends."""
    return [
        {
            "matches": [{"path": {"type": "PathPrefix", "value": route_prefix(model.key)}}],
            "filters": [{"type": "URLRewrite", "urlRewrite": {"path": {"type": "ReplacePrefixMatch", "replacePrefixMatch": "/v1"}}}],
            "backendRefs": backend_refs(model),
        }
    ]


def repository_files(model: str) -> dict[tuple[str, str], str]:
    """A model's directory of the serving repository (`fabctl serving render`): (kind, name) of each object -> its file."""
    stable, canary = names.VLLM(model), names.VLLM_CANARY(model)
    return {
        ("Deployment", stable): "deployment.yaml",
        ("Service", stable): "service.yaml",
        ("PodDisruptionBudget", stable): "pdb.yaml",
        ("HTTPRoute", stable): "httproute.yaml",
        ("Deployment", canary): "canary.yaml",
        ("Service", canary): "canary-service.yaml",
    }
