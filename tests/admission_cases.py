"""The requests each ValidatingAdmissionPolicy the program ships must refuse and must allow, evaluated by the CEL engine
(tests/admission.py). Every policy the program applies or a Helm release of it installs has its cases here: a test
fails when one ships without (tests/test_admission_policies.py, tests/test_helm_releases.py)."""

from __future__ import annotations

import json
from dataclasses import dataclass

from admission import Request

from components.access import PREVIEW_USER

PREVIEW_GROUPS = ("system:serviceaccounts", "system:serviceaccounts:fab-preview", "system:authenticated")
DEPLOYER = "system:serviceaccount:kube-system:fab-deployer"
DENIED_PREVIEW = "the preview identity makes dry-run requests only; deploys run as another identity"


@dataclass(frozen=True)
class Case:
    name: str
    request: Request
    allowed: bool
    message: str = ""


def _preview(operation: str, group: str, resource: str, kind: str, name: str, namespace: str = "", dry_run: bool = False,
             subresource: str = "", username: str = PREVIEW_USER) -> Request:
    version = "v1"
    obj = {"apiVersion": f"{group}/{version}".lstrip("/"), "kind": kind, "metadata": {"name": name, "namespace": namespace}}
    return Request(operation=operation, group=group, version=version, resource=resource, kind=kind, name=name,
                   namespace=namespace, subresource=subresource, username=username,
                   groups=PREVIEW_GROUPS if username == PREVIEW_USER else ("system:authenticated",), dry_run=dry_run,
                   object=None if operation in ("DELETE", "CONNECT") else obj,
                   old_object=obj if operation in ("UPDATE", "DELETE") else None)


PREVIEW_CASES = [
    # What `pulumi preview` sends: server-side dry runs.
    Case("a dry-run create", _preview("CREATE", "apps", "deployments", "Deployment", "web", "team-a", dry_run=True), True),
    Case("a dry-run patch", _preview("UPDATE", "rbac.authorization.k8s.io", "clusterroles", "ClusterRole", "x", dry_run=True), True),
    # A deploy runs as another identity: the policy does not select it.
    Case("another identity's real create", _preview("CREATE", "apps", "deployments", "Deployment", "web", "team-a",
                                                    username=DEPLOYER), True),
    # A hostile holder of the preview kubeconfig: every real write is refused.
    Case("a real create", _preview("CREATE", "apps", "deployments", "Deployment", "miner", "team-a"), False, DENIED_PREVIEW),
    Case("a real update of a role", _preview("UPDATE", "rbac.authorization.k8s.io", "clusterroles", "ClusterRole",
                                             "fab-preview"), False, DENIED_PREVIEW),
    Case("a real delete", _preview("DELETE", "", "namespaces", "Namespace", "team-a"), False, DENIED_PREVIEW),
    Case("an exec into a pod", _preview("CONNECT", "", "pods", "PodExecOptions", "trainer-0", "team-a", subresource="exec"),
         False, DENIED_PREVIEW),
    Case("a token for another ServiceAccount", _preview("CREATE", "", "serviceaccounts", "TokenRequest", "argocd-server",
                                                        "argocd", subresource="token"), False, DENIED_PREVIEW),
    Case("a binding to cluster-admin", _preview("CREATE", "rbac.authorization.k8s.io", "clusterrolebindings",
                                                "ClusterRoleBinding", "me-admin"), False, DENIED_PREVIEW),
    Case("an eviction", _preview("CREATE", "", "pods", "Eviction", "vllm-0", "inference", subresource="eviction"),
         False, DENIED_PREVIEW),
]


def _ray(kind: str, resource: str, spec: dict, operation: str = "CREATE", username: str = "oidc:alice",
         groups: tuple[str, ...] = ("oidc:team-yield", "system:authenticated")) -> Request:
    obj = {"apiVersion": "ray.io/v1", "kind": kind, "metadata": {"name": "mine", "namespace": "team-yield"}, "spec": spec}
    return Request(operation=operation, group="ray.io", version="v1", resource=resource, kind=kind, name="mine",
                   namespace="team-yield", username=username, groups=groups, object=obj,
                   old_object=obj if operation == "UPDATE" else None)


TOKEN = {"authOptions": {"mode": "token", "secretName": "ray-token"}}


def _denied_ray(path: str) -> str:
    return ("Ray clusters run with token authentication: set authOptions.mode: token with secretName: ray-token (the team's "
            f"token; README, Ray) in {path}")


RAY_CASES = [
    Case("a ray cluster with token auth", _ray("RayCluster", "rayclusters", {**TOKEN, "headGroupSpec": {}}), True),
    Case("a ray job with token auth", _ray("RayJob", "rayjobs", {"entrypoint": "python x.py", "rayClusterSpec": TOKEN}), True),
    Case("a ray job on an existing cluster", _ray("RayJob", "rayjobs", {"entrypoint": "x", "clusterSelector": {"a": "b"}}), True),
    Case("a ray service with token auth", _ray("RayService", "rayservices", {"rayClusterConfig": TOKEN}), True),
    # A team member's own Ray cluster without the token: anyone who reaches the head would run code as the team.
    Case("a ray cluster without auth options", _ray("RayCluster", "rayclusters", {"headGroupSpec": {}}), False,
         _denied_ray("spec")),
    Case("a ray cluster with auth disabled", _ray("RayCluster", "rayclusters", {"authOptions": {"mode": "disabled"}}), False,
         _denied_ray("spec")),
    Case("a ray cluster with auth options but no mode", _ray("RayCluster", "rayclusters", {"authOptions": {"secretName": "x"}}),
         False, _denied_ray("spec")),
    Case("auth switched off on update", _ray("RayCluster", "rayclusters", {"authOptions": {"mode": "disabled"}}, "UPDATE"), False,
         _denied_ray("spec")),
    Case("a ray job whose cluster has no auth", _ray("RayJob", "rayjobs", {"entrypoint": "x", "rayClusterSpec": {}}), False,
         _denied_ray("spec.rayClusterSpec")),
    Case("a ray service whose cluster has auth disabled",
         _ray("RayService", "rayservices", {"rayClusterConfig": {"authOptions": {"mode": "disabled"}}}), False,
         _denied_ray("spec.rayClusterConfig")),
    # KubeRay's own RayCluster of a RayJob is held to the same rule (it copies the RayJob's authOptions).
    Case("the operator's cluster without auth", _ray("RayCluster", "rayclusters", {}, username=(
        "system:serviceaccount:kuberay-system:kuberay-operator"), groups=("system:serviceaccounts",)), False, _denied_ray("spec")),
]


# fab-team-workloads (components/kueue.py team_workloads_policy): what runs in a team namespace of a Kueue cluster --------------------------

TEAM_MEMBER = "yield-alice@fab.internal"
TEAM_NAMESPACE = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-yield", "labels": {
    "kubernetes.io/metadata.name": "team-yield", "fab.internal/kueue-managed": "true", "fab.internal/team": "yield"}}}
INFERENCE_NAMESPACE = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "inference", "labels": {
    "kubernetes.io/metadata.name": "inference"}}}
TRAINING_TOLERATION = {"key": "fab.internal/gpu-pool", "operator": "Equal", "value": "training", "effect": "NoSchedule"}
INFERENCE_TOLERATION = {"key": "fab.internal/gpu-pool", "operator": "Equal", "value": "inference", "effect": "NoSchedule"}
DEFAULT_TOLERATIONS = [{"key": f"node.kubernetes.io/{t}", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}
                       for t in ("not-ready", "unreachable")]
"""What the API server's DefaultTolerationSeconds plugin adds to every pod before validating admission runs."""
_KINDS = {
    "Pod": ("", "v1", "pods"), "Job": ("batch", "v1", "jobs"), "CronJob": ("batch", "v1", "cronjobs"),
    "JobSet": ("jobset.x-k8s.io", "v1alpha2", "jobsets"), "RayCluster": ("ray.io", "v1", "rayclusters"),
    "RayJob": ("ray.io", "v1", "rayjobs"),
}


def pod_spec(priority: str | None = "fab-training", tolerations: list[dict] | None = None) -> dict:
    spec: dict = {"containers": [{"name": "train", "image": "registry.site.fab.internal/ml/train:1.0.0"}],
                  "tolerations": [TRAINING_TOLERATION, *DEFAULT_TOLERATIONS] if tolerations is None else tolerations}
    if priority is not None:
        spec["priorityClassName"] = priority
    return spec


def workload(kind: str, spec: dict, name: str = "train") -> dict:
    """A `kind` object whose pods have `spec` (a pod, or every pod template of a job kind)."""
    template = {"spec": spec}
    specs = {
        "Pod": spec,
        "Job": {"template": template},
        "CronJob": {"schedule": "0 * * * *", "jobTemplate": {"spec": {"template": template}}},
        "JobSet": {"replicatedJobs": [{"name": "node", "template": {"spec": {"template": template}}}]},
        "RayCluster": {"headGroupSpec": {"template": {"spec": pod_spec()}},
                       "workerGroupSpecs": [{"groupName": "gpu", "template": template}]},
        "RayJob": {"entrypoint": "python train.py", "rayClusterSpec": {"headGroupSpec": {"template": template}}},
    }
    group, version, _ = _KINDS[kind]
    return {"apiVersion": f"{group}/{version}".lstrip("/"), "kind": kind,
            "metadata": {"name": name, "namespace": "team-yield", "labels": {"kueue.x-k8s.io/queue-name": "training"}},
            "spec": specs[kind]}


def team_request(obj: dict, operation: str = "CREATE", old: dict | None = None, username: str = TEAM_MEMBER,
                 namespace_object: dict = TEAM_NAMESPACE) -> Request:
    group, version, resource = _KINDS[obj["kind"]]
    return Request(operation=operation, group=group, version=version, resource=resource, kind=obj["kind"],
                   name=obj["metadata"]["name"], namespace=namespace_object["metadata"]["name"], username=username,
                   object=obj, old_object=old, namespace_object=namespace_object)


DENIED_PRIORITY = ("in a team namespace, pods run at the fab-training PriorityClass or none: fab-serving and the system-* "
                   "classes are the platform's")
DENIED_TOLERATION = ("in a team namespace, pods tolerate only the training pool's taint (fab.internal/gpu-pool=training) and "
                     "Kubernetes' node-condition taints: the inference and notebooks pools and the system nodes are the "
                     "platform's")
_deleting = workload("Pod", pod_spec("fab-serving"))
_deleting["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"

TEAM_WORKLOAD_CASES = [
    Case("a training pod as the runtimes make it", team_request(workload("Pod", pod_spec())), True),
    Case("a pod naming no class and tolerating nothing", team_request(workload("Pod", pod_spec(None, []))), True),
    Case("a Job at training priority", team_request(workload("Job", pod_spec())), True),
    Case("a RayCluster at training priority", team_request(workload("RayCluster", pod_spec())), True),
    Case("a GPU pod tolerating nvidia.com/gpu", team_request(workload("Pod", pod_spec(tolerations=[
        TRAINING_TOLERATION, {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]))), True),
    Case("the toleration with its operator left to the default", team_request(workload("Pod", pod_spec(tolerations=[
        {"key": "fab.internal/gpu-pool", "value": "training", "effect": "NoSchedule"}]))), True),
    Case("serving's own pod in the inference namespace", team_request(
        workload("Pod", pod_spec("fab-serving", [INFERENCE_TOLERATION])), username="system:serviceaccount:kube-system:replicaset-controller",
        namespace_object=INFERENCE_NAMESPACE), True),
    Case("a pod being deleted (its finalizer removed)", team_request(_deleting, "UPDATE", old=_deleting,
                                                                     username="system:serviceaccount:kueue-system:kueue-controller-manager"), True),
    Case("a pod naming fab-serving", team_request(workload("Pod", pod_spec("fab-serving"))), False, DENIED_PRIORITY),
    Case("a pod naming system-cluster-critical", team_request(workload("Pod", pod_spec("system-cluster-critical"))),
         False, DENIED_PRIORITY),
    Case("a pod naming system-node-critical", team_request(workload("Pod", pod_spec("system-node-critical"))),
         False, DENIED_PRIORITY),
    Case("a pod tolerating the inference pool", team_request(workload("Pod", pod_spec(tolerations=[INFERENCE_TOLERATION]))),
         False, DENIED_TOLERATION),
    Case("a pod tolerating every pool", team_request(workload("Pod", pod_spec(tolerations=[
        {"key": "fab.internal/gpu-pool", "operator": "Exists"}]))), False, DENIED_TOLERATION),
    Case("a pod tolerating every taint", team_request(workload("Pod", pod_spec(tolerations=[{"operator": "Exists"}]))),
         False, DENIED_TOLERATION),
    Case("a pod tolerating the control plane", team_request(workload("Pod", pod_spec(tolerations=[
        {"key": "node-role.kubernetes.io/control-plane", "operator": "Exists", "effect": "NoSchedule"}]))), False, DENIED_TOLERATION),
    Case("a pod made by MultiKueue naming fab-serving", team_request(
        workload("Pod", pod_spec("fab-serving")), username="system:serviceaccount:fab-access:multikueue"), False, DENIED_PRIORITY),
    Case("a pod given the inference toleration on update", team_request(
        workload("Pod", pod_spec(tolerations=[TRAINING_TOLERATION, INFERENCE_TOLERATION])), "UPDATE",
        old=workload("Pod", pod_spec())), False, DENIED_TOLERATION),
    Case("a Job naming fab-serving", team_request(workload("Job", pod_spec("fab-serving"))), False, DENIED_PRIORITY),
    Case("a CronJob tolerating the inference pool", team_request(workload("CronJob", pod_spec(tolerations=[INFERENCE_TOLERATION]))),
         False, DENIED_TOLERATION),
    Case("a JobSet naming system-cluster-critical", team_request(workload("JobSet", pod_spec("system-cluster-critical"))),
         False, DENIED_PRIORITY),
    Case("a RayCluster whose workers tolerate the inference pool", team_request(
        workload("RayCluster", pod_spec(tolerations=[INFERENCE_TOLERATION]))), False, DENIED_TOLERATION),
    Case("a RayJob whose head names fab-serving", team_request(workload("RayJob", pod_spec("fab-serving"))), False, DENIED_PRIORITY),
]


# fab-iceberg-maintenance-applications (components/iceberg_maintenance.py): what runs as the maintenance principal ---------

AIRFLOW_WORKER = "system:serviceaccount:airflow:airflow-worker"
TASK_LABELS = {"dag_id": "iceberg_maintenance", "task_id": "maintain_fdc", "try_number": "1"}
"""What Airflow's SparkKubernetesOperator adds to the driver and executors of an application it submits."""


def submitted(app: dict, name: str = "maintain-fdc-1a2b3c") -> dict:
    """`app` as Airflow's operator creates it: named, its driver and executors labelled with the task."""
    spec = json.loads(json.dumps(app["spec"]))
    for role in ("driver", "executor"):
        spec[role]["labels"] = {**spec[role].get("labels", {}), **TASK_LABELS}
    return {**app, "metadata": {**app["metadata"], "name": name}, "spec": spec}


def changed(app: dict, path: str, value: object) -> dict:
    """`app` with the field at the dotted `path` (under spec) set to `value`."""
    out = json.loads(json.dumps(app))
    *parents, last = path.split(".")
    node = out["spec"]
    for key in parents:
        node = node[key]
    node[last] = value
    return out


def application_request(app: dict, operation: str = "CREATE", old: dict | None = None, username: str = AIRFLOW_WORKER) -> Request:
    return Request(operation=operation, group="sparkoperator.k8s.io", version="v1beta2", resource="sparkapplications",
                   kind="SparkApplication", name=app["metadata"]["name"], namespace="iceberg-maintenance", username=username,
                   groups=("system:serviceaccounts", "system:serviceaccounts:airflow", "system:authenticated"),
                   object=app, old_object=old)


def driver_pod(image: str) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "maintain-fdc-driver", "namespace": "iceberg-maintenance"},
            "spec": {"containers": [{"name": "spark-kubernetes-driver", "image": image}]}}


def pod_patch(old: dict, new: dict) -> Request:
    return Request(operation="UPDATE", group="", version="v1", resource="pods", kind="Pod", name=new["metadata"]["name"],
                   namespace="iceberg-maintenance", username=AIRFLOW_WORKER, object=new, old_object=old)


DENIED_SUBMITTER = "only Airflow's ServiceAccounts (the iceberg_maintenance DAG) submit SparkApplications in iceberg-maintenance"
DENIED_POD_CHANGE = "a pod's spec in iceberg-maintenance does not change after it is created"


def denied_field(path: str) -> str:
    return (f"{path} of a SparkApplication in iceberg-maintenance must be the platform's maintenance application's "
            "(components/iceberg_maintenance.py), which runs as the maintenance principal")


def maintenance_cases(app: dict) -> list[Case]:
    """The cases of the policy made for the site whose shipped application `app` is (one of `platform.json`'s)."""
    ours = submitted(app)
    settings = json.loads(app["spec"]["arguments"][-1])
    shorter = [*app["spec"]["arguments"][:-1], json.dumps({**settings, "snapshot_retention_days": 0, "min_snapshots_kept": 1})]
    image = app["spec"]["image"]
    labelled = {**driver_pod(image), "metadata": {**driver_pod(image)["metadata"], "labels": {"spark-app-selector": "seen"}}}
    return [
        Case("Airflow submitting the platform's application", application_request(ours), True),
        Case("the operator's bookkeeping on it", application_request(
            {**ours, "metadata": {**ours["metadata"], "finalizers": ["x"]}}, "UPDATE", old=ours,
            username="system:serviceaccount:spark-operator:spark-operator-controller"), True),
        Case("Airflow labelling the driver pod as seen", pod_patch(driver_pod(image), labelled), True),
        Case("a team member submitting the platform's application", application_request(ours, username="yield-alice@fab.internal"),
             False, DENIED_SUBMITTER),
        Case("an own job file", application_request(changed(ours, "mainApplicationFile", "s3a://scratch/steal.py")),
             False, denied_field("spec.mainApplicationFile")),
        Case("an own image", application_request(changed(ours, "image", "registry.example/evil:1")), False, denied_field("spec.image")),
        Case("a retention that expires every snapshot", application_request(changed(ours, "arguments", shorter)),
             False, denied_field("spec.arguments")),
        Case("an own package on the classpath", application_request(changed(ours, "sparkConf", {
            **ours["spec"]["sparkConf"], "spark.jars.packages": "org.example:steal:1.0"})), False, denied_field("spec.sparkConf")),
        Case("an own Hadoop configuration", application_request(changed(ours, "hadoopConf", {"fs.s3a.endpoint": "evil"})),
             False, denied_field("the fields of spec")),
        Case("an own sidecar on the driver", application_request(changed(ours, "driver.sidecars", [
            {"name": "x", "image": "registry.example/evil:1"}])), False, denied_field("the fields of spec.driver")),
        Case("another ServiceAccount for the driver", application_request(changed(ours, "driver.serviceAccount", "spark-operator")),
             False, denied_field("spec.driver.serviceAccount")),
        Case("the job file patched in after creation", application_request(
            changed(ours, "mainApplicationFile", "s3a://scratch/steal.py"), "UPDATE", old=ours),
             False, denied_field("spec.mainApplicationFile")),
        Case("the driver's image patched", pod_patch(driver_pod(image), driver_pod("registry.example/evil:1")),
             False, DENIED_POD_CHANGE),
    ]
