"""Training runtimes on the GPU clusters: the job kinds Kueue admits, and Kubeflow Trainer's PyTorch runtime (DESIGN
section 2, "PyTorch · Ray · Job").

What Kueue integrates, what MultiKueue may dispatch and what teams and Airflow may create follow from one table, the
kinds of each installed runtime (`RUNTIME_KINDS`): a kind whose operator is not installed is never admitted, and a
runtime added to the table brings its kinds everywhere at once. TrainingPool installs the runtimes (Kubeflow Trainer,
with the JobSet controller its chart bundles) beside Kueue and ships the multi-node PyTorch ClusterTrainingRuntime.
"""

from __future__ import annotations

from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Any

from components import versions
from components.config import TrainingConfig
from components.config.schema.roadmap import switched_on
from components.constants import (
    ENGINE_LABEL,
    TRAINING_CHECKPOINT_URI,
    polaris_secret,
    s3_secret,
    site_ca_mounts,
    site_ca_volumes,
)
from components.data_access import TRAINING
from components.gpu import NCCL_CONFIG, NVME_STORAGE_CLASS, POOL_LABEL, RDMA_RESOURCE, TRAINING_PRIORITY, toleration
from components.kube import restricted_container, restricted_pod_security_context
from components.registry import UPSTREAM, Registry


@dataclass(frozen=True)
class JobKind:
    """A job kind Kueue admits: its Kueue framework name and the API group and resource its RBAC names."""

    framework: str
    group: str
    resource: str
    submitted: bool = True
    """Whether Airflow's submitter creates it (method B); teams and MultiKueue handle every kind."""


BATCH_JOB = JobKind("batch/job", "batch", "jobs")
TRAINER = "trainer"
"""Kubeflow Trainer (`training.runtimes`), with the JobSet controller its chart bundles."""
RAY = "ray"
"""KubeRay (`training.ray`, components/ray.py)."""
RUNTIME_KINDS: dict[str, list[JobKind]] = {
    TRAINER: [JobKind("jobset.x-k8s.io/jobset", "jobset.x-k8s.io", "jobsets"),
              JobKind("trainer.kubeflow.org/trainjob", "trainer.kubeflow.org", "trainjobs")],
    # Airflow submits RayJobs; a RayCluster is a team's interactive session, which its members start themselves.
    RAY: [JobKind("ray.io/rayjob", "ray.io", "rayjobs"),
          JobKind("ray.io/raycluster", "ray.io", "rayclusters", submitted=False)],
}
"""The job kinds each installable runtime brings, by runtime. Without any, Kueue admits Jobs (and their pods) only."""

TRAINER_NAMESPACE = "kubeflow-system"
TORCH_RUNTIME = "fab-torch-distributed"
"""The platform's multi-node PyTorch ClusterTrainingRuntime, which a team's TrainJob names in `runtimeRef`."""
TRAINER_STEP_LABEL = "trainer.kubeflow.org/trainjob-ancestor-step"
JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
"""On every pod of a JobSet (a TrainJob's is named as the TrainJob): its name."""
CHECKPOINT_DIR = "/checkpoints"
CHECKPOINT_DIR_ENV = "CHECKPOINT_DIR"
CHECKPOINT_SYNC_SEC = 60
"""How often the upload sidecar copies new checkpoint files from the NVMe cache to AIStor."""
CHECKPOINT_DRAIN_SEC = 900
"""How long a training pod may take to stop: the sidecar's last upload runs once the trainer has exited."""
TRAINER_USER = 1000
CA_DIR = "/etc/fab-ca"


def installed_runtimes(training: TrainingConfig, phase: int) -> frozenset[str]:
    """The runtimes the site installs on its GPU clusters, each by its switch (on from its roadmap phase unless set)."""
    switches = {TRAINER: switched_on("training-runtimes", training.runtimes, phase), RAY: switched_on("ray", training.ray, phase)}
    return frozenset(runtime for runtime, on in switches.items() if on)


def installed_kinds(runtimes: AbstractSet[str]) -> list[JobKind]:
    """The job kinds of the installed runtimes, in the table's order."""
    return [kind for runtime, kinds in RUNTIME_KINDS.items() if runtime in runtimes for kind in kinds]


def kueue_frameworks(runtimes: AbstractSet[str]) -> list[str]:
    """Kueue's `integrations.frameworks`: Jobs and plain pods always, and the kinds of the installed runtimes."""
    return [BATCH_JOB.framework, *(kind.framework for kind in installed_kinds(runtimes)), "pod"]


_TEAM_VERBS = ["create", "delete", "get", "list", "watch", "patch", "update"]
_SUBMIT_VERBS = ["create", "delete", "get", "list", "watch"]
_RW = ["create", "delete", "get", "list", "watch", "update", "patch"]


def team_rules(runtimes: AbstractSet[str]) -> list[dict[str, Any]]:
    """What a team member may do in the team's namespace: run and watch the installed job kinds; no Secrets, no RBAC."""
    return [
        {"apiGroups": ["batch"], "resources": ["jobs", "cronjobs"], "verbs": _TEAM_VERBS},
        *({"apiGroups": [kind.group], "resources": [kind.resource], "verbs": _TEAM_VERBS} for kind in installed_kinds(runtimes)),
        {"apiGroups": ["kueue.x-k8s.io"], "resources": ["localqueues", "workloads"], "verbs": ["get", "list", "watch"]},
        {"apiGroups": [""], "resources": ["pods", "pods/log", "events"], "verbs": ["get", "list", "watch"]},
        # The templates the platform puts in the namespace (batch inference, the Ray cluster, Spark RAPIDS defaults, NCCL
        # settings) and a Ray head's client address.
        {"apiGroups": [""], "resources": ["configmaps", "services"], "verbs": ["get", "list", "watch"]},
    ]


def submitter_rules(runtimes: AbstractSet[str]) -> list[dict[str, Any]]:
    """Airflow's method B: create, watch and delete Jobs and the installed kinds it submits, in team namespaces only."""
    kinds = [BATCH_JOB, *(kind for kind in installed_kinds(runtimes) if kind.submitted)]
    return [{"apiGroups": [kind.group], "resources": [kind.resource], "verbs": _SUBMIT_VERBS} for kind in kinds]


def multikueue_rules(runtimes: AbstractSet[str]) -> list[dict[str, Any]]:
    """What the MultiKueue manager does on a worker in each namespace it dispatches to (bound there only, never
    cluster-wide: Kueue's setup guide lists these verbs): create and delete every job kind it dispatches, their pods and
    its Workloads, read their status and the LocalQueue its copies name."""
    rules: list[dict[str, Any]] = []
    for kind in [BATCH_JOB, *installed_kinds(runtimes)]:
        rules.append({"apiGroups": [kind.group], "resources": [kind.resource], "verbs": _RW})
        rules.append({"apiGroups": [kind.group], "resources": [f"{kind.resource}/status"], "verbs": ["get"]})
    return [
        *rules,
        {"apiGroups": [""], "resources": ["pods"], "verbs": _RW},
        {"apiGroups": [""], "resources": ["pods/status"], "verbs": ["get"]},
        {"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads"], "verbs": _RW},
        {"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads/status"], "verbs": ["get", "patch", "update"]},
        {"apiGroups": ["kueue.x-k8s.io"], "resources": ["localqueues"], "verbs": ["get", "list", "watch"]},
    ]


def multikueue_watch_rules(runtimes: AbstractSet[str]) -> list[dict[str, Any]]:
    """What the MultiKueue manager reads of a worker cluster-wide, and nothing more: Kueue 0.19 watches the Workloads
    and every integrated kind (its pods too) across all namespaces, selected by its origin label (multikueuecluster.go
    `establishWatch`), and caches the ClusterQueues and LocalQueues (`startQueueWatchers`). Reads only: it writes in
    the namespaces `multikueue_rules` are bound in."""
    kinds = [BATCH_JOB, *installed_kinds(runtimes)]
    return [
        *({"apiGroups": [kind.group], "resources": [kind.resource], "verbs": ["list", "watch"]} for kind in kinds),
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["list", "watch"]},
        {"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads"], "verbs": ["list", "watch"]},
        {"apiGroups": ["kueue.x-k8s.io"], "resources": ["clusterqueues", "localqueues"], "verbs": ["get", "list", "watch"]},
    ]


def trainer_values() -> dict[str, Any]:
    """Values of the Kubeflow Trainer chart: its controller and the bundled JobSet controller on the untainted system
    nodes (they tolerate no GPU pool), with requests and limits; no bundled runtimes (the platform ships its own) and no
    LeaderWorkerSet (the data cache is off)."""
    return {
        "manager": {
            "resources": {"requests": {"cpu": "100m", "memory": "256Mi"}, "limits": {"cpu": "1", "memory": "1Gi"}},
            "securityContext": {
                "allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True, "runAsNonRoot": True,
                "capabilities": {"drop": ["ALL"]}, "seccompProfile": {"type": "RuntimeDefault"},
            },
        },
        "jobset": {"install": True},
        "dataCache": {"enabled": False},
        "runtimes": {"defaultEnabled": False},
    }


def checkpoint_upload_script(interval_sec: int) -> str:
    """The upload sidecar: every `interval_sec` it copies what the trainer wrote to the NVMe cache into the team's checkpoint
    prefix, under the TrainJob's name, and once more when the pod stops (after the trainer, a sidecar gets SIGTERM last)."""
    return "\n".join([
        f'dest="${{{TRAINING_CHECKPOINT_URI}}}${{TRAINJOB}}/"',
        f'upload() {{ aws s3 sync --only-show-errors --no-progress {CHECKPOINT_DIR} "$dest"; }}',
        "trap 'upload; exit $?' TERM",
        f"while true; do sleep {interval_sec} & wait $!; upload || echo \"checkpoint upload to $dest failed; retrying\" >&2; done",
    ])


def torch_runtime(checkpoint_cache_gib: int, site_ca: bool, registry: Registry = UPSTREAM) -> dict[str, Any]:
    """The platform's multi-node PyTorch ClusterTrainingRuntime (`fab-torch-distributed`), the same on every GPU cluster.

    One pod per node on the training pool at training priority, non-root and restricted. NCCL's InfiniBand settings come
    from the namespace's ConfigMap `nccl`, which holds the settings of the cluster the job runs on (so the runtime is
    cluster-independent, as MultiKueue needs). Checkpoints are written to `CHECKPOINT_DIR`, an NVMe ephemeral volume, and
    uploaded by a sidecar to `CHECKPOINT_URI<trainjob>/` with the team's own keys: training never waits on AIStor. Its
    images come from the cluster's `registry`, and its pods name the registry's pull Secret where the site has one."""
    s3_env = [{"secretRef": {"name": s3_secret(TRAINING)}}]
    trainjob = {"name": "TRAINJOB", "valueFrom": {"fieldRef": {"fieldPath": f"metadata.labels['{JOBSET_NAME_LABEL}']"}}}
    ca_env = [{"name": "AWS_CA_BUNDLE", "value": f"{CA_DIR}/ca.crt"}] if site_ca else []
    tmp = {"name": "tmp", "mountPath": "/tmp"}
    checkpoints = {"name": "checkpoints", "mountPath": CHECKPOINT_DIR}
    upload = restricted_container(
        "checkpoint-upload", registry.image(versions.CHECKPOINT_UPLOAD_IMAGE), TRAINER_USER,
        # A native sidecar: it starts before the trainer and stops after it, so the last checkpoint is uploaded.
        restartPolicy="Always",
        command=["bash", "-c"], args=[checkpoint_upload_script(CHECKPOINT_SYNC_SEC)],
        envFrom=s3_env, env=[trainjob, {"name": "HOME", "value": "/tmp"}, *ca_env],
        resources={"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"cpu": "4", "memory": "4Gi"}},
        volumeMounts=[{**checkpoints, "readOnly": True}, tmp, *site_ca_mounts(site_ca, CA_DIR)],
    )
    node = restricted_container(
        "node", registry.image(versions.TORCH_IMAGE), TRAINER_USER,
        # The team's S3 and Polaris keys (data by reference, its checkpoint prefix) and the cluster's NCCL settings.
        envFrom=[*s3_env, {"secretRef": {"name": polaris_secret(TRAINING)}}, {"configMapRef": {"name": NCCL_CONFIG}}],
        env=[{"name": CHECKPOINT_DIR_ENV, "value": CHECKPOINT_DIR}, {"name": "HOME", "value": "/tmp"}, *ca_env],
        # A TrainJob's `resourcesPerNode` replaces these: it names the GPUs and the RDMA resource itself.
        resources={"requests": {"cpu": "8", "memory": "64Gi", "nvidia.com/gpu": "1", RDMA_RESOURCE: "1"},
                   "limits": {"cpu": "8", "memory": "64Gi", "nvidia.com/gpu": "1", RDMA_RESOURCE: "1"}},
        volumeMounts=[checkpoints, tmp, {"name": "shm", "mountPath": "/dev/shm"}, *site_ca_mounts(site_ca, CA_DIR)],
    )
    pod = {
        "priorityClassName": TRAINING_PRIORITY,
        "automountServiceAccountToken": False,
        "securityContext": restricted_pod_security_context(fsGroup=TRAINER_USER),
        **registry.pod_fields(),
        "nodeSelector": {POOL_LABEL: "training"},
        "tolerations": [toleration("training")],
        "terminationGracePeriodSeconds": CHECKPOINT_DRAIN_SEC,
        "initContainers": [upload],
        "containers": [node],
        "volumes": [
            {"name": "checkpoints", "ephemeral": {"volumeClaimTemplate": {"spec": {
                "accessModes": ["ReadWriteOnce"], "storageClassName": NVME_STORAGE_CLASS,
                "resources": {"requests": {"storage": f"{checkpoint_cache_gib}Gi"}},
            }}}},
            {"name": "tmp", "emptyDir": {"sizeLimit": "8Gi"}},
            # NCCL's and the data loaders' shared memory (the container runtime's default /dev/shm is 64 MiB).
            {"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": "32Gi"}},
            *site_ca_volumes(site_ca),
        ],
    }
    return {
        "apiVersion": versions.TRAINER_API,
        "kind": "ClusterTrainingRuntime",
        # Its pods read the training credentials of the namespace they run in (a team's own).
        "metadata": {"name": TORCH_RUNTIME, "labels": {"trainer.kubeflow.org/framework": "torch", ENGINE_LABEL: TRAINING}},
        "spec": {
            "mlPolicy": {"numNodes": 1, "torch": {}},
            "template": {"spec": {"replicatedJobs": [{
                "name": "node",
                "template": {
                    "metadata": {"labels": {TRAINER_STEP_LABEL: "trainer"}},
                    "spec": {"template": {"spec": pod}},
                },
            }]}},
        },
    }
