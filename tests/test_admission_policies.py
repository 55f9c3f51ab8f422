"""Every ValidatingAdmissionPolicy the program applies, evaluated by a real CEL engine on the requests it must refuse and
those it must allow, from a hostile tenant's seat (tests/admission.py, tests/admission_cases.py). The policies a Helm
release installs are evaluated in tests/test_helm_releases.py."""

from __future__ import annotations

import json

import pytest
from admission import NotCovered, Request, admit, policies_in
from admission_cases import PREVIEW_CASES, PREVIEW_GROUPS, RAY_CASES, TEAM_WORKLOAD_CASES, Case, maintenance_cases

from components import iceberg_maintenance
from components.access import DRY_RUN_ONLY, PREVIEW_USER, preview_rules
from components.config import IcebergMaintenanceConfig
from components.engines.spark import spark_application_template
from components.kueue import DENIED_PRIORITY, DENIED_TOLERATION, TEAM_WORKLOADS_POLICY  # the policy's own words
from components.ray import TOKEN_AUTH_POLICY

STAND_IN_MAINTENANCE = iceberg_maintenance.applications(IcebergMaintenanceConfig(targets=[{"namespace": "fdc"}]),
                                                        spark_application_template("https://polaris.site-t.fab.internal/api/catalog"))
ENGINE_CASES: dict[str, list[Case]] = {DRY_RUN_ONLY: PREVIEW_CASES, TOKEN_AUTH_POLICY: RAY_CASES,
                                       TEAM_WORKLOADS_POLICY: TEAM_WORKLOAD_CASES,
                                       iceberg_maintenance.ADMISSION_POLICY: maintenance_cases(next(iter(STAND_IN_MAINTENANCE.values())))}
"""The cases of each policy the program applies itself."""


def shipped(plan) -> dict[str, dict]:
    """cluster/policy -> (policy, bindings) of the plan's own objects."""
    by_cluster: dict[str, list[dict]] = {}
    for cluster, obj, _ in plan.manifests():
        by_cluster.setdefault(cluster, []).append(obj)
    return {f"{c}/{name}": found for c, objects in by_cluster.items() for name, found in policies_in(objects).items()}


def test_every_policy_the_program_applies_has_engine_cases(plan):
    policies = shipped(plan)
    assert policies
    untested = sorted(key for key in policies if key.split("/", 1)[1] not in ENGINE_CASES)
    assert untested == [], "a ValidatingAdmissionPolicy ships without engine cases: add them to tests/admission_cases.py"
    for name, cases in ENGINE_CASES.items():
        assert {c.allowed for c in cases} == {True, False}, f"{name} needs a request it allows and one it refuses"


def test_every_policy_is_bound_once_and_denies(plan):
    assert {key: [b["spec"]["validationActions"] for b in bindings] for key, (_, bindings) in shipped(plan).items()} == {
        key: [["Deny"]] for key in shipped(plan)}


def named(plan, name: str) -> list[tuple[dict, list[dict]]]:
    return [found for key, found in shipped(plan).items() if key.split("/", 1)[1] == name]


@pytest.mark.parametrize("case", PREVIEW_CASES, ids=lambda c: c.name)
def test_the_preview_policy_on(case, small_plan):
    policies = named(small_plan, DRY_RUN_ONLY)
    assert len(policies) == 3  # one per cluster, the same everywhere
    for policy, (binding,) in policies:
        decision = admit(policy, binding, case.request)
        assert (decision.allowed, decision.message) == (case.allowed, case.message)


@pytest.mark.parametrize("case", RAY_CASES, ids=lambda c: c.name)
def test_the_ray_token_policy_on(case, small_plan):
    policies = {key: found for key, found in shipped(small_plan).items() if key.endswith(f"/{TOKEN_AUTH_POLICY}")}
    assert sorted(policies) == [f"site-t-gpu/{TOKEN_AUTH_POLICY}"]  # every cluster KubeRay runs on
    for policy, (binding,) in policies.values():
        decision = admit(policy, binding, case.request)
        assert (decision.allowed, decision.message) == (case.allowed, case.message)


def test_the_policy_cannot_guard_itself_so_the_preview_role_may_not_write_it(small_plan):
    """The API server exempts admission configuration from every policy: an update of the policy by the preview identity
    is not the policy's to refuse, and only its role (no write to admissionregistration.k8s.io) keeps it out."""
    (policy, (binding,)), *_ = named(small_plan, DRY_RUN_ONLY)
    lift = Request(operation="UPDATE", group="admissionregistration.k8s.io", version="v1", resource="validatingadmissionpolicies",
                   kind="ValidatingAdmissionPolicy", name=DRY_RUN_ONLY, username=PREVIEW_USER, groups=PREVIEW_GROUPS,
                   object=policy, old_object=policy)
    assert admit(policy, binding, lift).matched is False
    writes = {g for rule in preview_rules() if set(rule["verbs"]) - {"get", "list", "watch"} for g in rule["apiGroups"]}
    assert "admissionregistration.k8s.io" not in writes and "*" not in writes


def test_the_preview_identity_cannot_leave_the_policy_by_impersonating():
    """The policy selects the request's user: a preview identity that could impersonate another would step out of it."""
    assert [rule for rule in preview_rules() if {"impersonate", "*"} & set(rule["verbs"])] == []


def test_fails_when_a_policy_needs_what_the_engine_lacks(small_plan):
    (policy, (binding,)), *_ = named(small_plan, DRY_RUN_ONLY)
    needs = {**policy, "spec": {**policy["spec"], "validations": [
        {"expression": "authorizer.group('').resource('pods').check('create').allowed()"}]}}
    with pytest.raises(NotCovered) as raised:
        admit(needs, binding, PREVIEW_CASES[0].request)
    assert str(raised.value) == (
        "\"authorizer.group('').resource('pods').check('create').allowed()\" needs allowed, check, group, resource, "
        "authorizer, which the engine here lacks (tests/admission.py)")


@pytest.mark.parametrize("case", TEAM_WORKLOAD_CASES, ids=lambda c: c.name)
def test_the_team_workloads_policy_on(case, full_plan):
    policies = named(full_plan, TEAM_WORKLOADS_POLICY)
    assert len(policies) == 3  # on every Kueue cluster: the MultiKueue manager and both workers
    for policy, (binding,) in policies:
        decision = admit(policy, binding, case.request)
        assert (decision.allowed, decision.message) == (case.allowed, case.message)


def test_the_team_workloads_cases_say_what_the_policy_says():
    assert {c.message for c in TEAM_WORKLOAD_CASES if not c.allowed} == {DENIED_PRIORITY, DENIED_TOLERATION}


def test_the_maintenance_cases_say_what_the_policy_says():
    import admission_cases

    assert (admission_cases.DENIED_SUBMITTER, admission_cases.DENIED_POD_CHANGE, admission_cases.denied_field("spec.image")) == (
        iceberg_maintenance.DENIED_SUBMITTER, iceberg_maintenance.DENIED_POD_CHANGE, iceberg_maintenance.denied_field("spec.image"))


def shipped_maintenance(plan) -> tuple[dict, dict, dict[str, dict]]:
    """The maintenance policy and binding on the plan's compute cluster, and the applications the DAG submits."""
    (policy, (binding,)), = named(plan, iceberg_maintenance.ADMISSION_POLICY)
    (dags,) = [c for c in plan.objects("ConfigMap") if c["metadata"]["name"] == "platform-dags"]
    return policy, binding, json.loads(dags["data"]["platform.json"])["iceberg_maintenance"]["applications"]


def test_the_maintenance_policy_on_every_application_the_dag_submits_and_its_forgeries(plan):
    policy, binding, apps = shipped_maintenance(plan)
    assert apps
    for app in apps.values():
        decisions = {c.name: (admit(policy, binding, c.request).allowed, admit(policy, binding, c.request).message)
                     for c in maintenance_cases(app)}
        assert decisions == {c.name: (c.allowed, c.message) for c in maintenance_cases(app)}


def _probe(match_conditions: list[dict], constraints: dict | None = None) -> tuple[dict, dict]:
    spec = {"failurePolicy": "Fail", "matchConstraints": {"resourceRules": [
        {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]}], **(constraints or {})},
        "matchConditions": match_conditions, "validations": [{"expression": "false", "message": "refused"}]}
    return ({"metadata": {"name": "probe"}, "spec": spec},
            {"metadata": {"name": "probe"}, "spec": {"policyName": "probe", "validationActions": ["Deny"]}})


def _pod_in(labels: dict[str, str]) -> Request:
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-yield", "labels": labels}}
    return Request(operation="CREATE", group="", version="v1", resource="pods", kind="Pod", name="p", namespace="team-yield",
                   username="u", object={"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}}, namespace_object=namespace)


def test_a_match_condition_on_the_namespace_skips_every_request_as_the_api_server_evaluates_it():
    """The API server evaluates match conditions without the namespace object (it is null there): a policy that selects
    team namespaces by a condition on it never applies, which is why fab-team-workloads selects them by namespaceSelector."""
    policy, binding = _probe([{"name": "ns", "expression": "namespaceObject != null"}])
    assert admit(policy, binding, _pod_in({"fab.internal/kueue-managed": "true"})).matched is False


def test_a_namespace_selector_applies_the_policy_in_the_namespaces_it_selects_only():
    policy, binding = _probe([], {"namespaceSelector": {"matchLabels": {"fab.internal/kueue-managed": "true"}}})
    assert (admit(policy, binding, _pod_in({"fab.internal/kueue-managed": "true"})).allowed,
            admit(policy, binding, _pod_in({})).matched) == (False, False)
