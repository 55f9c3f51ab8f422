"""`python -m fabctl report`: the page written, and the exit statuses of what it shows."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import yaml
from helpers import copy_project
from report_site import report_site, with_protected_resource_gone

from fabctl.render import PROJECT_DIR
from fabctl.stackfile import SITE_KEY

ENV = {k: v for k, v in os.environ.items() if k not in ("FAB_CHART_DIR", "FAB_HELM")}


def fabctl(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "fabctl", *args], cwd=PROJECT_DIR, capture_output=True, text=True, check=False,
                          env={**ENV, **(env or {})})


def git(project, *args: str) -> None:
    subprocess.run(["git", "-C", str(project), *args], check=True, capture_output=True,
                   env={**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
                        "GIT_COMMITTER_EMAIL": "t@t"})


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    """A git repository of the program whose first commit has no stack site-t, and whose work tree has it."""
    project = copy_project(tmp_path_factory.mktemp("project"))
    git(project, "init", "-q")
    git(project, "add", "-A")
    git(project, "commit", "-qm", "the program")
    (project / "Pulumi.site-t.yaml").write_text(yaml.safe_dump({"config": {SITE_KEY: report_site()}}))
    return project


@pytest.fixture(scope="module")
def written(project, tmp_path_factory):
    """The report of site-t, with the policy pack, without the deploy check, compared with the commit before it."""
    out = tmp_path_factory.mktemp("report")
    run = fabctl("report", "--stack", "site-t", "--project-dir", str(project), "--out", str(out), "--base", "HEAD", "--no-check")
    return run, out


def test_the_report_is_written_and_summed_up(written):
    run, out = written
    changes = run.stdout.split(", ")[-1]
    assert (run.returncode, run.stderr) == (0, "")
    assert run.stdout.startswith(f"wrote {out / 'index.html'}: 3 clusters, ")
    assert run.stdout.endswith(" resources, 0 policy violations, 0 check errors, " + changes)
    assert (out / "index.html").is_file()


def test_a_ref_without_the_stack_file_shows_the_whole_stack_added(written):
    """Every resource and every component is new: nothing is changed, replaced or deleted."""
    run, out = written
    resources = int(run.stdout.split(" resources,")[0].rsplit(" ", 1)[-1])
    changes = int(run.stdout.rsplit(", ", 1)[-1].split()[0])
    assert run.stdout.endswith(f", {changes} changes against HEAD (no Pulumi.site-t.yaml there: a new stack)\n")
    assert changes > resources > 0
    assert f"Against HEAD (no Pulumi.site-t.yaml there: a new stack): {changes} added." in (out / "index.html").read_text()


def test_exits_5_after_writing_the_page_when_a_protected_resource_would_be_deleted(project, tmp_path):
    plain = fabctl("plan", "--stack", "site-t", "--project-dir", str(project), "--out", str(tmp_path / "plan"), "--no-policies", "--no-check")
    assert plain.returncode == 0
    saved = tmp_path / "before.json"
    saved.write_text(json.dumps(with_protected_resource_gone(json.loads((tmp_path / "plan" / "site-t" / "plan.json").read_text()))))
    run = fabctl("report", "--stack", "site-t", "--project-dir", str(project), "--out", str(tmp_path / "report"),
                 "--against", str(saved), "--no-check", "--no-policies")
    assert run.returncode == 5
    assert run.stdout.endswith(f"1 changes against {saved}\n")
    assert "1 protected resources would be replaced or deleted." in (tmp_path / "report" / "index.html").read_text()


def test_fails_when_the_saved_plan_does_not_exist(project, tmp_path):
    run = fabctl("report", "--stack", "site-t", "--project-dir", str(project), "--out", str(tmp_path), "--against",
                 str(tmp_path / "plan.json"), "--no-check")
    assert (run.returncode, run.stderr) == (
        2, f"error: no plan at {tmp_path / 'plan.json'}; write one with: python -m fabctl plan --stack site-t --out DIR\n")


def test_fails_when_the_base_is_no_ref_of_the_repository(project, tmp_path):
    run = fabctl("report", "--stack", "site-t", "--project-dir", str(project), "--out", str(tmp_path), "--base", "no-such-ref",
                 "--no-check")
    assert run.returncode == 2
    assert run.stderr.startswith("error: --base no-such-ref: ")
    assert run.stderr.endswith("; give a branch, tag or commit of this repository\n")
    assert not (tmp_path / "index.html").exists()


def test_fails_when_against_and_base_are_both_given(project, tmp_path):
    run = fabctl("report", "--stack", "site-t", "--project-dir", str(project), "--out", str(tmp_path), "--base", "HEAD",
                 "--against", "plan.json")
    assert run.returncode == 2
    assert run.stderr.splitlines()[-1] == "python -m fabctl report: error: argument --against: not allowed with argument --base"


def test_the_deploy_checks_result_is_on_the_page(project, chart_dir, helm, tmp_path):
    run = fabctl("report", "--stack", "site-t", "--project-dir", str(project), "--out", str(tmp_path), "--no-policies",
                 env={"FAB_CHART_DIR": str(chart_dir), "FAB_HELM": str(helm)})
    page = (tmp_path / "index.html").read_text()
    assert run.returncode == 0
    assert '<p id="check-state" class="good">check site-t: 0 errors, ' in page
