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
