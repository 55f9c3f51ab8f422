"""From a pull-request author's seat: issue 37, path 1 (pull-request previews hand the site's secrets to the PR's code)
and the low item "actions are pinned by tag, not SHA".

A pull-request author controls everything the pull request runs: the program, the tests, `.ci/`, the Makefile, and,
in a pull request from a branch of the repository, the copy of the workflow files its `pull_request` run reads. What
they must not reach: a secret of the site, a GitHub token that writes, a runner inside the fab network, and, through
the identity previews run as (`fab-preview`, on every cluster of both stacks), a Secret of a cluster or a credential
that the kubelet (`nodes/proxy`), the token API (`serviceaccounts/token`) or a pod (exec, attach, port-forward) hands
out. Each test makes the author's move against the workflows as written or the stacks' rendered RBAC, and asserts the
refusal.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from typing import Any

import pytest
import yaml

from components.access import PREVIEW_ACCOUNT, PREVIEW_NAMESPACE
from fabctl.render import PROJECT_DIR
from fake_http import serving

WORKFLOWS = {path.name: yaml.safe_load(path.read_text()) for path in sorted((PROJECT_DIR / ".github" / "workflows").glob("*.yml"))}
PULL_REQUEST_EVENTS = {"pull_request", "pull_request_target"}
"""The events whose runs a pull request's author starts (YAML 1.1 reads the key `on` as True)."""


def triggers(workflow: dict[str, Any]) -> set[str]:
    on = workflow[True]
    return {on} if isinstance(on, str) else set(on)


def pull_request_jobs() -> list[tuple[str, str, dict[str, Any]]]:
    """(workflow, job, job) of every job a pull request's event runs."""
    return [(name, key, job) for name, workflow in WORKFLOWS.items() if triggers(workflow) & PULL_REQUEST_EVENTS
            for key, job in workflow["jobs"].items()]


def token_permissions(workflow: dict[str, Any], job: dict[str, Any]) -> Any:
    """The job's GITHUB_TOKEN permissions: its own, else the workflow's, else None (the repository's default, which may
    be write-all)."""
    return job.get("permissions", workflow.get("permissions"))


def test_there_are_jobs_a_pull_request_runs():
    assert [(name, key) for name, key, _ in pull_request_jobs()] == [("pull-request.yml", "test"), ("pull-request.yml", "plan")]


def test_a_pr_author_finds_no_secret_in_any_job_a_pull_request_runs():
    found = [(name, key, ref) for name, key, job in pull_request_jobs()
             for ref in sorted(set(re.findall(r"secrets\.\w+|\benvironment\b", yaml.safe_dump(job))))]
    assert found == []


def test_a_pr_author_holds_a_read_only_token_where_the_pull_requests_code_runs():
    permissions = {(name, key): token_permissions(WORKFLOWS[name], job) for name, key, job in pull_request_jobs()}
    assert {job: granted for job, granted in permissions.items()
            if not isinstance(granted, dict) or set(granted.values()) - {"read", "none"}} == {}


def test_a_pr_author_never_runs_on_a_runner_inside_the_fab_network():
    runners = {(name, key): job["runs-on"] for name, key, job in pull_request_jobs()}
    assert {job: labels for job, labels in runners.items() if "self-hosted" in str(labels)} == {}


COMMENT_ACTIONS = ("actions/download-artifact@", "marocchino/sticky-pull-request-comment@")
"""What a job that writes on pull requests may run: it downloads the comment and posts it, nothing else."""


def test_a_pr_author_cannot_run_code_with_a_token_that_writes():
    """Every job whose token writes runs from main's copy of its workflow (workflow_run), checks out nothing, runs only
    the actions that download and post the comment, and interpolates no value of the event into a shell (a branch name
    or a title is the author's to choose)."""
    writers = [(name, key, job) for name, workflow in WORKFLOWS.items() for key, job in workflow["jobs"].items()
               if "write" in str(token_permissions(workflow, job))]
    assert writers
    for name, key, job in writers:
        assert triggers(WORKFLOWS[name]) == {"workflow_run"}, (name, key)
        assert [s["uses"] for s in job["steps"] if "uses" in s and not s["uses"].startswith(COMMENT_ACTIONS)] == [], (name, key)
        assert [s["run"] for s in job["steps"] if "${{" in s.get("run", "")] == [], (name, key)


SECRET = re.compile(r"secrets\.(\w+)")
CHECK = re.compile(r"python3 \.ci/check_environment\.py (?P<args>.+)")


class UnprotectedEnvironment:
    """The GitHub API of a repository whose environments any branch may deploy from (and that have reviewers)."""

    def handle(self, method: str, path: str, body: dict[str, Any], headers: Any) -> tuple[int, Any]:
        return 200, {"protection_rules": [{"type": "required_reviewers", "reviewers": [{"type": "User"}]}],
                     "deployment_branch_policy": None}


def test_a_pr_author_cannot_reach_a_secret_by_editing_the_workflow(tmp_path):
    """A pull request's run reads its own copy of the workflows, so its author can name any secret there: only secrets
    of environments limited to protected branches stay out of reach. Every job that reads a secret names its environment
    and first runs the environment check, which refuses an environment any branch may use."""
    readers = [(name, key, job) for name, workflow in WORKFLOWS.items() for key, job in workflow["jobs"].items()
               if set(SECRET.findall(yaml.safe_dump(job))) - {"GITHUB_TOKEN"}]
    assert readers
    for name, key, job in readers:
        (args,) = [shlex.split(m["args"]) for s in job["steps"] if (m := CHECK.fullmatch(s.get("run", "").strip()))]
        *flags, environment = args
        assert environment == job["environment"], (name, key)
        checked = "site-a" if environment == "${{ matrix.stack }}" else environment
        with serving(UnprotectedEnvironment()) as url:
            result = subprocess.run([sys.executable, str(PROJECT_DIR / ".ci" / "check_environment.py"), *flags, checked],
                                    env={"GITHUB_API_URL": url, "GITHUB_REPOSITORY": "o/r", "GH_TOKEN": "t", "PATH": "/usr/bin:/bin"},
                                    capture_output=True, text=True)
        assert (result.returncode, result.stderr) == (1, f"refusing to run: environment {checked!r} accepts deployments from any "
                                                         "branch: limit it to protected branches (main)\n"), (name, key)


USES = re.compile(r"^\s*(?:-\s+)?uses:\s*(?P<action>\S+)")


def test_a_pr_author_cannot_change_the_code_an_action_runs_by_moving_its_tag():
    """A tag or branch of an action's repository can be moved to other code (a compromised maintainer, or an author who
    owns that repository); a full commit SHA cannot."""
    actions = [m["action"] for path in (PROJECT_DIR / ".github" / "workflows").glob("*.yml")
               for line in path.read_text().splitlines() if (m := USES.match(line))]
    assert actions
    assert [action for action in actions if not re.fullmatch(r"[\w.-]+/[\w.-]+@[0-9a-f]{40}", action)] == []


# The preview identity, as the clusters' RBAC would evaluate its requests.

PREVIEW_SUBJECTS = {("ServiceAccount", PREVIEW_NAMESPACE, PREVIEW_ACCOUNT), ("Group", "", "system:serviceaccounts"),
                    ("Group", "", f"system:serviceaccounts:{PREVIEW_NAMESPACE}"), ("Group", "", "system:authenticated")}
"""The subjects a request of the `fab-preview` ServiceAccount's token matches."""


def preview_rules(plan) -> dict[str, list[dict[str, Any]]]:
    """cluster -> the policy rules of every Role and ClusterRole the plan binds to the preview identity there."""
    roles: dict[tuple[str, str, str, str], list[dict[str, Any]]] = {}
    bindings = []
    for cluster, obj, _ in plan.manifests():
        meta = obj["metadata"]
        if obj["kind"] in ("ClusterRole", "Role"):
            roles[(cluster, obj["kind"], meta.get("namespace", ""), meta["name"])] = obj.get("rules") or []
        elif obj["kind"] in ("ClusterRoleBinding", "RoleBinding"):
            bindings.append((cluster, obj))
    out: dict[str, list[dict[str, Any]]] = {}
    for cluster, binding in bindings:
        subjects = {(s["kind"], s.get("namespace", ""), s["name"]) for s in binding.get("subjects") or []}
        if subjects & PREVIEW_SUBJECTS:
            ref = binding["roleRef"]
            namespace = binding["metadata"].get("namespace", "") if ref["kind"] == "Role" else ""
            out.setdefault(cluster, []).extend(roles.get((cluster, ref["kind"], namespace, ref["name"]), []))
    return out


def allows(rule: dict[str, Any], verb: str, group: str, resource: str, subresource: str = "") -> bool:
    """Kubernetes' RBAC rule match (rbac/v1 helpers): verbs, API groups, then resources with `*` and `*/<subresource>`."""
    wanted = f"{resource}/{subresource}" if subresource else resource
    resources = rule.get("resources") or []
    return (bool({verb, "*"} & set(rule.get("verbs") or [])) and bool({group, "*"} & set(rule.get("apiGroups") or []))
            and any(r in ("*", wanted) or (subresource and r == f"*/{subresource}") for r in resources))


def refused(plan, verb: str, group: str, resource: str, subresource: str = "") -> dict[str, bool]:
    """cluster -> whether the preview identity is refused `verb` on the resource (any name, any namespace)."""
    rules = preview_rules(plan)
    assert sorted(rules) == sorted(c for c, o, _ in plan.manifests() if o["kind"] == "ClusterRole" and o["metadata"]["name"] == PREVIEW_ACCOUNT)
    return {cluster: not any(allows(rule, verb, group, resource, subresource) for rule in granted) for cluster, granted in rules.items()}


def test_the_rbac_matcher_sees_what_the_preview_may_do(plan):
    assert set(refused(plan, "get", "apps", "deployments").values()) == {False}
    assert set(refused(plan, "patch", "", "configmaps").values()) == {False}


@pytest.mark.parametrize("verb", ["get", "list", "watch"])
def test_a_pr_author_cannot_read_a_secret_as_the_preview_identity(plan, verb):
    assert set(refused(plan, verb, "", "secrets").values()) == {True}


@pytest.mark.parametrize("verb", ["create", "patch", "update"])
def test_a_pr_author_cannot_dry_run_a_secret_write_to_read_its_data(plan, verb):
    """A dry-run create or patch answers with the object as it would be stored: an apply of a Secret would return its
    data, which the dry-run-only policy lets through."""
    assert set(refused(plan, verb, "", "secrets").values()) == {True}


def test_a_pr_author_cannot_mint_a_service_account_token_as_the_preview_identity(plan):
    assert set(refused(plan, "create", "", "serviceaccounts", "token").values()) == {True}


@pytest.mark.parametrize("verb", ["get", "create"])
def test_a_pr_author_cannot_reach_the_kubelet_through_nodes_proxy(plan, verb):
    """The kubelet's API (exec, run, logs of any pod on the node) authorizes `nodes/proxy` with the API server and
    answers without admission: the dry-run-only policy never sees it. A websocket exec is a `get`."""
    assert set(refused(plan, verb, "", "nodes", "proxy").values()) == {True}


@pytest.mark.parametrize("subresource", ["exec", "attach", "portforward"])
@pytest.mark.parametrize("verb", ["get", "create"])
def test_a_pr_author_cannot_exec_into_attach_to_or_forward_a_port_of_a_pod(plan, subresource, verb):
    assert set(refused(plan, verb, "", "pods", subresource).values()) == {True}
