"""`fabctl access`: resolving a seat, the RBAC area's escalation closure, the CI area's reading of workflows, and the
command on both stacks (issue 37 item 2)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from helpers import fabctl_in_process, site_raw

from fabctl.access import ci, rbac
from fabctl.access.model import Principal
from fabctl.access.principal import SeatError, resolve
from fabctl.render import K8S_PROVIDER_TYPE, Plan

# Resolution -----------------------------------------------------------------------------------------------------


def test_a_team_seat_holds_its_group_namespaces_and_keys(small_plan):
    seat = resolve(small_plan, "team:yield")
    assert seat.rbac_subjects == (("Group", "system:authenticated"), ("Group", "oidc:team-yield"))
    # its team namespaces where jobs run, and compute's Spark Connect namespace of the team, where its sessions' code runs
    assert seat.pod_namespaces == {"site-t-compute": ("spark-team-yield",), "site-t-gpu": ("team-yield",)}
    assert "system:serviceaccount:team-yield:default" in seat.service_accounts["site-t-gpu"]
    assert (seat.minio_users, seat.polaris_principals) == (("fab-training-yield",), ("fab-training-yield",))


def test_a_vendor_seat_holds_its_keys_and_ranges_and_no_cluster_identity(plan_a):
    seat = resolve(plan_a, "vendor:etch-tools")
    assert (seat.minio_users, seat.polaris_principals) == (("fab-vendor-etch-tools",), ("fab-vendor-etch-tools",))
    assert seat.source_cidrs == tuple(site_raw("site-a")["storage"]["vendors"]["etch-tools"]["source_cidrs"])
    assert (seat.rbac_subjects, seat.service_accounts) == ((), {})


def test_a_user_in_a_team_group_holds_what_the_team_holds(small_plan):
    seat = resolve(small_plan, "user:ana@team-yield")
    team = resolve(small_plan, "team:yield")
    assert (seat.pod_namespaces, seat.minio_users) == (team.pod_namespaces, team.minio_users)
    assert ("User", "ana") in seat.rbac_subjects


def test_a_user_in_no_group_is_only_authenticated(small_plan):
    seat = resolve(small_plan, "user:ana")
    assert (seat.rbac_subjects, seat.pod_namespaces, seat.minio_users) == ((("Group", "system:authenticated"), ("User", "ana")), {}, ())


def test_fails_when_the_team_is_unknown(small_plan):
    with pytest.raises(SeatError) as info:
        resolve(small_plan, "team:litho")
    assert str(info.value) == "--as team:litho: site-t has no team 'litho'; teams: yield"


def test_fails_when_the_vendor_is_unknown(small_plan):
    with pytest.raises(SeatError) as info:
        resolve(small_plan, "vendor:acme")
    assert str(info.value) == "--as vendor:acme: site-t has no vendor 'acme'; vendors: none (storage.vendors is empty)"


def test_fails_when_a_user_names_a_group_the_site_has_not(small_plan):
    with pytest.raises(SeatError) as info:
        resolve(small_plan, "user:ana@team-litho,platform-users")
    assert str(info.value) == ("--as user:ana@team-litho,platform-users: site-t has no Keycloak group 'team-litho'; "
                               "groups: team-yield, platform-users, platform-admins")


def test_fails_when_the_seat_has_no_known_form(small_plan):
    with pytest.raises(SeatError) as info:
        resolve(small_plan, "admin")
    assert str(info.value) == "--as 'admin': not a seat; use one of team:T, vendor:V, user:NAME, user:NAME@GROUP[,GROUP...], pr-author"


# RBAC on hand-built plans ---------------------------------------------------------------------------------------


def _plan(*objects: dict[str, Any], cluster: str = "c") -> Plan:
    provider = {"urn": "urn:provider", "type": K8S_PROVIDER_TYPE, "name": cluster, "custom": True, "inputs": {}}
    return Plan("s", [provider, *({"urn": f"urn:{i}", "type": f"kubernetes:x:{o['kind']}", "name": str(i), "custom": True,
                                    "provider": "urn:provider", "inputs": o} for i, o in enumerate(objects))])


def _obj(kind: str, name: str, ns: str | None = None, **body: Any) -> dict[str, Any]:
    meta = {"name": name, **({"namespace": ns} if ns else {})}
    return {"apiVersion": "v1", "kind": kind, "metadata": meta, **body}


def _role(name: str, ns: str | None, *rules: tuple[list[str], list[str], list[str]]) -> dict[str, Any]:
    return _obj("Role" if ns else "ClusterRole", name, ns, rules=[{"apiGroups": g, "resources": r, "verbs": v} for g, r, v in rules])


def _binding(name: str, ns: str | None, role: tuple[str, str], *subjects: dict[str, str]) -> dict[str, Any]:
    return _obj("RoleBinding" if ns else "ClusterRoleBinding", name, ns, roleRef={"apiGroup": "rbac.authorization.k8s.io",
                "kind": role[0], "name": role[1]}, subjects=list(subjects))


GROUP = {"kind": "Group", "name": "oidc:team-a"}
SEAT = Principal("team", "a", rbac_subjects=(("Group", "oidc:team-a"),))


def test_a_job_creator_reaches_a_service_account_of_its_namespace_that_reads_secrets():
    plan = _plan(
        _role("runner", "a", (["batch"], ["jobs"], ["create"])), _binding("members", "a", ("Role", "runner"), GROUP),
        _obj("ServiceAccount", "sync", "a"),
        _role("reader", "b", ([""], ["secrets"], ["get"])),
        _binding("sync", "b", ("Role", "reader"), {"kind": "ServiceAccount", "name": "sync", "namespace": "a"}),
        _obj("Secret", "db", "b"),
    )
    found = rbac.accesses(plan, SEAT)
    assert [(a.scope, a.via, a.escalation) for a in found] == [
        ("a", "RoleBinding a/members -> Role runner", ("runs pods (batch/jobs) in a: mounts its Secrets (none rendered) and runs as "
                                                       "its ServiceAccounts (default, sync)")),
        ("b", "as system:serviceaccount:a:sync (runs a pod in a): RoleBinding b/sync -> Role reader",
         "reads Secrets in b (every Secret, new ones too)"),
    ]


def test_a_secret_reader_becomes_the_service_account_whose_token_it_reads():
    plan = _plan(
        _role("reader", None, ([""], ["secrets"], ["list"])), _binding("members", None, ("ClusterRole", "reader"), GROUP),
        _obj("Secret", "robot-token", "ops", type="kubernetes.io/service-account-token",
             metadata={"name": "robot-token", "namespace": "ops", "annotations": {"kubernetes.io/service-account.name": "robot"}}),
        _role("nodes", None, ([""], ["nodes/proxy"], ["get"])),
        _binding("robot", None, ("ClusterRole", "nodes"), {"kind": "ServiceAccount", "name": "robot", "namespace": "ops"}),
    )
    found = rbac.accesses(plan, SEAT)
    assert found[0].escalation == "reads Secrets in every namespace (every Secret, new ones too): ServiceAccount tokens ops/robot-token"
    assert found[1].via == "as system:serviceaccount:ops:robot (reads the token Secret ops/robot-token): ClusterRoleBinding robot -> ClusterRole nodes"
    assert found[1].escalation.startswith("reaches the kubelets' API (nodes/proxy)")


@pytest.mark.parametrize(("rule", "marked"), [
    ((["rbac.authorization.k8s.io"], ["clusterroles"], ["bind"]), "bind on roles in a: binds any role, whatever it holds"),
    ((["rbac.authorization.k8s.io"], ["roles"], ["escalate"]), "escalate on roles in a: writes roles with rights it does not hold"),
    (([""], ["serviceaccounts"], ["impersonate"]), "impersonates serviceaccounts in a"),
    (([""], ["serviceaccounts/token"], ["create"]), "mints tokens of the ServiceAccounts of a (serviceaccounts/token create)"),
    (([""], ["pods/exec"], ["create"]), "enters running pods of a (pods/exec): their ServiceAccounts and mounted Secrets"),
    ((["apps"], ["*"], ["get"]), "wildcard: get: apps/* (every such right, those added later too)"),
])
def test_an_escalating_grant_is_marked(rule, marked):
    plan = _plan(_role("r", "a", rule), _binding("members", "a", ("Role", "r"), GROUP))
    assert rbac.accesses(plan, SEAT)[0].escalation == marked


def test_an_identity_kept_to_dry_runs_runs_no_pod():
    user = "system:serviceaccount:p:preview"
    policy = {"failurePolicy": "Fail", "validations": [{"expression": "request.dryRun == true"}],
              "matchConditions": [{"name": "who", "expression": f"request.userInfo.username == '{user}'"}],
              "matchConstraints": {"resourceRules": [{"apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*"],
                                                      "operations": ["CREATE", "UPDATE", "DELETE", "CONNECT"]}]}}
    plan = _plan(
        _role("writer", None, ([""], ["pods", "pods/exec"], ["create"])),
        _binding("preview", None, ("ClusterRole", "writer"), {"kind": "ServiceAccount", "name": "preview", "namespace": "p"}),
        _obj("ValidatingAdmissionPolicy", "dry", spec=policy),
        _obj("ValidatingAdmissionPolicyBinding", "dry", spec={"policyName": "dry", "validationActions": ["Deny"]}),
    )
    found = rbac.accesses(plan, Principal("pr-author", "pr-author", service_accounts={"c": (user,)}))
    assert [a.escalation for a in found] == ["writes pods in dry runs only (ValidatingAdmissionPolicy dry): runs no pod"]


def test_a_binding_to_the_service_accounts_group_reaches_every_account_of_the_namespace():
    plan = _plan(
        _role("runner", "a", ([""], ["pods"], ["create"])), _binding("members", "a", ("Role", "runner"), GROUP),
        _role("submit", "b", (["batch"], ["jobs"], ["get"])),
        _binding("all-of-a", "b", ("Role", "submit"), {"kind": "Group", "name": "system:serviceaccounts:a"}),
    )
    assert [a.via for a in rbac.accesses(plan, SEAT)][1] == "as system:serviceaccount:a:default (runs a pod in a): RoleBinding b/all-of-a -> Role submit"


def test_an_aggregated_cluster_role_holds_the_rules_it_selects():
    aggregate = _obj("ClusterRole", "all", aggregationRule={"clusterRoleSelectors": [{"matchLabels": {"fab/agg": "true"}}]}, rules=[])
    part = _role("part", None, ([""], ["secrets"], ["get"]))
    part["metadata"]["labels"] = {"fab/agg": "true"}
    plan = _plan(aggregate, part, _binding("members", "a", ("ClusterRole", "all"), GROUP))
    assert rbac.accesses(plan, SEAT)[0].allowed == "get: secrets"


def test_a_binding_to_a_role_not_in_the_plan_is_marked_unknown():
    plan = _plan(_binding("members", "a", ("ClusterRole", "chart-role"), GROUP))
    found = rbac.accesses(plan, SEAT)[0]
    assert (found.allowed, found.escalation) == ("(role not in the plan)", "unknown: a role a chart or the cluster defines")


# CI ---------------------------------------------------------------------------------------------------------------

PR_WORKFLOW = """
on:
  pull_request:
permissions:
  contents: read
jobs:
  preview:
    runs-on: [self-hosted, fab]
    environment: preview
    permissions:
      pull-requests: write
    steps:
      - run: make preview
        env:
          TOKEN: ${{ secrets.PULUMI_TOKEN }}
          KUBECONFIG: ${{ vars['KUBE'] }}
  test:
    runs-on: ubuntu-24.04
    steps:
      - run: make test
"""


def test_a_pull_request_job_lists_its_secrets_variables_permissions_and_environment():
    preview = ci.job_access(ci.pr_jobs({"pr.yml": PR_WORKFLOW})[0])
    assert (preview.scope, preview.allowed, preview.via) == (
        "pr.yml:preview", "token pull-requests:write; secrets PULUMI_TOKEN; vars KUBE", "pr.yml on pull_request; environment preview")
    assert preview.escalation == ("the PR's code runs with its secrets (once environment preview is approved); the PR's code holds a "
                                  "token that writes pull-requests; the PR's code runs on a self-hosted runner (self-hosted, fab)")


def test_a_job_without_permissions_takes_its_workflows():
    test = ci.job_access(ci.pr_jobs({"pr.yml": PR_WORKFLOW})[1])
    assert (test.allowed, test.escalation) == ("token contents:read", "")


def test_a_workflow_without_permissions_leaves_the_repository_default():
    job = ci.pr_jobs({"pr.yml": "on: [push, pull_request]\njobs:\n  t:\n    runs-on: x\n    steps: [{run: make}]\n"})[0]
    assert (job.events, job.permissions) == (("pull_request",), "repository default")


def test_a_push_workflow_gives_a_pull_request_nothing():
    assert ci.pr_jobs({"deploy.yml": "on: push\njobs:\n  up:\n    runs-on: x\n    steps: [{run: 'echo ${{ secrets.X }}'}]\n"}) == []


def test_pull_request_target_runs_the_prs_code_only_where_it_checks_out_its_head():
    base = "on: pull_request_target\njobs:\n  j:\n    runs-on: x\n    steps:\n      - uses: actions/checkout@v4\n"
    head = base + "        with:\n          ref: ${{ github.event.pull_request.head.sha }}\n"
    assert [job.runs_pr_code for text in (base, head) for job in ci.pr_jobs({"w.yml": text})] == [False, True]


def test_fails_when_a_workflow_is_not_a_mapping():
    with pytest.raises(ci.WorkflowError) as info:
        ci.pr_jobs({"w.yml": "- a\n- b\n"})
    assert str(info.value) == "w.yml: a workflow is a mapping (got list)"


def test_the_repositorys_workflows_are_read():
    jobs = ci.pr_jobs(ci.workflow_texts())
    assert jobs and all(job.events for job in jobs)


# The command ---------------------------------------------------------------------------------------------------

WIDE = {"COLUMNS": "400"}


def test_access_prints_a_teams_matrix(plan_a):
    run = fabctl_in_process("access", "--stack", "site-a", "--as", "team:yield", env=WIDE)
    assert run.returncode == 0
    assert "site-a: what team:yield can do" in run.stdout
    assert "RoleBinding team-yield/team-members -> ClusterRole fab-team-member" in run.stdout
    assert "runs pods (" in run.stdout
    assert "Not seen: the RBAC objects Helm charts install" in run.stdout


def test_access_prints_a_vendors_matrix(plan_a):
    run = fabctl_in_process("access", "--stack", "site-a", "--as", "vendor:etch-tools", env=WIDE)
    assert run.returncode == 0
    assert "MinIO users: fab-vendor-etch-tools" in run.stdout
    assert "connects from: " in run.stdout


def test_access_prints_a_pr_authors_matrix(plan_b):
    run = fabctl_in_process("access", "--stack", "site-b", "--as", "pr-author", env=WIDE)
    assert run.returncode == 0
    assert "pull-request.yml:test" in run.stdout


def test_access_answers_in_json(plan_b):
    run = fabctl_in_process("access", "--stack", "site-b", "--as", "team:yield", "--format", "json")
    answer = json.loads(run.stdout)
    assert run.returncode == 0
    assert answer["principal"]["name"] == "yield"
    assert {a["area"] for a in answer["accesses"]} == {"rbac", "network", "s3", "catalog", "gateway"}


def test_fails_when_the_seat_names_no_team_of_the_stack(plan_a):
    run = fabctl_in_process("access", "--stack", "site-a", "--as", "team:nobody")
    teams = ", ".join(sorted(site_raw("site-a")["teams"]))
    assert (run.returncode, run.stderr.splitlines()[-1]) == (2, f"error: --as team:nobody: site-a has no team 'nobody'; teams: {teams}")


def test_fails_when_the_seat_has_no_form_before_rendering():
    run = fabctl_in_process("access", "--stack", "site-a", "--as", "root")
    assert (run.returncode, run.stdout) == (2, "")
    assert run.stderr == "error: --as 'root': not a seat; use one of team:T, vendor:V, user:NAME, user:NAME@GROUP[,GROUP...], pr-author\n"


def test_every_area_has_its_evaluator():
    from fabctl.access.matrix import AREA_MODULES
    from fabctl.access.model import AREAS

    assert sorted(module.__name__.rsplit(".", 1)[-1] for module in AREA_MODULES) == sorted(AREAS)
