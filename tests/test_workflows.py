"""The CI workflows are valid and refer only to things that exist: scripts, make targets, pinned actions."""

from __future__ import annotations

import re

import pytest
import yaml

from fabctl.render import PROJECT_DIR

WORKFLOWS = sorted((PROJECT_DIR / ".github" / "workflows").glob("*.yml"))
MAKE_TARGETS = set(re.findall(r"^([a-z][a-z-]*):", (PROJECT_DIR / "Makefile").read_text(), re.MULTILINE))


def steps(workflow: dict) -> list[dict]:
    return [step for job in workflow["jobs"].values() for step in job.get("steps", [])]


def test_there_are_pull_request_and_deploy_workflows():
    assert [w.name for w in WORKFLOWS] == ["deploy.yml", "pull-request.yml"]


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.name)
def test_workflow_is_valid_yaml_with_jobs(path):
    workflow = yaml.safe_load(path.read_text())
    assert workflow["name"] and workflow["jobs"]
    assert True in workflow or "on" in workflow  # YAML 1.1 reads the key `on` as True


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.name)
def test_every_script_and_make_target_exists(path):
    for step in steps(yaml.safe_load(path.read_text())):
        command = step.get("run", "")
        for script in re.findall(r"(\.ci/[\w.-]+)", command):
            assert (PROJECT_DIR / script).is_file(), script
        for target in re.findall(r"\bmake ([a-z-]+)", command):
            assert target in MAKE_TARGETS, target


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.name)
def test_every_action_is_pinned_to_a_version(path):
    for step in steps(yaml.safe_load(path.read_text())):
        if "uses" in step:
            assert re.fullmatch(r"[\w.-]+/[\w.-]+@v\d+", step["uses"]), step["uses"]


def test_deploys_wait_for_an_environment_approval():
    deploy = yaml.safe_load((PROJECT_DIR / ".github" / "workflows" / "deploy.yml").read_text())
    assert deploy["jobs"]["up"]["environment"] == "${{ matrix.stack }}"
    assert deploy["jobs"]["up"]["strategy"]["max-parallel"] == 1


def test_previews_run_the_policy_pack_and_comment_on_the_pr():
    pr = yaml.safe_load((PROJECT_DIR / ".github" / "workflows" / "pull-request.yml").read_text())
    (pulumi,) = [s for s in pr["jobs"]["preview"]["steps"] if s.get("uses", "").startswith("pulumi/actions")]
    assert (pulumi["with"]["command"], pulumi["with"]["policyPacks"], pulumi["with"]["comment-on-pr"]) == ("preview", "policies", True)
