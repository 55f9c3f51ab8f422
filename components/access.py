"""PreviewAccess: the identity pull-request previews run as, on every cluster; it cannot change anything (README, "CI").

`pulumi preview` reads the clusters and computes server-side-apply diffs with dry-run requests, which
Kubernetes RBAC authorizes like real ones. So the ServiceAccount `fab-preview` may read everything and
may create, patch and update the API groups the platform manages, and a ValidatingAdmissionPolicy
refuses every request of it that is not a dry run: the API server, not the CI runner, guarantees that a
preview changes nothing. The admission API group is not among those it may write, so it cannot lift
that policy either. The kubeconfig built from its token is all a preview runner holds.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from components.config import AdoptConfig
from components.kube import Adoption, checkov_skips, namespace
from components.providers import ClusterRef
from components.registry import UPSTREAM

PREVIEW_NAMESPACE = "fab-preview"
PREVIEW_ACCOUNT = "fab-preview"
PREVIEW_USER = f"system:serviceaccount:{PREVIEW_NAMESPACE}:{PREVIEW_ACCOUNT}"
DRY_RUN_ONLY = "fab-preview-dry-run-only"
PREVIEW_WRITE_GROUPS = [
    "", "apps", "batch", "policy", "rbac.authorization.k8s.io", "scheduling.k8s.io", "storage.k8s.io",
    "cilium.io", "kueue.x-k8s.io", "gateway.networking.k8s.io", "gateway.envoyproxy.io", "nvidia.com", "mellanox.com",
    "nv-ipam.nvidia.com", "nfd.k8s-sigs.io", "postgresql.cnpg.io", "starrocks.com", "monitoring.coreos.com",
    "discovery.k8s.io", "networking.k8s.io", "trainer.kubeflow.org", "inference.networking.k8s.io",
]
"""The API groups of the objects the program applies (a test keeps this list complete): what a preview dry-runs."""


def preview_rules() -> list[dict[str, object]]:
    return [
        {"apiGroups": ["*"], "resources": ["*"], "verbs": ["get", "list", "watch"]},
        {"apiGroups": PREVIEW_WRITE_GROUPS, "resources": ["*"], "verbs": ["create", "patch", "update"]},
        # A dry-run of a Role or binding is checked for escalation like a real one.
        {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["clusterroles", "roles"], "verbs": ["escalate", "bind"]},
    ]


def dry_run_only_policy() -> dict[str, object]:
    return {
        "failurePolicy": "Fail",
        "matchConstraints": {"resourceRules": [{
            "apiGroups": ["*"], "apiVersions": ["*"], "operations": ["CREATE", "UPDATE", "DELETE", "CONNECT"], "resources": ["*", "*/*"],
        }]},
        "matchConditions": [{"name": "preview-identity", "expression": f"request.userInfo.username == '{PREVIEW_USER}'"}],
        "validations": [{
            "expression": "request.dryRun == true",
            "message": "the preview identity makes dry-run requests only; deploys run as another identity",
        }],
    }


@dataclass(frozen=True)
class PreviewAccessArgs:
    clusters: dict[str, ClusterRef]
    """Every cluster of the site, by key: previews read them all."""
    adopt: AdoptConfig
    """Declares the clusters where the preview namespace exists already."""


class PreviewAccess(pulumi.ComponentResource):
    """On every cluster: the preview ServiceAccount, its token, its roles, and the policy that keeps it to dry runs."""

    def __init__(self, name: str, args: PreviewAccessArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("fab:access:PreviewAccess", name, None, opts)
        for key, cluster in sorted(args.clusters.items()):
            on = pulumi.ResourceOptions(parent=self, provider=cluster.provider)
            after = lambda *deps: pulumi.ResourceOptions.merge(on, pulumi.ResourceOptions(depends_on=list(deps)))  # noqa: E731
            prefix = f"{name}-{key}"
            # No pod runs here (the namespace holds the preview identity), so no image is pulled in it.
            ns = namespace(f"{prefix}-ns-{PREVIEW_NAMESPACE}", PREVIEW_NAMESPACE, on, adopt=Adoption(args.adopt, key), registry=UPSTREAM)
            account = k8s.core.v1.ServiceAccount(
                f"{prefix}-sa", metadata={"name": PREVIEW_ACCOUNT, "namespace": PREVIEW_NAMESPACE},
                automount_service_account_token=False, opts=after(ns),  # the namespace must exist before the account in it
            )
            k8s.core.v1.Secret(
                f"{prefix}-token",
                metadata={"name": f"{PREVIEW_ACCOUNT}-token", "namespace": PREVIEW_NAMESPACE,
                          "annotations": {"kubernetes.io/service-account.name": PREVIEW_ACCOUNT}},
                type="kubernetes.io/service-account-token",
                # The token controller fills in the token of an existing ServiceAccount only (it deletes the Secret otherwise).
                opts=pulumi.ResourceOptions.merge(after(account), pulumi.ResourceOptions(additional_secret_outputs=["data"])),
            )
            # The guard exists before the identity may do anything.
            policy = k8s.admissionregistration.v1.ValidatingAdmissionPolicy(
                f"{prefix}-dry-run-only", metadata={"name": DRY_RUN_ONLY}, spec=dry_run_only_policy(), opts=on,
            )
            # The binding puts the guard in force only once the policy it names exists.
            binding = k8s.admissionregistration.v1.ValidatingAdmissionPolicyBinding(
                f"{prefix}-dry-run-only-binding", metadata={"name": DRY_RUN_ONLY},
                spec={"policyName": DRY_RUN_ONLY, "validationActions": ["Deny"]}, opts=after(policy),
            )
            role = k8s.rbac.v1.ClusterRole(
                f"{prefix}-role", metadata={"name": PREVIEW_ACCOUNT, "annotations": checkov_skips("CKV_K8S_49", "CKV_K8S_158")},
                rules=preview_rules(), opts=after(binding),  # no rights before the guard is in force
            )
            k8s.rbac.v1.ClusterRoleBinding(
                f"{prefix}-binding", metadata={"name": PREVIEW_ACCOUNT},
                role_ref={"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": PREVIEW_ACCOUNT},
                subjects=[{"kind": "ServiceAccount", "name": PREVIEW_ACCOUNT, "namespace": PREVIEW_NAMESPACE}],
                # Its rights come last: once the guard is in force, and the role exists (the API server checks a binding
                # against its role's rules unless the deploying identity may `bind`).
                opts=after(role, account, binding),
            )
        self.register_outputs({})
