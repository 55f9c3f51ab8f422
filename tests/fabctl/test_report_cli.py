"""`python -m fabctl report`: the page written, and the exit statuses of what it shows."""

from __future__ import annotations

import json
import os
import subprocess

import pytest
import yaml
from helpers import CliRun, copy_project, fabctl_in_process
from report_site import report_site, with_protected_resource_gone

from fabctl.stackfile import SITE_KEY

WITHOUT_SHARED = {"FAB_CHART_DIR": None, "FAB_HELM": None}
"""The tests name the chart folder and Helm themselves."""


def fabctl(*args: str, env: dict[str, str] | None = None) -> CliRun:
    return fabctl_in_process(*args, env={**WITHOUT_SHARED, **(env or {})})


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
    assert run.stdout.endswith(" resources, 0 policy violations, check not run, " + changes)
    assert (out / "index.html").is_file()


def test_a_ref_without_the_stack_file_shows_every_resource_added(written):
    run, out = written
    resources = int(run.stdout.split(" resources,")[0].rsplit(" ", 1)[-1])
    assert resources > 0
    assert run.stdout.endswith(f", {resources} changes against HEAD (no Pulumi.site-t.yaml there: a new stack)\n")
    assert f"Against HEAD (no Pulumi.site-t.yaml there: a new stack): {resources} added." in (out / "index.html").read_text()


def test_against_a_ref_the_changed_inputs_are_named(project, tmp_path):
    """The stack at the ref (its program and stack file there) against the work tree's: yield's quota by day changed, in its
    ClusterQueue and in what the scheduled switch to day applies."""
    (tmp_path / "repository").mkdir()
    repository = copy_project(tmp_path / "repository")
    site = report_site()
    (repository / "Pulumi.site-t.yaml").write_text(yaml.safe_dump({"config": {SITE_KEY: site}}))
    git(repository, "init", "-q")
    git(repository, "add", "-A")
    git(repository, "commit", "-qm", "site-t")
    site["training"]["quotas"]["yield"]["gpu"]["gpus"] = 6
    (repository / "Pulumi.site-t.yaml").write_text(yaml.safe_dump({"config": {SITE_KEY: site}}))
    run = fabctl("report", "--stack", "site-t", "--project-dir", str(repository), "--out", str(tmp_path / "report"), "--base",
                 "HEAD", "--no-check", "--no-policies")
    page = (tmp_path / "report" / "index.html").read_text()
    quota = "spec.resourceGroups[0].flavors[0].resources[{}].nominalQuota"
    assert (run.returncode, run.stdout.endswith(", policies not run, check not run, 2 changes against HEAD\n")) == (0, True)
    assert ('<td>changed</td><td>training-gpu-queue-yield</td><td>kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue</td>'
            f'<td>{", ".join(quota.format(i) for i in range(3))}</td>') in page
    assert '<td>changed</td><td>profiles-gpu-objects-day</td><td>kubernetes:core/v1:ConfigMap</td><td>data.objects.yaml</td>' in page


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
    assert run.stderr.endswith("; give a branch, tag or commit of the project's git repository, or compare with a saved "
                               "plan: --against PLAN_JSON\n")
    assert not (tmp_path / "index.html").exists()


def test_fails_when_against_and_base_are_both_given(project, tmp_path):
    run = fabctl("report", "--stack", "site-t", "--project-dir", str(project), "--out", str(tmp_path), "--base", "HEAD",
                 "--against", "plan.json")
    assert run.returncode == 2
    assert run.stderr.splitlines()[-1] == "python -m fabctl report: error: argument --against: not allowed with argument --base"


def test_the_deploy_checks_result_is_on_the_page_and_what_it_could_not_check_ends_the_output(project, chart_dir, helm, tmp_path):
    """../shared/charts has no Airflow or Superset package, and no repository answers here."""
    unreachable = {"HTTPS_PROXY": "http://127.0.0.1:1", "HTTP_PROXY": "http://127.0.0.1:1"}
    run = fabctl("report", "--stack", "site-t", "--project-dir", str(project), "--out", str(tmp_path / "page"), "--no-policies",
                 "--chart-cache", str(tmp_path / "charts"), env={"FAB_CHART_DIR": str(chart_dir), "FAB_HELM": str(helm), **unreachable})
    page = (tmp_path / "page" / "index.html").read_text()
    assert (run.returncode, run.stdout.splitlines()[-1]) == (0, "NOT CHECKED: 2 of 20 releases; --strict makes this an error")
    assert ('<p id="check-state" class="warn"><b id="check-headline">0 errors · 2 releases NOT checked</b><br>check site-t: '
            '0 errors, 2 releases NOT checked, ') in page


def test_fails_when_the_saved_plan_is_another_stacks(project, tmp_path):
    saved = tmp_path / "plan.json"
    saved.write_text(json.dumps({"stack": "site-a", "resources": [], "outputs": {}}))
    run = fabctl("report", "--stack", "site-t", "--project-dir", str(project), "--out", str(tmp_path), "--against", str(saved),
                 "--no-check")
    assert (run.returncode, run.stderr) == (
        2, f"error: {saved} is the plan of stack site-a, not site-t: compare a stack with a plan of its own\n")


def test_fails_when_the_saved_plan_is_no_plan(project, tmp_path):
    saved = tmp_path / "plan.json"
    saved.write_text(json.dumps({"resources": []}))
    run = fabctl("report", "--stack", "site-t", "--project-dir", str(project), "--out", str(tmp_path), "--against", str(saved),
                 "--no-check")
    assert (run.returncode, run.stderr) == (
        2, (f"error: {saved} is not a plan that fabctl plan writes (no 'stack' key); write one with: python -m fabctl plan "
            "--stack site-t --out DIR\n"))


def test_fails_when_the_report_cannot_be_written(project, tmp_path):
    taken = tmp_path / "taken"
    taken.write_text("a file, not a folder")
    run = fabctl("report", "--stack", "site-t", "--project-dir", str(project), "--out", str(taken), "--no-check", "--no-policies")
    assert (run.returncode, run.stderr) == (2, f"error: cannot write the report to {taken}: File exists\n")
