"""PreviewAccess: previews run as an identity the API server keeps to dry runs, on every cluster, reading and dry-running
the kinds the program applies but Secrets."""

from __future__ import annotations

import json

import pytest

from fabctl.check.picture import plural

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


def applied_resources(plan, crd_dir) -> set[tuple[str, str]]:
    """(API group, resource) of every kind the plan applies, the resource as its CRD names it (upstream CRD files are
    named `<plural>.<group>.yaml`), else as Kubernetes derives it."""
    index = json.loads((crd_dir / "index.json").read_text())
    crds = {(key.split("/")[0], key.rpartition("/")[2]): path.rpartition("/")[2].split(".")[0]
            for key, path in index.items() if key != "sources" and key.count("/") == 2}
    out = set()
    for _, obj, _ in plan.manifests():
        group = obj["apiVersion"].rpartition("/")[0]
        out.add((group, crds.get((group, obj["kind"]), plural(obj["kind"]))))
    return out


def granted(rules: list[dict], verbs: set[str], wanted: set[tuple[str, str]]) -> set[tuple[str, str]]:
    """Those of `wanted` (group, resource) on which the rules grant every one of `verbs` (`*` matching anything)."""
    def allows(rule, verb, group, resource):
        return ({verb, "*"} & set(rule["verbs"]) and {group, "*"} & set(rule["apiGroups"])
                and {resource, "*"} & set(rule["resources"]))
    return {(g, r) for g, r in wanted if all(any(allows(rule, v, g, r) for rule in rules) for v in verbs)}


@pytest.fixture(params=["plan_a", "plan_b", "full_plan"])
def each_plan(request):
    """Both stacks' renders and the small site with every optional part (which applies kinds the stacks do not)."""
    return request.getfixturevalue(request.param)


def test_the_preview_identity_may_read_and_dry_run_every_kind_the_program_applies_but_secrets(each_plan, crd_dir):
    applied = applied_resources(each_plan, crd_dir)
    assert ("", "secrets") in applied and ("apps", "deployments") in applied and preview_roles(each_plan)
    for cluster, rules in preview_roles(each_plan).items():
        readable = applied - {("", "secrets")}
        assert sorted(readable - granted(rules, {"get", "list", "watch"}, readable)) == [], cluster
        writable = {(g, r) for g, r in readable if g != "admissionregistration.k8s.io"}
        assert sorted(writable - granted(rules, {"create", "patch", "update"}, writable)) == [], cluster


def test_the_preview_role_names_each_resource_it_may_use_no_wildcard_subresource_or_secret(small_plan):
    """`*` would take in Secrets and every subresource (nodes/proxy, serviceaccounts/token, pods/exec): the role names
    each resource it reads or dry-runs."""
    for rules in preview_roles(small_plan).values():
        named = [(g, r) for rule in rules for g in rule["apiGroups"] for r in rule["resources"]]
        assert [(g, r) for g, r in named if "*" in (g + r) or "/" in r or r == "secrets"] == []
