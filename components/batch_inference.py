"""Offline batch inference: a vLLM batch Job per served model, queued by Kueue like training (DESIGN section 1: large
offline inference as GPU batch jobs reading AIStor directly, "so as not to press the online endpoint").

Each team namespace on every GPU cluster holds the ConfigMap `batch-inference`, one Job per served model (key
`<model>.yaml`), which the team creates as it is or with its own input path. The Job names no gateway: it runs vLLM's
offline runner (`vllm run-batch`, OpenAI batch-file format) on the training pool, suspended for Kueue on the team's
LocalQueue at training priority (preemptible, never preempting serving), sized like the model's serving replica (its
tensor parallel size from components/capacity.py). Everything goes by reference through AIStor with the team's own
keys (`s3-training`): the weights are mirrored from the models bucket to the node's NVMe cache as the serving pods do
(every team may read the served models' weights, StorageClusterArgs.served_weights), the requests file is read from
`INPUT_OBJECT` (a `<bucket>/<key>` the team's keys read: its datasets, the warehouse, its own prefixes) and the results
are written under the team's checkpoint prefix, `<checkpoints bucket>/<team>/batch-inference/<job>/`.

The pod's steps are init containers, in order (alias, weights, input, vLLM on the GPUs), and the upload its one
container: init containers run to completion one after the other, so the upload starts only once vLLM has written
every result, with the images the platform pins already (vLLM's and the MinIO client's).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components import versions, yamltext
from components.config import names
from components.constants import (
    MC_CA_DIR,
    S3_ACCESS_KEY,
    S3_ENDPOINT,
    S3_SECRET_KEY,
    TEAM_LABEL,
    s3_secret,
    site_ca_mounts,
    site_ca_volumes,
)
from components.data_access import TRAINING
from components.gpu import NVME_STORAGE_CLASS, POOL_LABEL, TRAINING_PRIORITY, toleration
from components.kube import restricted_container, restricted_pod_security_context
from components.kueue import DEFAULT_WORKLOAD_PRIORITY, LOCAL_QUEUE, PRIORITY_LABEL, QUEUE_LABEL
from components.providers import NamespaceRef
from components.registry import UPSTREAM, Registry
from components.serving import VLLM_USER, ServedModel, cache_size_gib, model_path
from components.storage import StorageCluster

CONFIG_MAP = "batch-inference"
"""The ConfigMap of batch Job templates in every team namespace of a GPU cluster, one key per served model."""
ALIAS = "aistor"
"""The MinIO client's alias of the object store, set with the team's keys."""
RESULTS_FOLDER = "batch-inference"
"""Under the team's checkpoint prefix: one folder per Job, named as the Job."""
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
DATA_GIB = 20
"""The pod's scratch for the requests and results files (JSONL, text only)."""


def weights_object(bucket: str, source: str, revision: str | None) -> str:
    """The served revision's weights, under the alias `aistor`, as a folder: `mc mirror` stats a source without the
    trailing slash as an object first, which the team's read grant (`<path>/*`) refuses."""
    path = source.strip("/")
    return f"{ALIAS}/{bucket}/{path}/" if revision is None else f"{ALIAS}/{bucket}/{path}/{revision}/"


def results_prefix(checkpoints_bucket: str, team: str) -> str:
    """Where a team's batch results go: under its checkpoint prefix, which only its keys may write."""
    return f"{checkpoints_bucket}/{team}/{RESULTS_FOLDER}"


def owner(source: str, teams: set[str] | list[str]) -> str | None:
    """The team whose prefix of the models bucket holds a served model's weights, None for the site's own paths."""
    first = source.strip("/").split("/", 1)[0]
    return first if first in teams else None


def shared_weights(sources: list[str], teams: list[str]) -> tuple[str, ...]:
    """The served models' weight paths every team may read (StorageClusterArgs.served_weights): those of no team."""
    return tuple(sorted({s for s in sources if owner(s, teams) is None}))


@dataclass(frozen=True)
class BatchSite:
    """What every batch Job of a site is built with: plain values from the site's config."""

    models_bucket: str
    checkpoints_bucket: str
    site_ca: bool
    """Whether the site has a CA bundle: then the MinIO client trusts it (the Secret `fab-site-ca`)."""
    registry: Registry = UPSTREAM
    """Where the GPU cluster pulls vLLM and the MinIO client from, and the pull Secret the Job's pod names."""


def batch_job(site: BatchSite, model: ServedModel, team: str) -> dict[str, Any]:
    """The batch Job of `model` for `team`: suspended for Kueue, on the team's LocalQueue at training priority."""
    spec, key, tp = model.spec, model.key, model.size.tensor_parallel
    weights_gib = model.size.weights_per_gpu_gib * tp
    cache = model_path(key, spec.revision)
    mc_env = [
        {"name": "MC_CONFIG_DIR", "value": "/work/.mc"},
        *({"name": k, "valueFrom": {"secretKeyRef": {"name": s3_secret(TRAINING), "key": k}}} for k in (S3_ACCESS_KEY, S3_SECRET_KEY, S3_ENDPOINT)),
    ]
    small = {"requests": {"cpu": "500m", "memory": "512Mi"}, "limits": {"cpu": "2", "memory": "2Gi"}}
    work, data = {"name": "work", "mountPath": "/work"}, {"name": "data", "mountPath": "/data"}
    ca = site_ca_mounts(site.site_ca, MC_CA_DIR)

    def mc(name: str, args: list[str], *mounts: dict[str, Any], env: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        return restricted_container(name, site.registry.image(versions.WEIGHTS_SYNC_IMAGE), VLLM_USER, args=args, env=[*mc_env, *(env or [])],
                                    resources=small, volumeMounts=[work, *mounts, *ca])

    gpus = {"nvidia.com/gpu": str(tp)}
    memory = f"{math.ceil(weights_gib) + 32}Gi"
    vllm = restricted_container(
        "vllm", site.registry.image(versions.VLLM_IMAGE), VLLM_USER,
        command=["vllm"],
        args=[
            "run-batch",
            "--input-file", "/data/input.jsonl",
            "--output-file", "/data/output.jsonl",
            "--model", cache,
            "--served-model-name", spec.served_name or key,
            "--tensor-parallel-size", str(tp),
            "--max-model-len", str(spec.max_context),
        ],
        env=[{"name": "HOME", "value": "/home/vllm"}, {"name": "HF_HUB_OFFLINE", "value": "1"}],
        resources={"requests": {"cpu": str(4 * tp), "memory": memory, **gpus}, "limits": {"cpu": str(8 * tp), "memory": memory, **gpus}},
        volumeMounts=[
            {"name": "model-cache", "mountPath": "/models", "readOnly": True}, data,
            {"name": "home", "mountPath": "/home/vllm"}, {"name": "tmp", "mountPath": "/tmp"}, {"name": "shm", "mountPath": "/dev/shm"},
        ],
    )
    job_name = {"name": "JOB_NAME", "valueFrom": {"fieldRef": {"fieldPath": f"metadata.labels['{JOB_NAME_LABEL}']"}}}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "generateName": f"batch-{key}-",
            "namespace": names.TEAM_NAMESPACE(team),
            "labels": {QUEUE_LABEL: LOCAL_QUEUE, PRIORITY_LABEL: DEFAULT_WORKLOAD_PRIORITY},
        },
        "spec": {
            "suspend": True,
            "backoffLimit": 0,
            "ttlSecondsAfterFinished": 7 * 24 * 3600,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "priorityClassName": TRAINING_PRIORITY,
                    "nodeSelector": {POOL_LABEL: "training"},
                    "tolerations": [toleration("training")],
                    "automountServiceAccountToken": False,
                    "securityContext": restricted_pod_security_context(fsGroup=VLLM_USER),
                    **site.registry.pod_fields(),
                    "initContainers": [
                        mc("s3-alias", ["alias", "set", ALIAS, f"$({S3_ENDPOINT})", f"$({S3_ACCESS_KEY})", f"$({S3_SECRET_KEY})"]),
                        mc("weights", ["mirror", "--overwrite", "--remove", weights_object(site.models_bucket, spec.source, spec.revision), cache],
                           {"name": "model-cache", "mountPath": "/models"}),
                        mc("input", ["cp", f"{ALIAS}/$(INPUT_OBJECT)", "/data/input.jsonl"], data,
                           env=[{"name": "INPUT_OBJECT", "value": f"{results_prefix(site.checkpoints_bucket, team)}/input/requests.jsonl"}]),
                        vllm,
                    ],
                    "containers": [
                        mc("results", ["cp", "/data/output.jsonl", f"{ALIAS}/{results_prefix(site.checkpoints_bucket, team)}/$(JOB_NAME)/output.jsonl"],
                           data, env=[job_name]),
                    ],
                    "volumes": [
                        {"name": "model-cache", "ephemeral": {"volumeClaimTemplate": {"spec": {
                            "accessModes": ["ReadWriteOnce"], "storageClassName": NVME_STORAGE_CLASS,
                            "resources": {"requests": {"storage": f"{cache_size_gib(weights_gib)}Gi"}},
                        }}}},
                        {"name": "work", "emptyDir": {"sizeLimit": "64Mi"}},
                        {"name": "data", "emptyDir": {"sizeLimit": f"{DATA_GIB}Gi"}},
                        {"name": "home", "emptyDir": {"sizeLimit": "8Gi"}},
                        {"name": "tmp", "emptyDir": {"sizeLimit": "8Gi"}},
                        {"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": "16Gi"}},
                        *site_ca_volumes(site.site_ca),
                    ],
                },
            },
        },
    }


def job_yaml(job: dict[str, Any]) -> str:
    return yamltext.dump(job, aliases=False)


@dataclass(frozen=True)
class BatchInferenceArgs:
    served: dict[str, ServedModel]
    """The served models, each with its sizing under the active profile: a Job template each."""
    team_namespaces: dict[tuple[str, str], NamespaceRef]
    """(GPU cluster, team) -> the team's namespace there (TrainingPool.team_namespaces()): a ConfigMap in each."""
    storage: StorageCluster
    """Names the models and checkpoint buckets and delivers the site CA beside the team's keys."""


class BatchInference(pulumi.ComponentResource):
    """The batch Job templates of every served model, in every team namespace of the GPU clusters."""

    templates: pulumi.Output[dict[str, Any]]
    """What a team reads: the ConfigMap's name and, per model, its key and the GPUs a Job takes."""

    def __init__(self, name: str, args: BatchInferenceArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("fab:batch_inference:BatchInference", name, None, opts)
        storage = args.storage
        teams = {team for _, team in args.team_namespaces}
        for (cluster, team), ns in sorted(args.team_namespaces.items(), key=lambda item: item[0]):
            # Weights under another team's prefix are that team's alone (its keys only read them): no template for the rest.
            readable = {model: served for model, served in sorted(args.served.items())
                        if owner(served.spec.source, teams) in (None, team)}
            ca = storage.site_ca(ns)
            site = BatchSite(models_bucket=storage.bucket_of("models"), checkpoints_bucket=storage.bucket_of("checkpoints"),
                             site_ca=ca.secret is not None, registry=ns.cluster.registry)
            k8s.core.v1.ConfigMap(
                f"{name}-{cluster}-{team}",
                metadata={"name": CONFIG_MAP, "namespace": ns.name, "labels": {TEAM_LABEL: team}},
                data={f"{model}.yaml": job_yaml(batch_job(site, served, team))
                      for model, served in readable.items()},
                # The namespace must exist before the ConfigMap is created in it.
                opts=pulumi.ResourceOptions(parent=self, provider=ns.cluster.provider, depends_on=[ns.resource]),
            )
        self.templates = pulumi.Output.from_input({
            "config_map": CONFIG_MAP,
            "models": {model: {"key": f"{model}.yaml", "tensor_parallel": served.size.tensor_parallel}
                       for model, served in sorted(args.served.items())},
        })
        self.register_outputs({"templates": self.templates})
