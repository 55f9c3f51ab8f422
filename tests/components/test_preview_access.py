"""PreviewAccess: previews run as an identity the API server keeps to dry runs, on every cluster."""

from __future__ import annotations

from components.access import DRY_RUN_ONLY, PREVIEW_USER, PREVIEW_WRITE_GROUPS, preview_rules


def test_every_cluster_keeps_the_preview_identity_to_dry_runs(plan):
    clusters = {r["name"] for r in plan.of_type("pulumi:providers:kubernetes")}
    policies = {c: o for c, o, _ in plan.manifests() if o["kind"] == "ValidatingAdmissionPolicy" and o["metadata"]["name"] == DRY_RUN_ONLY}
    bindings = {c for c, o, _ in plan.manifests() if o["kind"] == "ValidatingAdmissionPolicyBinding" and o["spec"]["validationActions"] == ["Deny"]}
    assert clusters and set(policies) == clusters == bindings
    spec = next(iter(policies.values()))["spec"]
    assert spec["matchConditions"] == [{"name": "preview-identity", "expression": f"request.userInfo.username == '{PREVIEW_USER}'"}]
    assert [v["expression"] for v in spec["validations"]] == ["request.dryRun == true"]


def test_the_preview_identity_cannot_write_the_admission_policies():
    writable = {g for rule in preview_rules() if set(rule["verbs"]) & {"create", "patch", "update", "delete"} for g in rule["apiGroups"]}
    assert "admissionregistration.k8s.io" not in writable and "*" not in writable


def test_the_preview_identity_may_dry_run_every_group_the_program_applies(plan):
    applied = {o["apiVersion"].rpartition("/")[0] for _, o, _ in plan.manifests()}
    assert applied - {"admissionregistration.k8s.io"} <= set(PREVIEW_WRITE_GROUPS)
