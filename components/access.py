"""PreviewAccess: the identity `pulumi preview` runs as, on every cluster; it cannot change anything, nor read a secret.

`pulumi preview` computes server-side-apply diffs with dry-run requests, which Kubernetes RBAC authorizes like real
ones, and reads the live object before it previews an update. So the ServiceAccount `fab-preview` may read, create,
patch and update exactly the resources of the kinds the program applies (a test keeps the list complete), Secrets
excepted, and a ValidatingAdmissionPolicy refuses every request of it that is not a dry run: the API server, not the CI
runner, guarantees that a preview changes nothing. It holds no Secret verb at all, because a dry-run create or patch of
a Secret answers with the object as it would be stored, data included; where it may not write a Secret, pulumi-kubernetes
previews that Secret from the stack's state instead (docs/ci.md). It holds no subresource: no `nodes/proxy` (the
kubelet's exec, which no admission policy sees), no `serviceaccounts/token`, no pod exec, attach or port-forward. The
admission API group is readable but not writable, so it cannot lift that policy either. Previews run from main only
(deploy.yml); the kubeconfig built from its token is all a preview runner holds.
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
PREVIEW_RESOURCES: dict[str, tuple[str, ...]] = {
    "": ("configmaps", "limitranges", "namespaces", "nodes", "resourcequotas", "serviceaccounts", "services"),
    "admissionregistration.k8s.io": ("validatingadmissionpolicies", "validatingadmissionpolicybindings"),
    "apps": ("deployments",),
    "batch": ("cronjobs", "jobs"),
    "cilium.io": ("ciliumbgpadvertisements", "ciliumbgpclusterconfigs", "ciliumbgppeerconfigs", "ciliumclusterwidenetworkpolicies",
                  "ciliumloadbalancerippools", "ciliumnetworkpolicies"),
    "discovery.k8s.io": ("endpointslices",),
    "gateway.envoyproxy.io": ("backends", "backendtrafficpolicies", "clienttrafficpolicies", "envoyextensionpolicies", "envoyproxies",
                              "securitypolicies"),
    "gateway.networking.k8s.io": ("gatewayclasses", "gateways", "httproutes"),
    "inference.networking.k8s.io": ("inferencepools",),
    "kueue.x-k8s.io": ("admissionchecks", "clusterqueues", "cohorts", "localqueues", "multikueueclusters", "multikueueconfigs",
                       "resourceflavors", "topologies", "workloadpriorityclasses"),
    "mellanox.com": ("ipoibnetworks", "nicclusterpolicies"),
    "monitoring.coreos.com": ("podmonitors", "prometheusrules", "servicemonitors"),
    "networking.k8s.io": ("networkpolicies",),
    "nfd.k8s-sigs.io": ("nodefeaturerules",),
    "nv-ipam.nvidia.com": ("ippools",),
    "nvidia.com": ("clusterpolicies",),
    "policy": ("poddisruptionbudgets",),
    "postgresql.cnpg.io": ("clusters", "scheduledbackups"),
    "rbac.authorization.k8s.io": ("clusterrolebindings", "clusterroles", "rolebindings", "roles"),
    "scheduling.k8s.io": ("priorityclasses",),
    "starrocks.com": ("starrocksclusters",),
    "storage.k8s.io": ("storageclasses",),
    "trainer.kubeflow.org": ("clustertrainingruntimes",),
}
"""API group -> the resources of the kinds the program applies, Secrets excepted (a test keeps this complete): what a
preview reads and dry-runs. Named one by one: no `*`, which would take in Secrets and every subresource."""

PREVIEW_READ_ONLY_GROUPS = ("admissionregistration.k8s.io",)
"""Groups the preview reads but may not write, not even as a dry run: the API server exempts its admission configuration
from every admission policy, so the dry-run-only policy could not guard itself."""

READ = ["get", "list", "watch"]
DRY_RUN = ["create", "patch", "update"]


def preview_rules() -> list[dict[str, object]]:
    return [
        *({"apiGroups": [group], "resources": list(resources), "verbs": READ + ([] if group in PREVIEW_READ_ONLY_GROUPS else DRY_RUN)}
          for group, resources in sorted(PREVIEW_RESOURCES.items())),
        # A dry run of a Role or binding is checked for escalation like a real one.
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
                f"{prefix}-role", metadata={"name": PREVIEW_ACCOUNT, "annotations": checkov_skips("CKV_K8S_158")},
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
