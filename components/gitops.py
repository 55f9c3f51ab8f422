"""Serving through Git: what a serving cluster gives the Argo CD on compute that applies its manifests (issue 18;
DESIGN section 2, "GitOps-based multiple clusters").

One Argo CD on the compute cluster manages every serving cluster as a destination (hub and spoke): it is reached only
through compute's ingress, never the GPU cluster's, as the MultiKueue manager already reaches the GPU clusters' API
servers from compute. Each serving cluster gives it a ServiceAccount in the serving namespace with exactly the verbs
Argo CD needs on exactly the kinds the serving repository holds (`serving_deployer`), and the engine on compute turns
its token into an Argo CD cluster Secret (components/engines/argocd.py). Argo CD can then change nothing else: not
another namespace, not a cluster-scoped object, not the gateway's policies Pulumi keeps.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.gpu import INFERENCE_NAMESPACE
from components.providers import ClusterRef

SERVING_ACCOUNT = "argocd-serving"
"""The ServiceAccount (and its Role, RoleBinding and token Secret `argocd-serving-token`) Argo CD acts as on a serving
cluster."""

SERVING_KINDS: tuple[tuple[str, str], ...] = (
    ("apps", "Deployment"),
    ("", "Service"),
    ("policy", "PodDisruptionBudget"),
    ("gateway.networking.k8s.io", "HTTPRoute"),
)
"""(API group, kind) of every object the serving repository holds (`fabctl serving render`): a model's vLLM Deployment,
Service, PodDisruptionBudget and HTTPRoute, and a canary's Deployment and Service. Argo CD creates, changes and prunes
these, and nothing else."""
OBSERVED_KINDS: tuple[tuple[str, str], ...] = (
    ("apps", "ReplicaSet"),
    ("", "Pod"),
    ("discovery.k8s.io", "EndpointSlice"),
)
"""What the serving objects make, which Argo CD only reads: a Deployment's health and resource tree (its ReplicaSets and
Pods) and a Service's endpoints."""

WRITE_VERBS = ["get", "list", "watch", "create", "update", "patch", "delete"]
READ_VERBS = ["get", "list", "watch"]

_PLURALS = {"Deployment": "deployments", "Service": "services", "PodDisruptionBudget": "poddisruptionbudgets",
            "HTTPRoute": "httproutes", "ReplicaSet": "replicasets", "Pod": "pods", "EndpointSlice": "endpointslices"}


def _rules(kinds: tuple[tuple[str, str], ...], verbs: list[str]) -> list[dict[str, Any]]:
    """One rule per API group, its kinds' resources in the order given."""
    groups: dict[str, list[str]] = {}
    for group, kind in kinds:
        groups.setdefault(group, []).append(_PLURALS[kind])
    return [{"apiGroups": [group], "resources": resources, "verbs": list(verbs)} for group, resources in groups.items()]


SERVING_RULES: list[dict[str, Any]] = [*_rules(SERVING_KINDS, WRITE_VERBS), *_rules(OBSERVED_KINDS, READ_VERBS)]
"""The Role of `SERVING_ACCOUNT` in the serving namespace: read and write on the serving kinds, read-only on what they
make. No `pods/log`, `pods/exec` or Secrets: the vLLM pods' logs are read with kubectl by those with access to the
serving cluster."""


@dataclass(frozen=True)
class ServingTarget:
    """A serving cluster as Argo CD on compute reaches it: its API server, the namespace it may change, the token it acts
    with and the models it serves there."""

    cluster: ClusterRef
    api_server: str
    """URL of the cluster's API server (`https://<api_server>:<api_server_port>`), the Argo CD destination's `server`."""
    namespace: str
    """The serving namespace (`inference`): the only one the destination admits."""
    token: k8s.core.v1.Secret
    """The service-account-token Secret of `SERVING_ACCOUNT` (its `data` holds `token` and `ca.crt`, a Pulumi secret)."""
    models: list[str]
    """The models served there, each a directory `<cluster>/<model>/` of the serving repository."""


def serving_deployer(prefix: str, cluster: ClusterRef, namespace_resource: pulumi.Resource,
                     opts: pulumi.ResourceOptions) -> k8s.core.v1.Secret:
    """On `cluster`, in the serving namespace (made by `namespace_resource`): the ServiceAccount Argo CD acts as, its Role
    with exactly `SERVING_RULES`, the RoleBinding, and its token Secret (returned; its data is a Pulumi secret)."""
    ns = INFERENCE_NAMESPACE
    # The namespace must exist before anything is created in it.
    on = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(provider=cluster.provider, depends_on=[namespace_resource]))
    account = k8s.core.v1.ServiceAccount(
        f"{prefix}-sa-{SERVING_ACCOUNT}",
        metadata={"name": SERVING_ACCOUNT, "namespace": ns},
        automount_service_account_token=False,
        opts=on,
    )
    role = k8s.rbac.v1.Role(
        f"{prefix}-role-{SERVING_ACCOUNT}",
        metadata={"name": SERVING_ACCOUNT, "namespace": ns},
        rules=SERVING_RULES,
        opts=on,
    )
    k8s.rbac.v1.RoleBinding(
        f"{prefix}-binding-{SERVING_ACCOUNT}",
        metadata={"name": SERVING_ACCOUNT, "namespace": ns},
        role_ref={"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": SERVING_ACCOUNT},
        subjects=[{"kind": "ServiceAccount", "name": SERVING_ACCOUNT, "namespace": ns}],
        # Unless the deploying identity may `bind`, the API server checks it holds the Role's rules: the Role must exist.
        opts=pulumi.ResourceOptions.merge(on, pulumi.ResourceOptions(depends_on=[account, role])),
    )
    return k8s.core.v1.Secret(
        f"{prefix}-token-{SERVING_ACCOUNT}",
        metadata={"name": f"{SERVING_ACCOUNT}-token", "namespace": ns,
                  "annotations": {"kubernetes.io/service-account.name": SERVING_ACCOUNT}},
        type="kubernetes.io/service-account-token",
        # The token controller fills in the token of an existing ServiceAccount only (it deletes the Secret otherwise).
        opts=pulumi.ResourceOptions.merge(on, pulumi.ResourceOptions(depends_on=[account], additional_secret_outputs=["data"])),
    )
