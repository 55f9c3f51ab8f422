"""PreviewAccess: previews run as an identity the API server keeps to dry runs, on every cluster."""

from __future__ import annotations

PREVIEW_USER = "system:serviceaccount:fab-preview:fab-preview"
WRITE_VERBS = {"create", "patch", "update", "delete"}


def preview_roles(plan) -> dict[str, list[dict]]:
    """Cluster -> rules of the preview identity's ClusterRole there."""
    return {c: o["rules"] for c, o, _ in plan.manifests() if o["kind"] == "ClusterRole" and o["metadata"]["name"] == "fab-preview"}


def test_every_cluster_keeps_the_preview_identity_to_dry_runs(plan):
    clusters = {r["name"] for r in plan.of_type("pulumi:providers:kubernetes")}
    policies = {c: o for c, o, _ in plan.manifests()
                if o["kind"] == "ValidatingAdmissionPolicy" and o["metadata"]["name"] == "fab-preview-dry-run-only"}
    bindings = {c for c, o, _ in plan.manifests() if o["kind"] == "ValidatingAdmissionPolicyBinding"
                and o["spec"] == {"policyName": "fab-preview-dry-run-only", "validationActions": ["Deny"]}}
    assert clusters and set(policies) == clusters == bindings == set(preview_roles(plan))
    for spec in (p["spec"] for p in policies.values()):
        assert spec["matchConditions"] == [{"name": "preview-identity", "expression": f"request.userInfo.username == '{PREVIEW_USER}'"}]
        assert [v["expression"] for v in spec["validations"]] == ["request.dryRun == true"]


def test_the_preview_identity_cannot_write_the_admission_policies(small_plan):
    roles = preview_roles(small_plan)
    assert sorted(roles) == ["site-t-compute", "site-t-gpu", "site-t-storage"]
    for rules in roles.values():
        writable = {g for rule in rules if set(rule["verbs"]) & WRITE_VERBS for g in rule["apiGroups"]}
        assert writable
        assert "admissionregistration.k8s.io" not in writable and "*" not in writable


def test_the_preview_identity_may_dry_run_every_group_the_program_applies(plan):
    applied = {o["apiVersion"].rpartition("/")[0] for _, o, _ in plan.manifests()}
    assert applied and preview_roles(plan)
    for cluster, rules in preview_roles(plan).items():
        writable = {g for rule in rules if {"create", "patch", "update"} <= set(rule["verbs"]) for g in rule["apiGroups"]}
        assert sorted(applied - {"admissionregistration.k8s.io"} - writable) == [], cluster
