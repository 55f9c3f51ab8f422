"""The deploy guard: a deploy refuses to run unless its GitHub environment is protected (.ci/check_environment.py)."""

from __future__ import annotations

import importlib.util

from fabctl.render import PROJECT_DIR

_spec = importlib.util.spec_from_file_location("check_environment", PROJECT_DIR / ".ci" / "check_environment.py")
check_environment = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(check_environment)

PROTECTED = {
    "protection_rules": [{"type": "required_reviewers", "reviewers": [{"type": "Team", "reviewer": {"slug": "platform"}}]}],
    "deployment_branch_policy": {"protected_branches": True, "custom_branch_policies": False},
}


def test_a_protected_environment_passes():
    assert check_environment.problems("site-a", PROTECTED) == []


def test_fails_when_the_environment_has_no_required_reviewers():
    environment = {**PROTECTED, "protection_rules": [{"type": "wait_timer", "wait_timer": 5}]}
    assert check_environment.problems("site-a", environment) == [
        "environment 'site-a' has no required reviewers: add them under Settings > Environments > site-a"
    ]


def test_fails_when_any_branch_may_deploy():
    environment = {**PROTECTED, "deployment_branch_policy": None}
    assert check_environment.problems("site-a", environment) == [
        "environment 'site-a' accepts deployments from any branch: limit it to protected branches (main)"
    ]


def test_the_preview_environment_needs_no_reviewers():
    environment = {**PROTECTED, "protection_rules": []}
    assert check_environment.problems("preview", environment, reviewers=False) == []


def test_fails_when_any_branch_may_use_the_preview_environment():
    """Its secrets would reach any branch's workflow, a pull request's edited copy included."""
    environment = {**PROTECTED, "deployment_branch_policy": None}
    assert check_environment.problems("preview", environment, reviewers=False) == [
        "environment 'preview' accepts deployments from any branch: limit it to protected branches (main)"
    ]


SELECTED = {**PROTECTED, "deployment_branch_policy": {"protected_branches": False, "custom_branch_policies": True}}


def test_an_environment_naming_its_branches_passes():
    assert check_environment.problems("site-a", SELECTED, branch_policies=[{"name": "main", "type": "branch"}]) == []


def test_fails_when_the_environment_takes_branches_matching_a_pattern():
    """Anyone who may push a branch can name it `release/x`: a pattern lets a pull request's branch use the environment."""
    policies = [{"name": "main", "type": "branch"}, {"name": "release/*", "type": "branch"}, {"name": "v*", "type": "tag"}]
    assert check_environment.problems("preview", SELECTED, reviewers=False, branch_policies=policies) == [
        "environment 'preview' accepts deployments from branches or tags matching release/*, v*, which anyone who pushes a branch "
        "can name: name the branches one by one, or limit it to protected branches (main)"
    ]


class CustomBranches:
    """The GitHub API of an environment that takes the branches matching `*`, and the requests made of it."""

    def __init__(self) -> None:
        self.paths: list[str] = []

    def handle(self, method: str, path: str, body: dict, headers) -> tuple[int, dict]:
        self.paths.append(path)
        if path.endswith("/deployment-branch-policies?per_page=100"):
            return 200, {"total_count": 1, "branch_policies": [{"id": 1, "name": "*", "type": "branch"}]}
        return 200, SELECTED


def test_the_check_reads_the_custom_branch_policies_of_the_environment(capsys, monkeypatch):
    from fake_http import serving

    fake = CustomBranches()
    with serving(fake) as url:
        monkeypatch.setenv("GITHUB_API_URL", url)
        monkeypatch.setenv("GITHUB_REPOSITORY", "o/r")
        monkeypatch.setenv("GH_TOKEN", "t")
        assert check_environment.main(["--without-reviewers", "preview"]) == 1
    assert fake.paths == ["/repos/o/r/environments/preview", "/repos/o/r/environments/preview/deployment-branch-policies?per_page=100"]
    assert capsys.readouterr().err.startswith("refusing to run: environment 'preview' accepts deployments from branches or tags matching *,")
