"""The requests each ValidatingAdmissionPolicy the program ships must refuse and must allow, evaluated by the CEL engine
(tests/admission.py). Every policy the program applies or a Helm release of it installs has its cases here: a test
fails when one ships without (tests/test_admission_policies.py, tests/test_helm_releases.py)."""

from __future__ import annotations

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
