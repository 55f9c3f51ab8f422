"""Attacks on Kueue, priorities and the maintenance principal, from a team member's seat (and Airflow's, and the MultiKueue
manager's credential on a worker), against both stacks' rendered objects (issue 37: path 3, "Kueue and serving priority
can be bypassed"; the medium findings on `iceberg-maintenance` and the MultiKueue worker identity).

The seats: a member of a team (RBAC group `<prefix>team-<team>` in the team's namespaces: the `fab-team-member` role
creates Jobs, CronJobs and the runtimes' kinds); any Airflow task (every Airflow ServiceAccount, `system:serviceaccounts:
airflow`, may submit SparkApplications in `iceberg-maintenance`); whoever holds the MultiKueue kubeconfig of a worker
(the manager's Secret in `kueue-system`). Verdicts come from the CEL engine (tests/admission.py) on the plan's own
ValidatingAdmissionPolicies, from Kueue's rendered Configuration, and from the rendered RBAC.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml
from admission import Decision, Request, admit, policies_in
from admission_cases import (
    DENIED_POD_CHANGE,
    DENIED_PRIORITY,
    DENIED_SUBMITTER,
    DENIED_TOLERATION,
    application_request,
    changed,
    denied_field,
    driver_pod,
    pod_patch,
    pod_spec,
    submitted,
    team_request,
    workload,
)

TEAM_MEMBER = "yield-alice@fab.internal"
TEAM_WORKLOADS_POLICY = "fab-team-workloads"
MAINTENANCE_POLICY = "fab-iceberg-maintenance-applications"
POOL_LABEL = "fab.internal/gpu-pool"


def by_cluster(plan) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for cluster, obj, _ in plan.manifests():
        out.setdefault(cluster, []).append(obj)
    return out


def kueue_configs(plan) -> dict[str, dict[str, Any]]:
    """cluster -> Kueue's Configuration there."""
    return {plan.cluster(r): yaml.safe_load(r["inputs"]["values"]["managerConfig"]["controllerManagerConfigYaml"])
            for r in plan.of_type("kubernetes:helm.sh/v3:Release") if r["inputs"]["chart"].endswith("/kueue")}


def team_namespaces(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The namespaces where team members' rights are bound (their `team-members` RoleBinding)."""
    bound = {b["metadata"]["namespace"] for b in objects if b["kind"] == "RoleBinding" and b["metadata"]["name"] == "team-members"}
    return [o for o in objects if o["kind"] == "Namespace" and o["metadata"]["name"] in bound]


def selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    """A LabelSelector (matchLabels and matchExpressions) on `labels`."""
    ops = {"In": lambda k, v: labels.get(k) in v, "NotIn": lambda k, v: labels.get(k) not in v,
           "Exists": lambda k, v: k in labels, "DoesNotExist": lambda k, v: k not in labels}
    return (all(labels.get(k) == v for k, v in selector.get("matchLabels", {}).items())
            and all(ops[e["operator"]](e["key"], e.get("values", [])) for e in selector.get("matchExpressions", [])))


def verdicts(plan, build) -> dict[tuple[str, str], Decision]:
    """(cluster, team namespace) -> the team workloads policy's decision on `build(namespace)` there, on every Kueue cluster."""
    out = {}
    for cluster, objects in by_cluster(plan).items():
        if cluster not in kueue_configs(plan):
            continue
        found = policies_in(objects).get(TEAM_WORKLOADS_POLICY)
        for ns in team_namespaces(objects):
            if found is None:  # nothing refuses it
                out[cluster, ns["metadata"]["name"]] = Decision(allowed=True, matched=False)
                continue
            policy, (binding,) = found
            out[cluster, ns["metadata"]["name"]] = admit(policy, binding, build(ns))
    assert out
    return out


def pod_of(spec: dict[str, Any], kind: str = "Pod"):
    def build(ns: dict[str, Any]) -> Request:
        obj = workload(kind, spec)
        obj["metadata"]["namespace"] = ns["metadata"]["name"]
        return team_request(obj, namespace_object=ns)
    return build


# Path 3: Kueue and serving priority -----------------------------------------------------------------------------------

def test_a_team_cannot_run_a_job_that_names_no_queue(plan):
    """A Job without `kueue.x-k8s.io/queue-name` in a team namespace is Kueue's all the same: suspended, never admitted."""
    configs = kueue_configs(plan)
    assert configs
    for cluster, objects in by_cluster(plan).items():
        if cluster not in configs:
            continue
        config = configs[cluster]
        for ns in team_namespaces(objects):
            assert selects(config["managedJobsNamespaceSelector"], ns["metadata"].get("labels", {})), ns["metadata"]["name"]
        assert config["manageJobsWithoutQueueName"] is True, cluster


def test_a_team_cannot_name_the_serving_priority_class(plan):
    assert {key: (d.allowed, d.message) for key, d in verdicts(plan, pod_of(pod_spec("fab-serving"))).items()} == {
        key: (False, DENIED_PRIORITY) for key in verdicts(plan, pod_of(pod_spec()))}


@pytest.mark.parametrize("priority", ["system-cluster-critical", "system-node-critical"])
def test_a_team_cannot_name_a_system_priority_class(plan, priority):
    assert {key: (d.allowed, d.message) for key, d in verdicts(plan, pod_of(pod_spec(priority))).items()} == {
        key: (False, DENIED_PRIORITY) for key in verdicts(plan, pod_of(pod_spec()))}


def test_a_team_cannot_hide_the_serving_priority_in_a_jobs_template(plan):
    assert {key: (d.allowed, d.message) for key, d in verdicts(plan, pod_of(pod_spec("fab-serving"), "Job")).items()} == {
        key: (False, DENIED_PRIORITY) for key in verdicts(plan, pod_of(pod_spec()))}


def test_a_team_cannot_start_a_pod_at_a_reserved_priority_even_without_the_policy(plan):
    """Kubernetes' own guard beside the policy: a quota of zero pods at serving's and the system classes in every team
    namespace (the Priority admission plugin lets any namespace name them)."""
    reserved = {"fab-serving", "system-cluster-critical", "system-node-critical"}
    for cluster, objects in by_cluster(plan).items():
        if cluster not in kueue_configs(plan):
            continue
        quotas = {q["metadata"]["namespace"]: q["spec"] for q in objects if q["kind"] == "ResourceQuota"
                  if any(e["scopeName"] == "PriorityClass" for e in q["spec"].get("scopeSelector", {}).get("matchExpressions", []))}
        for ns in team_namespaces(objects):
            spec = quotas.get(ns["metadata"]["name"])
            assert spec is not None and spec["hard"] == {"pods": "0"}, (cluster, ns["metadata"]["name"])
            (scope,) = spec["scopeSelector"]["matchExpressions"]
            assert scope["operator"] == "In" and set(scope["values"]) == reserved


def test_a_team_cannot_tolerate_the_inference_taint(plan):
    inference = {"key": POOL_LABEL, "operator": "Equal", "value": "inference", "effect": "NoSchedule"}
    assert {key: (d.allowed, d.message) for key, d in verdicts(plan, pod_of(pod_spec(tolerations=[inference]))).items()} == {
        key: (False, DENIED_TOLERATION) for key in verdicts(plan, pod_of(pod_spec()))}


def test_a_team_cannot_tolerate_every_taint(plan):
    assert {key: (d.allowed, d.message) for key, d in verdicts(plan, pod_of(pod_spec(tolerations=[{"operator": "Exists"}]))).items()} == {
        key: (False, DENIED_TOLERATION) for key in verdicts(plan, pod_of(pod_spec()))}


def test_a_teams_training_pod_still_runs(plan):
    assert {key: d.allowed for key, d in verdicts(plan, pod_of(pod_spec())).items()} == {
        key: True for key in verdicts(plan, pod_of(pod_spec()))}


# The MultiKueue worker identity -----------------------------------------------------------------------------------------

def rbac_allows(objects: list[dict[str, Any]], subject: tuple[str, str, str], verb: str, group: str, resource: str,
                namespace: str) -> list[str]:
    """The bindings on a cluster through which the ServiceAccount `subject` (kind, name, namespace) may `verb` `resource`
    in `namespace` (ClusterRoleBindings grant in every namespace)."""
    roles = {(o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"]): o.get("rules") or []
             for o in objects if o["kind"] in ("ClusterRole", "Role")}
    through = []
    for b in objects:
        if b["kind"] not in ("RoleBinding", "ClusterRoleBinding"):
            continue
        if b["kind"] == "RoleBinding" and b["metadata"]["namespace"] != namespace:
            continue
        if not any((s["kind"], s["name"], s.get("namespace")) == subject for s in b.get("subjects") or []):
            continue
        ref = b["roleRef"]
        rules = roles.get((ref["kind"], b["metadata"].get("namespace", "") if ref["kind"] == "Role" else "", ref["name"]), [])
        if any(({"*", group} & set(r.get("apiGroups", []))) and ({"*", resource} & set(r.get("resources", [])))
               and ({"*", verb} & set(r.get("verbs", []))) for r in rules):
            through.append(f"{b['kind']} {b['metadata']['name']}")
    return through


MULTIKUEUE = ("ServiceAccount", "multikueue", "fab-access")


def workers(plan) -> dict[str, list[dict[str, Any]]]:
    """The clusters where the MultiKueue manager's ServiceAccount exists, with their objects."""
    return {c: objects for c, objects in by_cluster(plan).items()
            if any(o["kind"] == "ServiceAccount" and (o["kind"], o["metadata"]["name"], o["metadata"]["namespace"]) == MULTIKUEUE
                   for o in objects)}


@pytest.mark.parametrize("stack_plan", ["plan_a", "full_plan"])
def test_the_multikueue_identity_cannot_create_pods_in_the_gpu_operator_namespace(stack_plan, request):
    found = workers(request.getfixturevalue(stack_plan))
    assert found
    assert {c: rbac_allows(objects, MULTIKUEUE, "create", "", "pods", "gpu-operator") for c, objects in found.items()} == {
        c: [] for c in found}


@pytest.mark.parametrize("stack_plan", ["plan_a", "full_plan"])
def test_the_multikueue_identity_still_creates_jobs_in_every_namespace_with_a_queue(stack_plan, request):
    for cluster, objects in workers(request.getfixturevalue(stack_plan)).items():
        queued = sorted({q["metadata"]["namespace"] for q in objects if q["kind"] == "LocalQueue"})
        assert queued
        assert [ns for ns in queued if not rbac_allows(objects, MULTIKUEUE, "create", "batch", "jobs", ns)] == [], cluster


# Airflow's seat: the maintenance principal ---------------------------------------------------------------------------

def maintenance(plan) -> tuple[list[dict[str, Any]], dict[str, Any], tuple[dict, list[dict]] | None]:
    """Compute's objects, one application the DAG submits, and the maintenance policy with its bindings (or None)."""
    (compute,) = [objects for objects in by_cluster(plan).values()
                  if any(o["kind"] == "ConfigMap" and o["metadata"]["name"] == "platform-dags" for o in objects)]
    (dags,) = [o for o in compute if o["kind"] == "ConfigMap" and o["metadata"]["name"] == "platform-dags"]
    apps = json.loads(dags["data"]["platform.json"])["iceberg_maintenance"]["applications"]
    return compute, submitted(next(iter(apps.values()))), policies_in(compute).get(MAINTENANCE_POLICY)


def airflow_decision(plan, request_of) -> tuple[bool, str]:
    compute, app, found = maintenance(plan)
    # Airflow's seat: every Airflow ServiceAccount is in the group the submitter RoleBinding names.
    granted = [b for b in compute if b["kind"] == "RoleBinding" and b["metadata"]["namespace"] == "iceberg-maintenance"
               and {"kind": "Group", "name": "system:serviceaccounts:airflow", "apiGroup": "rbac.authorization.k8s.io"} in b["subjects"]]
    assert granted, "Airflow may not submit there at all"
    if found is None:
        return True, ""
    policy, (binding,) = found
    decision = admit(policy, binding, request_of(app))
    return decision.allowed, decision.message


def test_airflow_cannot_run_its_own_job_file_as_the_maintenance_principal(plan):
    assert airflow_decision(plan, lambda app: application_request(changed(app, "mainApplicationFile", "s3a://scratch/steal.py"))) == (
        False, denied_field("spec.mainApplicationFile"))


def test_airflow_cannot_run_its_own_image_as_the_maintenance_principal(plan):
    assert airflow_decision(plan, lambda app: application_request(changed(app, "image", "registry.example/evil:1"))) == (
        False, denied_field("spec.image"))


def test_airflow_cannot_expire_every_snapshot_with_the_platforms_job(plan):
    def zero_retention(app):
        arguments = app["spec"]["arguments"]
        settings = {**json.loads(arguments[-1]), "snapshot_retention_days": 0, "min_snapshots_kept": 1}
        return application_request(changed(app, "arguments", [*arguments[:-1], json.dumps(settings)]))
    assert airflow_decision(plan, zero_retention) == (False, denied_field("spec.arguments"))


def test_airflow_cannot_patch_the_maintenance_drivers_image(plan):
    def patch(app):
        return pod_patch(driver_pod(app["spec"]["image"]), driver_pod("registry.example/evil:1"))
    assert airflow_decision(plan, patch) == (False, DENIED_POD_CHANGE)


def test_airflow_still_submits_the_platforms_maintenance_application(plan):
    assert airflow_decision(plan, application_request)[0] is True


def test_a_team_member_cannot_submit_the_maintenance_application(plan):
    assert airflow_decision(plan, lambda app: application_request(app, username=TEAM_MEMBER)) == (
        False, DENIED_SUBMITTER)
