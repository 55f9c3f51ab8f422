"""Kueue as the platform sets it up (DESIGN sections 1, 2): the manager's Configuration and chart values, each team's
ClusterQueue and its quotas per training flavor (the MultiKueue manager's the sum of its workers'), the names a training
job carries (LocalQueue, queue and priority labels), and the admission policy that keeps a team's pods at training
priority on training nodes. TrainingPool (components/training.py) applies them on every Kueue cluster."""

from __future__ import annotations

from collections.abc import Set as AbstractSet
from typing import Any

from components import yamltext
from components.config import TeamQuota, names
from components.gpu import POOL_LABEL, RDMA_RESOURCE, SERVING_PRIORITY, TRAINING_PRIORITY
from components.runtimes import kueue_frameworks

TOPOLOGY = "fab-topology"
LOCAL_QUEUE = "training"
ADMISSION_CHECK = "multikueue"
MULTIKUEUE_CONFIG = "fab"
MANAGED_LABEL = "fab.internal/kueue-managed"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
DEFAULT_WORKLOAD_PRIORITY = "training-normal"
PRIORITIES = {"training-normal": 100, "training-urgent": 1000}

TEAM_WORKLOADS_POLICY = "fab-team-workloads"
"""The ValidatingAdmissionPolicy, on every Kueue cluster, that keeps a team's pods at training priority on training nodes."""
TEAM_PRIORITY_CLASSES = (TRAINING_PRIORITY,)
"""The PriorityClasses a pod in a team namespace may name (or none): Kueue orders teams' work by WorkloadPriorityClass."""
RESERVED_PRIORITY_CLASSES = (SERVING_PRIORITY, "system-cluster-critical", "system-node-critical")
"""What a team namespace's quota admits no pod of: serving's class and Kubernetes' own critical classes."""
RESERVED_QUOTA = "fab-reserved-priorities"
ADDED_TOLERATION_KEYS = ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable", "nvidia.com/gpu")
"""Taints a team's pod may tolerate besides the training pool's: those the API server's DefaultTolerationSeconds (and,
where a distribution enables it, ExtendedResourceToleration for GPU requests) add to every pod. The platform taints no node
with them."""
DENIED_PRIORITY = (f"in a team namespace, pods run at the {' or '.join(TEAM_PRIORITY_CLASSES)} PriorityClass or none: "
                   f"{SERVING_PRIORITY} and the system-* classes are the platform's")
DENIED_TOLERATION = (f"in a team namespace, pods tolerate only the training pool's taint ({POOL_LABEL}=training) and "
                     "Kubernetes' node-condition taints: the inference and notebooks pools and the system nodes are the "
                     "platform's")

SPARK_FRAMEWORK = "sparkoperator.k8s.io/sparkapplication"
"""Kueue's SparkApplication integration, on the clusters that run Spark RAPIDS (whose Spark operator installs the CRD)."""
SPARK_FEATURE_GATE = "SparkApplicationIntegration"

def team_namespace(team: str) -> str:
    return names.TEAM_NAMESPACE(team)


def flavor_name(gpu_type: str) -> str:
    return names.FLAVOR(gpu_type)


def kueue_config(multikueue: bool, runtimes: AbstractSet[str], spark: bool = False) -> str:
    """The Kueue manager Configuration: the chart's defaults, the integrations of the installed runtimes (and
    SparkApplication where `spark`, the Spark RAPIDS clusters: components/spark_rapids.py), team namespaces only."""
    config: dict[str, Any] = {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "health": {"healthProbeBindAddress": ":8081"},
        # Per-ClusterQueue usage and quota series, which the quota-exhaustion alert reads (components/alerts.py).
        "metrics": {"bindAddress": ":8443", "enableClusterQueueResources": True},
        "webhook": {"port": 9443},
        "leaderElection": {"leaderElect": True, "resourceName": "c1f6bfd2.kueue.x-k8s.io"},
        "controller": {
            "groupKindConcurrency": {
                "Job.batch": 5, "Pod": 5, "Workload.kueue.x-k8s.io": 10, "LocalQueue.kueue.x-k8s.io": 5,
                "ClusterQueue.kueue.x-k8s.io": 5, "ResourceFlavor.kueue.x-k8s.io": 1,
            }
        },
        "clientConnection": {"qps": 300, "burst": 500},
        # A job in a team namespace without a LocalQueue label is Kueue's too: suspended, and never admitted (there is no
        # LocalQueue `default`), so naming no queue does not step around the team's quota.
        "manageJobsWithoutQueueName": True,
        # Only team namespaces are Kueue's: resident inference, the operators' and system pods are never gated.
        "managedJobsNamespaceSelector": {"matchLabels": {MANAGED_LABEL: "true"}},
        "integrations": {"frameworks": kueue_frameworks(runtimes) + ([SPARK_FRAMEWORK] if spark else [])},
        # InfiniBand is shared by every pod of a node (the RDMA shared device plugin), not a quota: without this, Kueue
        # refuses any workload that asks for it (no ClusterQueue covers it).
        "resources": {"excludeResourcePrefixes": [RDMA_RESOURCE.split("/")[0] + "/"]},
    }
    if multikueue:
        config["multiKueue"] = {"gcInterval": "1m", "origin": "multikueue", "workerLostTimeout": "15m"}
    return yamltext.dump(config)


def kueue_values(multikueue: bool, runtimes: AbstractSet[str], spark: bool = False) -> dict[str, Any]:
    """The Kueue chart's values: its Configuration and, with `spark`, the SparkApplication integration's feature gate
    (alpha since Kueue 0.17, off by default: Kueue's "Run a SparkApplication")."""
    values: dict[str, Any] = {"managerConfig": {"controllerManagerConfigYaml": kueue_config(multikueue, runtimes, spark)}}
    if spark:
        values["controllerManager"] = {"featureGates": [{"name": SPARK_FEATURE_GATE, "enabled": True}]}
    return values


def _cel(values: tuple[str, ...]) -> str:
    return "[" + ", ".join(f"'{v}'" for v in values) + "]"


def _ray_specs(cluster: str) -> str:
    """CEL: the pod specs of a RayCluster spec (its head and every worker group)."""
    return (f"[{cluster}.headGroupSpec.template.spec] + "
            f"(has({cluster}.workerGroupSpecs) ? {cluster}.workerGroupSpecs.map(g, g.template.spec) : [])")


def team_workloads_policy() -> dict[str, Any]:
    """The spec of TEAM_WORKLOADS_POLICY: in a Kueue-managed namespace, every pod, and the pod templates of the kinds teams
    create (Jobs, CronJobs, JobSets, RayClusters, RayJobs: refused at once rather than pod by pod), names a team
    PriorityClass or none, and tolerates the training pool and Kubernetes' node-condition taints only. Pods are the gate
    (whoever creates them: a team, Airflow, MultiKueue, an operator); objects being deleted are let through, so that
    finalizers of objects older than the policy can still be removed."""
    pool_training = (f"(has(t.key) && t.key == '{POOL_LABEL}' && (!has(t.operator) || t.operator == 'Equal') "
                     "&& has(t.value) && t.value == 'training')")
    node_conditions = f"(has(t.key) && t.key in {_cel(ADDED_TOLERATION_KEYS)})"
    kind = "request.kind.kind"
    return {
        "failurePolicy": "Fail",
        "matchConstraints": {
            "resourceRules": [
                {"apiGroups": [group], "apiVersions": ["*"], "operations": ["CREATE", "UPDATE"], "resources": resources}
                for group, resources in (("", ["pods"]), ("batch", ["jobs", "cronjobs"]), ("jobset.x-k8s.io", ["jobsets"]),
                                         ("ray.io", ["rayclusters", "rayjobs"]))
            ],
            # The team namespaces, by their label: match conditions cannot read the namespace (the API server evaluates
            # them without it, so a condition on `namespaceObject` would skip every request).
            "namespaceSelector": {"matchLabels": {MANAGED_LABEL: "true"}},
        },
        "matchConditions": [
            {"name": "not-being-deleted", "expression": "!has(object.metadata.deletionTimestamp)"},
        ],
        "variables": [{"name": "specs", "expression": (
            f"{kind} == 'Pod' ? [object.spec] : "
            f"{kind} == 'Job' ? [object.spec.template.spec] : "
            f"{kind} == 'CronJob' ? [object.spec.jobTemplate.spec.template.spec] : "
            f"{kind} == 'JobSet' ? object.spec.replicatedJobs.map(r, r.template.spec.template.spec) : "
            f"{kind} == 'RayCluster' ? {_ray_specs('object.spec')} : "
            f"{kind} == 'RayJob' && has(object.spec.rayClusterSpec) ? {_ray_specs('object.spec.rayClusterSpec')} : []")}],
        "validations": [
            {"expression": (f"variables.specs.all(s, !has(s.priorityClassName) || "
                            f"s.priorityClassName in {_cel(TEAM_PRIORITY_CLASSES)})"),
             "message": DENIED_PRIORITY},
            {"expression": f"variables.specs.all(s, !has(s.tolerations) || s.tolerations.all(t, {pool_training} || {node_conditions}))",
             "message": DENIED_TOLERATION},
        ],
    }


def summed_quota(quotas: dict[str, TeamQuota], clusters: list[str]) -> TeamQuota:
    """The manager's quota of a team: the sum of its quotas on `clusters` (limits summed where all are set)."""
    parts = [quotas[c] for c in clusters if c in quotas]

    def total(field: str) -> int | None:
        values = [getattr(q, field) for q in parts]
        return None if not values or any(v is None for v in values) else sum(values)

    return TeamQuota(
        gpus=sum(q.gpus for q in parts),
        cpu=sum(q.cpu_cores for q in parts),
        memory_gib=sum(q.memory for q in parts),
        borrowing_limit_gpus=total("borrowing_limit_gpus"),
        lending_limit_gpus=total("lending_limit_gpus"),
    )


def _quantity(value: int, unit: str = "") -> str:
    return f"{value}{unit}"


def queue_flavors(cluster: str, manager: str | None, workers: list[str], gpu_types: dict[str, list[str]]) -> dict[str, list[str]]:
    """The training flavors of a cluster's ClusterQueues, each with the GPU clusters whose quotas it holds: on a GPU
    cluster its own GPU types, its own quota; on the MultiKueue manager every worker's, the sum over the workers that
    have it."""
    members = workers if cluster == manager else [cluster]
    flavors = sorted({flavor_name(gpu_type) for member in members for gpu_type in gpu_types[member]})
    return {flavor: [m for m in members if flavor in {flavor_name(t) for t in gpu_types[m]}] for flavor in flavors}


def flavor_quota(flavor: str, members: list[str], team_quotas: dict[str, TeamQuota], confined: bool = False) -> dict[str, Any]:
    """One flavor's quotas in a team's ClusterQueue: the team's quotas summed over `members`. A confined team gets
    nothing, and may borrow nothing, where none of them is one of its quotas' clusters."""
    if confined and not any(member in team_quotas for member in members):
        return {"name": flavor, "resources": [{"name": resource, "nominalQuota": "0", "borrowingLimit": "0"}
                                              for resource in ("cpu", "memory", "nvidia.com/gpu")]}
    quota = summed_quota(team_quotas, members)
    gpu: dict[str, Any] = {"name": "nvidia.com/gpu", "nominalQuota": _quantity(quota.gpus)}
    if quota.borrowing_limit_gpus is not None:
        gpu["borrowingLimit"] = _quantity(quota.borrowing_limit_gpus)
    if quota.lending_limit_gpus is not None:
        gpu["lendingLimit"] = _quantity(quota.lending_limit_gpus)
    return {
        "name": flavor,
        "resources": [
            {"name": "cpu", "nominalQuota": _quantity(quota.cpu_cores)},
            {"name": "memory", "nominalQuota": _quantity(quota.memory, "Gi")},
            gpu,
        ],
    }


def queue_resource_groups(flavors: dict[str, list[str]], team_quotas: dict[str, TeamQuota], confined: bool = False) -> list[dict[str, Any]]:
    """A team's ClusterQueue `resourceGroups`: its quota per flavor (`queue_flavors`). The only part of the queue a
    profile changes, and what a scheduled profile switch applies."""
    return [{
        "coveredResources": ["cpu", "memory", "nvidia.com/gpu"],
        "flavors": [flavor_quota(flavor, members, team_quotas, confined) for flavor, members in flavors.items()],
    }]


def team_queue_spec(cohort: str, ns_name: str, flavors: dict[str, list[str]], team_quotas: dict[str, TeamQuota],
                    manager: bool, confined: bool = False) -> dict[str, Any]:
    """A team's ClusterQueue (named as its namespace) in the site's cohort: preemptible training, its quota per flavor and,
    on the MultiKueue manager, the admission check that dispatches to the workers."""
    spec: dict[str, Any] = {
        "cohortName": cohort,
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns_name}},
        "queueingStrategy": "BestEffortFIFO",
        "preemption": {
            "reclaimWithinCohort": "Any",
            "withinClusterQueue": "LowerPriority",
            "borrowWithinCohort": {"policy": "Never"},
        },
        "resourceGroups": queue_resource_groups(flavors, team_quotas, confined),
    }
    if manager:
        spec["admissionChecksStrategy"] = {"admissionChecks": [{"name": ADMISSION_CHECK}]}
    return spec

