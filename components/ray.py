"""RayPlatform: KubeRay on the GPU clusters, Ray through Kueue, interactive Ray from Jupyter (DESIGN section 1, the
training pool's "PyTorch · Ray · Job"; section 2, method C "Jupyter → Ray").

The KubeRay operator runs on every GPU cluster, on the system nodes, and reconciles the team namespaces only. RayJobs
and RayClusters carry the team's LocalQueue label and are admitted by Kueue (frameworks `ray.io/rayjob`,
`ray.io/raycluster`); with MultiKueue, the manager holds the KubeRay CRDs and an operator that watches only its own
namespace, since Kueue marks the manager's copies `managedBy: kueue.x-k8s.io/multikueue` and the workers run them.

Every team namespace of a GPU cluster holds the ConfigMap `ray-cluster-template` (a RayCluster its members apply as it
is) and the Secret `ray-token` (the team's Ray token: KubeRay's `authOptions` token mode reads it). The same token is
the Secret `ray-token-<team>` in compute's JupyterHub namespace, which JupyterHub mounts into the servers of the team's
members only (components/engines/jupyterhub.py); the flow `ray-<team>` admits those servers to the team's Ray heads.

Token authentication is not the template's choice but the cluster's rule: on every cluster KubeRay runs on, the
ValidatingAdmissionPolicy `fab-ray-token-auth` refuses a RayCluster, a RayJob with its own cluster or a RayService whose
cluster leaves `authOptions.mode` anything but `token` (KubeRay 1.7: `disabled` or unset starts Ray without auth).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components import versions, yamltext
from components.cilium import POOL_LABEL as LB_POOL_LABEL
from components.config import GPU_ROLES, AdoptConfig, Flow, SiteConfig, names
from components.constants import RAY_TOKEN_KEY, TEAM_LABEL, polaris_secret, s3_secret
from components.data_access import TRAINING
from components.gpu import NCCL_CONFIG, POOL_LABEL, TRAINING_PRIORITY, toleration
from components.kube import (
    Adoption,
    helm_release,
    namespace,
    random_secret,
    restricted_container,
    restricted_pod_security_context,
)
from components.kueue import DEFAULT_WORKLOAD_PRIORITY, LOCAL_QUEUE, PRIORITY_LABEL, QUEUE_LABEL
from components.providers import ClusterRef
from components.registry import UPSTREAM, Registry

KUBERAY_NAMESPACE = "kuberay-system"
TOKEN_SECRET = "ray-token"
"""The team's Ray token in each of its namespaces on the GPU clusters (`authOptions.secretName`)."""
TEMPLATE_CONFIG_MAP = "ray-cluster-template"
OPERATOR_RESOURCES = {"requests": {"cpu": "100m", "memory": "256Mi"}, "limits": {"cpu": "1", "memory": "512Mi"}}
RAY_USER = 1000
"""The `ray` user of the rayproject images."""


def operator_values(watch: list[str] | None) -> dict[str, Any]:
    """The KubeRay chart's values: restricted, on the untainted system nodes (no GPU pool toleration), with Roles in the
    `watch` namespaces only; `None` watches its own namespace only (the MultiKueue manager's CRD-holding install)."""
    values: dict[str, Any] = {
        "podSecurityContext": restricted_pod_security_context(),
        "resources": OPERATOR_RESOURCES,
        "singleNamespaceInstall": True,
        "crNamespacedRbacEnable": True,
    }
    if watch is not None:
        values["watchNamespace"] = sorted(watch)
    return values


TOKEN_AUTH_POLICY = "fab-ray-token-auth"
"""The admission policy that makes token authentication mandatory for every Ray cluster (`token_auth_policy`)."""
TOKEN_AUTH_MESSAGE = (
    "Ray clusters run with token authentication: set authOptions.mode: token with secretName: ray-token (the team's token; "
    "README, Ray) in {path}"
)
_TOKEN_MODE = "has({cluster}.authOptions) && has({cluster}.authOptions.mode) && {cluster}.authOptions.mode == 'token'"


def token_auth_policy() -> dict[str, Any]:
    """The ValidatingAdmissionPolicy spec that refuses a Ray cluster without token authentication: a RayCluster's spec, a
    RayJob's `rayClusterSpec` (a RayJob that names an existing cluster by `clusterSelector` starts none) and a RayService's
    `rayClusterConfig` must set `authOptions.mode: token`. For every requester, KubeRay's own copies included (a RayJob's
    RayCluster carries the RayJob's authOptions), and on create and update alike."""
    checks = (("rayclusters", "object.spec", "spec"), ("rayjobs", "object.spec.rayClusterSpec", "spec.rayClusterSpec"),
              ("rayservices", "object.spec.rayClusterConfig", "spec.rayClusterConfig"))

    def guard(resource: str, cluster: str) -> str:
        present = "" if resource == "rayclusters" else f"!has({cluster}) || "
        return f"request.resource.resource != '{resource}' || {present}({_TOKEN_MODE.format(cluster=cluster)})"

    return {
        "failurePolicy": "Fail",
        "matchConstraints": {"resourceRules": [{
            "apiGroups": ["ray.io"], "apiVersions": ["*"], "operations": ["CREATE", "UPDATE"],
            "resources": [resource for resource, _, _ in checks],
        }]},
        "validations": [{"expression": guard(resource, cluster), "message": TOKEN_AUTH_MESSAGE.format(path=path),
                         "reason": "Forbidden"} for resource, cluster, path in checks],
    }


def _ray_container(name: str, resources: dict[str, str], registry: Registry,
                   ports: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return restricted_container(
        name, registry.image(versions.RAY_IMAGE), RAY_USER,
        # The team's S3 keys and Polaris principal (data by reference), and the NCCL settings of the cluster it runs on.
        envFrom=[{"secretRef": {"name": s3_secret(TRAINING)}}, {"secretRef": {"name": polaris_secret(TRAINING)}},
                 {"configMapRef": {"name": NCCL_CONFIG}}],
        # Ray writes its session, logs and spilled objects under /tmp; the root filesystem stays read-only.
        volumeMounts=[{"name": "tmp", "mountPath": "/tmp"}],
        resources={"requests": dict(resources), "limits": dict(resources)},
        **({"ports": ports} if ports else {}),
    )


def _pod_template(container: dict[str, Any], registry: Registry) -> dict[str, Any]:
    return {"spec": {
        "priorityClassName": TRAINING_PRIORITY,
        "securityContext": restricted_pod_security_context(),
        **registry.pod_fields(),
        "nodeSelector": {POOL_LABEL: "training"},
        "tolerations": [toleration("training")],
        "containers": [container],
        "volumes": [{"name": "tmp", "emptyDir": {}}],
    }}


def ray_cluster_spec(client_pool: str | None, gpu_workers: int = 1, gpus_per_worker: int = 1,
                     registry: Registry = UPSTREAM) -> dict[str, Any]:
    """A RayCluster's spec as a team runs it: token authentication with the team's token, GPU workers in the training pool
    at training priority, no in-tree autoscaler (Kueue admits a fixed size), and for an interactive cluster the head's
    client port on an internal LoadBalancer address of the GPU cluster (from `client_pool`, routed inside the site only).
    The Ray image comes from the cluster's `registry` (KubeRay runs a RayJob's submitter, if any, with the head's image),
    and the pods name its pull Secret where the site has one."""
    head = _ray_container("ray-head", {"cpu": "4", "memory": "16Gi"}, registry, ports=[
        {"name": "gcs-server", "containerPort": 6379}, {"name": "dashboard", "containerPort": 8265},
        {"name": "client", "containerPort": RAY_CLIENT_PORT},
    ])
    worker = _ray_container("ray-worker", {"cpu": "16", "memory": "128Gi", "nvidia.com/gpu": str(gpus_per_worker)}, registry)
    head_group: dict[str, Any] = {"rayStartParams": {}, "template": _pod_template(head, registry)}
    if client_pool is not None:
        # KubeRay builds the head Service from `headService`; Local keeps the Jupyter server's address, which the flow
        # rule admits (a forwarding node would otherwise put its own).
        head_group = {"serviceType": "LoadBalancer", "headService": {
            "metadata": {"labels": {LB_POOL_LABEL: client_pool}},
            "spec": {"type": "LoadBalancer", "externalTrafficPolicy": "Local"},
        }, **head_group}
    return {
        "rayVersion": versions.RAY_IMAGE.split(":")[1].split("-")[0],
        "authOptions": {"mode": "token", "secretName": TOKEN_SECRET},
        "enableInTreeAutoscaling": False,
        "headGroupSpec": head_group,
        "workerGroupSpecs": [{
            "groupName": "gpu",
            "replicas": gpu_workers,
            "minReplicas": gpu_workers,
            "maxReplicas": gpu_workers,
            "rayStartParams": {},
            "template": _pod_template(worker, registry),
        }],
    }


def ray_cluster_template(lb_pool: str, registry: Registry = UPSTREAM) -> dict[str, Any]:
    """The RayCluster a team applies in its namespace: queued by its LocalQueue at normal training priority."""
    return {
        "apiVersion": versions.RAY_API,
        "kind": "RayCluster",
        "metadata": {"name": "interactive", "labels": {QUEUE_LABEL: LOCAL_QUEUE, PRIORITY_LABEL: DEFAULT_WORKLOAD_PRIORITY}},
        "spec": ray_cluster_spec(lb_pool, registry=registry),
    }


def example_ray_job(registry: Registry = UPSTREAM) -> dict[str, Any]:
    """A RayJob as a team submits it (docs/gpus.md, "Ray: interactive sessions and RayJobs"): its own Ray cluster (no client
    address: nothing outside reaches it), deleted when the entrypoint ends, submitted over the dashboard's HTTP API by
    the operator (no submitter pod, which the restricted namespace would need to be written out)."""
    return {
        "apiVersion": versions.RAY_API,
        "kind": "RayJob",
        "metadata": {"generateName": "ray-train-", "labels": {QUEUE_LABEL: LOCAL_QUEUE, PRIORITY_LABEL: DEFAULT_WORKLOAD_PRIORITY}},
        "spec": {
            "entrypoint": "python -m train --table fab.yield.wafer_features",
            "submissionMode": "HTTPMode",
            "shutdownAfterJobFinishes": True,
            "ttlSecondsAfterFinished": 600,
            "rayClusterSpec": ray_cluster_spec(None, gpu_workers=2, registry=registry),
        },
    }


def jupyter_token_secrets(teams: list[str]) -> dict[str, str]:
    """Keycloak group -> the Secret in compute's JupyterHub namespace that a member's server mounts."""
    return {names.TEAM_GROUP(team): names.RAY_TOKEN_SECRET(team) for team in sorted(teams)}


def team_tokens(teams: list[str], opts: pulumi.ResourceOptions | None = None) -> dict[str, pulumi.Output[str]]:
    """One generated Ray token per team (a Pulumi secret): the same on every GPU cluster, wherever MultiKueue places the
    team's Ray cluster, and in the team's members' Jupyter servers."""
    return {team: random_secret(f"ray-token-{team}", 48, opts or pulumi.ResourceOptions()) for team in sorted(teams)}


@dataclass(frozen=True)
class RayPlatformArgs:
    gpus: dict[str, ClusterRef]
    """Every GPU cluster, by key: the operator and the teams' templates and tokens go to each."""
    lb_pools: dict[str, str]
    """GPU cluster -> the internal LB pool its Ray heads take their client address from."""
    manager: ClusterRef | None
    """The MultiKueue manager, which needs the KubeRay CRDs to hold the Ray objects it dispatches; None without it."""
    team_namespaces: dict[tuple[str, str], k8s.core.v1.Namespace]
    """(GPU cluster, namespace) -> the team namespaces TrainingPool creates, where Ray objects run."""
    teams: dict[str, str]
    """Team namespace -> team: whose token goes into it."""
    tokens: dict[str, pulumi.Output[str]]
    """Team -> its Ray token (`team_tokens`)."""
    adopt: AdoptConfig
    """Declares the namespaces and KubeRay releases that exist already."""


class RayPlatform(pulumi.ComponentResource):
    """KubeRay on every GPU cluster (and CRDs on the MultiKueue manager); each team's Ray template and token."""

    releases: dict[str, k8s.helm.v3.Release]
    """The KubeRay release of each cluster, by key."""

    def __init__(self, name: str, args: RayPlatformArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("fab:ray:RayPlatform", name, None, opts)
        self._name, self._adopt = name, args.adopt
        self.releases = {}
        for key, cluster in sorted(args.gpus.items()):
            team_ns = {ns_name: ns for (c, ns_name), ns in sorted(args.team_namespaces.items()) if c == key}
            # The chart creates a Role in every watched namespace: they exist first.
            self.releases[key] = self._operator(cluster, sorted(team_ns), list(team_ns.values()))
            template = yamltext.dump(ray_cluster_template(args.lb_pools[key], cluster.registry))
            for ns_name, ns in team_ns.items():
                team = args.teams[ns_name]
                # the namespace must exist before anything is created in it
                on = pulumi.ResourceOptions(parent=self, provider=cluster.provider, depends_on=[ns])
                k8s.core.v1.Secret(
                    f"{name}-{key}-{ns_name}-token",
                    metadata={"name": TOKEN_SECRET, "namespace": ns_name, "labels": {TEAM_LABEL: team}},
                    type="Opaque",
                    string_data={RAY_TOKEN_KEY: args.tokens[team]},
                    opts=on,
                )
                k8s.core.v1.ConfigMap(
                    f"{name}-{key}-{ns_name}-ray-template",
                    metadata={"name": TEMPLATE_CONFIG_MAP, "namespace": ns_name, "labels": {TEAM_LABEL: team}},
                    data={"raycluster.yaml": template},
                    opts=on,
                )
        if args.manager is not None and args.manager.key not in args.gpus:
            self.releases[args.manager.key] = self._operator(args.manager, None, [])
        self.register_outputs({})

    def _operator(self, cluster: ClusterRef, watch: list[str] | None, depends_on: list[pulumi.Resource]) -> k8s.helm.v3.Release:
        on = pulumi.ResourceOptions(parent=self, provider=cluster.provider)
        ns = namespace(f"{self._name}-{cluster.key}-ns", KUBERAY_NAMESPACE, on, adopt=Adoption(self._adopt, cluster.key),
                       registry=cluster.registry)
        # Before the operator (and its CRDs): no Ray cluster can be made without token authentication.
        policy = k8s.admissionregistration.v1.ValidatingAdmissionPolicy(
            f"{self._name}-{cluster.key}-token-auth", metadata={"name": TOKEN_AUTH_POLICY}, spec=token_auth_policy(), opts=on,
        )
        # The binding puts the rule in force once the policy it names exists.
        binding = k8s.admissionregistration.v1.ValidatingAdmissionPolicyBinding(
            f"{self._name}-{cluster.key}-token-auth-binding", metadata={"name": TOKEN_AUTH_POLICY},
            spec={"policyName": TOKEN_AUTH_POLICY, "validationActions": ["Deny"]},
            opts=pulumi.ResourceOptions.merge(on, pulumi.ResourceOptions(depends_on=[policy])),
        )
        return helm_release(
            f"{self._name}-{cluster.key}-kuberay", versions.KUBERAY, name="kuberay-operator", namespace=KUBERAY_NAMESPACE,
            # its namespace, the token rule (in force before any Ray object can be made), and the watched namespaces the
            # chart creates its Roles in (`depends_on`)
            values=operator_values(watch),
            opts=pulumi.ResourceOptions.merge(on, pulumi.ResourceOptions(depends_on=[ns, binding, *depends_on])),
            adopt=Adoption(self._adopt, cluster.key), registry=cluster.registry,
        )


# The flows it opens ---------------------------------------------------------------------------------------------
# Declared to the config by components/catalog.py; SiteConfig.flow_table adds them.


RAY_HEAD_LABELS = {"ray.io/node-type": "head"}
"""What KubeRay labels every Ray head pod with."""
RAY_CLIENT_PORT = 10001
"""Ray Client's port on a Ray head (`ray://<head>:10001`)."""
JUPYTER_NAMESPACE = "jupyterhub"
"""Compute's JupyterHub namespace (its engine's name, components/engines/jupyterhub.py)."""
JUPYTER_USER_LABELS = {"component": "singleuser-server"}
"""What the JupyterHub chart labels every user server with (not the hub, the proxy or other pods of the namespace)."""


def ray_flows(site: SiteConfig) -> dict[str, Flow]:
    """Per team, the Jupyter user servers of its members on compute to the Ray heads in the team's namespace on the GPU
    clusters (Ray Client port), while Ray and JupyterHub are both on: one flow per team, since a flow names one
    destination namespace; the team's Ray token authenticates the session."""
    if not site.ray_enabled() or not site.compute.jupyterhub.enabled:
        return {}
    return {
        names.RAY_FLOW(team): Flow(
            description=f"Jupyter servers on compute open Ray Client sessions on team {team}'s Ray heads (Ray token).",
            sources=site.keys_with_role("compute"), to=site.keys_with_role(*GPU_ROLES), port=RAY_CLIENT_PORT,
            to_namespace=names.TEAM_NAMESPACE(team), to_labels=RAY_HEAD_LABELS,
            # Only the servers of the team's members (the hub marks them; components/engines/jupyterhub.py): the token
            # is a second lock, not the only one.
            from_namespace=JUPYTER_NAMESPACE, from_labels={**JUPYTER_USER_LABELS, names.team_member_label(team): names.TEAM_MEMBER},
        )
        for team in sorted(site.teams)
    }
