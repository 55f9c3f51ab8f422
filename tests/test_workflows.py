"""The CI workflows are valid and refer only to things that exist: scripts, make targets, actions pinned by commit."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from fabctl.render import PROJECT_DIR

WORKFLOWS = sorted((PROJECT_DIR / ".github" / "workflows").glob("*.yml"))
MAKE_TARGETS = set(re.findall(r"^([a-z][a-z-]*):", (PROJECT_DIR / "Makefile").read_text(), re.MULTILINE))


def steps(workflow: dict) -> list[dict]:
    return [step for job in workflow["jobs"].values() for step in job.get("steps", [])]


def test_there_are_pull_request_comment_and_deploy_workflows():
    assert [w.name for w in WORKFLOWS] == ["deploy.yml", "pr-comment.yml", "pull-request.yml"]


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.name)
def test_workflow_is_valid_yaml_with_jobs(path):
    workflow = yaml.safe_load(path.read_text())
    assert workflow["name"] and workflow["jobs"]
    assert True in workflow or "on" in workflow  # YAML 1.1 reads the key `on` as True


def checks_out(workflow: dict) -> bool:
    return any(step.get("uses", "").startswith("actions/checkout@") for step in steps(workflow))


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.name)
def test_every_script_and_make_target_exists(path):
    workflow = yaml.safe_load(path.read_text())
    commands = [step.get("run", "") for step in steps(workflow)]
    scripts = [script for command in commands for script in re.findall(r"(\.ci/[\w.-]+)", command)]
    targets = [target for command in commands for target in re.findall(r"\bmake ([a-z-]+)", command)]
    if checks_out(workflow):
        assert scripts and targets, "the workflow runs no script and no make target"
    assert [script for script in scripts if not (PROJECT_DIR / script).is_file()] == []
    assert [target for target in targets if target not in MAKE_TARGETS] == []


USES = re.compile(r"^\s*(?:-\s+)?uses:\s*(?P<action>\S+)(?:\s+#\s*(?P<tag>\S+))?\s*$")
PINNED = re.compile(r"[\w.-]+/[\w.-]+@[0-9a-f]{40}")
"""An action by the full commit it runs: a tag or a branch can be moved to other code, a commit cannot."""


def pinned_actions(path: Path) -> list[tuple[str, str | None]]:
    """(action reference, the tag in its trailing comment) of every `uses:` line of a workflow, as written."""
    return [(m["action"], m["tag"]) for line in path.read_text().splitlines() if (m := USES.match(line))]


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.name)
def test_fails_when_an_action_is_not_pinned_to_a_full_commit_sha_with_its_tag_beside_it(path):
    written = pinned_actions(path)
    assert sorted(action for action, _ in written) == sorted(s["uses"] for s in steps(yaml.safe_load(path.read_text())) if "uses" in s)
    assert written
    assert [(action, tag) for action, tag in written if not (PINNED.fullmatch(action) and tag and re.fullmatch(r"v\d+(\.\d+)*", tag))] == []


def test_each_action_runs_one_commit_in_every_workflow():
    commits: dict[str, set[tuple[str, str | None]]] = {}
    for path in WORKFLOWS:
        for action, tag in pinned_actions(path):
            name, _, commit = action.partition("@")
            commits.setdefault(name, set()).add((commit, tag))
    assert {name: pins for name, pins in commits.items() if len(pins) > 1} == {}


def workflow(name: str) -> dict:
    return yaml.safe_load((PROJECT_DIR / ".github" / "workflows" / name).read_text())


def test_deploys_run_from_main_only_one_stack_at_a_time_behind_its_environment():
    up = workflow("deploy.yml")["jobs"]["up"]
    assert "github.ref == 'refs/heads/main'" in up["if"] and "github.event_name == 'push'" in up["if"]
    assert (up["environment"], up["strategy"]["max-parallel"], up["strategy"]["fail-fast"]) == ("${{ matrix.stack }}", 1, False)
    assert up["concurrency"] == {"group": "pulumi-${{ matrix.stack }}", "cancel-in-progress": False}


def test_a_deploy_refuses_to_run_without_a_protected_environment_before_anything_else():
    steps = workflow("deploy.yml")["jobs"]["up"]["steps"]
    check = next(i for i, s in enumerate(steps) if ".ci/check_environment.py" in s.get("run", ""))
    pulumi = next(i for i, s in enumerate(steps) if s.get("uses", "").startswith("pulumi/actions"))
    assert check < pulumi


def test_previews_run_for_main_only_with_the_preview_identities():
    preview = workflow("deploy.yml")["jobs"]["preview"]
    assert "github.ref == 'refs/heads/main'" in preview["if"]
    assert (preview["environment"], preview["strategy"]["fail-fast"], preview["needs"]) == ("preview", False, "test")
    assert preview["concurrency"]["group"] == "preview-${{ matrix.stack }}"
    (pulumi,) = [s for s in preview["steps"] if s.get("uses", "").startswith("pulumi/actions")]
    assert set(pulumi["env"]) == {"PULUMI_ACCESS_TOKEN", "KUBECONFIG", "MINIO_USER", "MINIO_PASSWORD", "KEYCLOAK_CLIENT_ID",
                                  "KEYCLOAK_CLIENT_SECRET"}
    assert all("PREVIEW_" in value for value in pulumi["env"].values())


def test_a_preview_refuses_to_run_unless_its_environment_takes_protected_branches_only():
    steps = workflow("deploy.yml")["jobs"]["preview"]["steps"]
    check = next(i for i, s in enumerate(steps) if "check_environment.py --without-reviewers preview" in s.get("run", ""))
    assert check < next(i for i, s in enumerate(steps) if s.get("uses", "").startswith("pulumi/actions"))


def test_previews_run_the_policy_pack_and_show_in_the_runs_summary():
    steps = workflow("deploy.yml")["jobs"]["preview"]["steps"]
    (pulumi,) = [s for s in steps if s.get("uses", "").startswith("pulumi/actions")]
    assert (pulumi["with"]["command"], pulumi["with"]["policyPacks"], pulumi["with"]["comment-on-summary"]) == ("preview", "policies", True)
    assert "comment-on-pr" not in pulumi["with"] and "github-token" not in pulumi["with"]


def test_updates_wait_for_the_previews_and_passing_tests_but_not_for_a_passing_preview():
    """The environment's reviewers approve `up` after reading the previews; a preview that fails (an adopted Helm
    release, which it may not read) does not hold up the update they approve."""
    up = workflow("deploy.yml")["jobs"]["up"]
    assert up["needs"] == ["test", "preview"]
    assert up["if"].startswith("${{ !cancelled() && needs.test.result == 'success' && ")


def test_a_manual_run_previews_and_never_updates():
    deploy = workflow("deploy.yml")
    assert set(deploy[True]) == {"push", "workflow_dispatch"}
    assert "github.event_name == 'push'" in deploy["jobs"]["up"]["if"]
    assert "github.event_name" not in deploy["jobs"]["preview"]["if"]


@pytest.mark.parametrize("job", ["up", "preview"])
def test_stack_names_come_from_the_stack_file(job):
    steps = workflow("deploy.yml")["jobs"][job]["steps"]
    (pulumi,) = [s for s in steps if s.get("uses", "").startswith("pulumi/actions")]
    assert pulumi["with"]["stack-name"] == "${{ steps.stack.outputs.name }}"
    (step,) = [s for s in steps if s.get("id") == "stack"]
    assert "-m fabctl stack-name" in step["run"]


def plan_steps() -> list[dict]:
    return workflow("pull-request.yml")["jobs"]["plan"]["steps"]


def step_index(steps: list[dict], predicate) -> int:
    (index,) = [i for i, step in enumerate(steps) if predicate(step)]
    return index


PR_REPORT_RUN = re.compile(r"\.ci/pr-report (\S+) (\S+) > (\S+)")


def upload_of(steps: list[dict], artifact: str) -> int:
    return step_index(steps, lambda s: s.get("uses", "").startswith("actions/upload-artifact@") and s["with"]["name"] == artifact)


def test_the_plan_job_uploads_the_report_pages_pr_report_writes_even_when_a_stack_fails():
    steps = plan_steps()
    report = step_index(steps, lambda s: ".ci/pr-report" in s.get("run", ""))
    upload = upload_of(steps, "plan-report")
    (_, folder, _) = PR_REPORT_RUN.fullmatch(steps[report]["run"]).groups()
    assert report < upload
    assert (steps[upload]["id"], steps[upload]["if"]) == ("upload", "always()")
    assert steps[upload]["with"]["path"].rstrip("/") == folder
    assert 1 <= steps[upload]["with"]["retention-days"] <= 90


def comment_job() -> dict:
    return workflow("pr-comment.yml")["jobs"]["comment"]


def comment_step(name: str) -> dict:
    """The comment job's step that `uses` the action `name` (owner/repo)."""
    (step,) = [s for s in comment_job()["steps"] if s.get("uses", "").startswith(f"{name}@")]
    return step


def test_the_comment_with_the_link_to_the_pages_is_uploaded_for_the_comment_workflow_to_post():
    steps = plan_steps()
    pages = upload_of(steps, "plan-report")
    link = step_index(steps, lambda s: "ARTIFACT_URL" in s.get("env", {}))
    comment = upload_of(steps, "plan-comment")
    assert pages < link < comment
    assert steps[link]["env"]["ARTIFACT_URL"] == "${{ steps.%s.outputs.artifact-url }}" % steps[pages]["id"]
    assert (steps[link]["if"], steps[comment]["if"]) == ("always()", "always()")
    folder = steps[comment]["with"]["path"].rstrip("/")
    posted = comment_step("marocchino/sticky-pull-request-comment")["with"]
    downloaded = comment_step("actions/download-artifact")["with"]
    assert (downloaded["name"], downloaded["run-id"]) == ("plan-comment", "${{ github.event.workflow_run.id }}")
    assert posted["path"] == f"{downloaded['path']}/pr-comment.md" and posted["header"] == "fab-platform-plan"
    assert f"> {folder}/pr-comment.md" in steps[link]["run"]


def test_the_comment_workflow_posts_the_runs_of_pull_request_yml():
    on = workflow("pr-comment.yml")[True]
    assert on == {"workflow_run": {"workflows": [workflow("pull-request.yml")["name"]], "types": ["completed"]}}
    assert comment_job()["if"] == "${{ github.event.workflow_run.event == 'pull_request' }}"


def run_link_step(tmp_path: Path, url: str) -> list[str]:
    """The comment the link step writes from pr-report's Markdown, for an upload that gave `url`."""
    steps = plan_steps()
    run = steps[step_index(steps, lambda s: "ARTIFACT_URL" in s.get("env", {}))]["run"]
    (_, _, markdown) = PR_REPORT_RUN.fullmatch(steps[step_index(steps, lambda s: ".ci/pr-report" in s.get("run", ""))]["run"]).groups()
    (tmp_path / markdown).write_text("## fab-platform plan\n\n### site-a\n")
    subprocess.run(["bash", "-e", "-c", run], cwd=tmp_path, env={"ARTIFACT_URL": url, "PATH": "/usr/bin:/bin"}, check=True)
    folder = steps[upload_of(steps, "plan-comment")]["with"]["path"]
    return (tmp_path / folder / "pr-comment.md").read_text().splitlines()


def test_the_comment_links_the_artifact_under_the_heading_and_says_how_to_open_it(tmp_path):
    url = "https://github.com/o/r/actions/runs/1/artifacts/2"
    heading, blank, link, *rest = run_link_step(tmp_path, url)
    assert (heading, blank, rest) == ("## fab-platform plan", "", ["", "### site-a"])
    assert f"[plan-report]({url})" in link
    assert all(words in link for words in ("zip", "one folder per stack", "index.html", "offline"))


def test_the_comment_says_so_when_no_pages_were_uploaded(tmp_path):
    heading, _, link, *_ = run_link_step(tmp_path, "")
    assert (heading, link) == ("## fab-platform plan", "Report pages: none uploaded (see the workflow run's log).")


PR_REPORT = PROJECT_DIR / ".ci" / "pr-report"


def test_pr_report_is_valid_bash():
    assert subprocess.run(["bash", "-n", str(PR_REPORT)], capture_output=True, text=True).stderr == ""


def test_pr_report_without_a_report_folder_prints_its_usage_line_and_renders_nothing():
    result = subprocess.run([str(PR_REPORT), ".base"], capture_output=True, text=True)
    (usage,) = [line.removeprefix("# Usage: ") for line in PR_REPORT.read_text().splitlines() if line.startswith("# Usage: ")]
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr.strip().endswith(f"usage: {usage}")


FAKE_FABCTL = """#!/usr/bin/env bash
# Stands in for `venv/bin/python -m fabctl`: logs each command, writes what the real one writes, and exits as
# EXIT_<stack> says (report) or 0.
shift 2
echo "$*" >> "$LOG"
command=$1; shift
against=none
while [ $# -gt 0 ]; do
  case $1 in --stack) stack=$2 ;; --out) out=$2 ;; --against) against=$2 ;; esac
  shift
done
case $command in
  plan) mkdir -p "$out/$stack" && echo '{}' > "$out/$stack/plan.json" ;;
  report) mkdir -p "$out" && echo page > "$out/index.html" && echo "wrote $out/index.html against $against" ;;
  diff) echo "~ something (changed)" ;;
esac
code=EXIT_${stack//-/_}
[ "$command" != report ] || exit "${!code:-0}"
"""


def run_pr_report(tmp_path: Path, exits: dict[str, int]) -> tuple[subprocess.CompletedProcess, list[str]]:
    """pr-report in a project of two stack files whose target branch has site-a only, with fabctl faked."""
    project = tmp_path / "project"
    (project / ".ci").mkdir(parents=True)
    shutil.copy(PR_REPORT, project / ".ci" / "pr-report")
    (project / "venv" / "bin").mkdir(parents=True)
    (project / "venv" / "bin" / "python").write_text(FAKE_FABCTL)
    (project / "venv" / "bin" / "python").chmod(0o755)
    for stack in ("site-a", "site-b"):
        (project / f"Pulumi.{stack}.yaml").write_text("config: {}\n")
    (project / ".base").mkdir()
    (project / ".base" / "Pulumi.site-a.yaml").write_text("config: {}\n")
    log = tmp_path / "fabctl.log"
    env = {"PATH": "/usr/bin:/bin", "LOG": str(log)} | {f"EXIT_{stack.replace('-', '_')}": str(code) for stack, code in exits.items()}
    result = subprocess.run([".ci/pr-report", ".base", "reports"], cwd=project, env=env, capture_output=True, text=True)
    return result, log.read_text().splitlines()


def test_pr_report_writes_each_stacks_page_compared_with_the_target_branchs_plan(tmp_path):
    result, commands = run_pr_report(tmp_path, {})
    reports = [c for c in commands if c.startswith("report")]
    assert result.returncode == 0
    assert reports[0].startswith("report --stack site-a --out reports/site-a --strict --against ")
    assert reports[0].endswith("/base/site-a/plan.json")
    assert reports[1] == "report --stack site-b --out reports/site-b --strict"  # not on the target branch: no comparison
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.glob("project/reports/*/index.html")) == [
        Path("project/reports/site-a/index.html"), Path("project/reports/site-b/index.html")]


def test_pr_report_runs_the_guards_once_per_stack_only_in_the_report(tmp_path):
    _, commands = run_pr_report(tmp_path, {})
    assert [c.split()[0] for c in commands] == ["plan", "report", "diff", "report"]
    assert "--no-policies --no-check" in commands[0] and "--project-dir .base" in commands[0]


@pytest.mark.parametrize("code, says", [(4, "A mandatory policy is violated"), (5, "A protected resource is replaced or deleted"),
                                        (6, "The deploy check found errors or could not check every release")])
def test_a_failing_report_keeps_its_page_and_the_other_stacks_but_fails_pr_report(tmp_path, code, says):
    result, commands = run_pr_report(tmp_path, {"site-a": code})
    assert result.returncode == 1
    assert f"**{says}**" in result.stdout.split("### site-b")[0]
    assert [c.split()[0] for c in commands] == ["plan", "report", "diff", "report"]
    assert (tmp_path / "project/reports/site-a/index.html").is_file() and (tmp_path / "project/reports/site-b/index.html").is_file()


def test_the_pull_request_tests_run_the_browser_and_engine_tests_in_debians_packages_without_skipping():
    test = workflow("pull-request.yml")["jobs"]["test"]
    installs = [step["run"] for step in test["steps"] if "apt-get install" in step.get("run", "")]
    env = next(step for step in test["steps"] if step.get("run") == "make test")["env"]
    assert test["container"].endswith("-bookworm")
    assert installs == ["apt-get update -q && apt-get install -y -q --no-install-recommends chromium prometheus prometheus-alertmanager "
                        "openjdk-17-jre-headless busybox openssh-client"]
    assert (env["FAB_REQUIRE_BROWSER"], env["FAB_REQUIRE_ENGINES"]) == ("1", "1")


def test_ci_installs_every_debian_package_the_engine_tests_need():
    from engines import PACKAGES

    ci = (PROJECT_DIR / ".ci" / "run").read_text()
    listed = ci.split('DEBIAN_PACKAGES="', 1)[1].split('"', 1)[0].split()
    assert {tuple(entry.split(":")) for entry in listed} >= set(PACKAGES.items())
    assert "FAB_REQUIRE_ENGINES=1" in ci


IN_THE_PULL_REQUEST_IMAGE = {"curl", "git"}
"""Engine packages python:3.11-bookworm, the pull-request tests' image, holds already."""


def test_the_pull_request_tests_install_every_debian_package_the_engine_tests_need():
    from engines import PACKAGES

    test = workflow("pull-request.yml")["jobs"]["test"]
    installed = {word for step in test["steps"] if "apt-get install" in step.get("run", "") for word in step["run"].split()}
    assert {package for package in PACKAGES.values() if package not in IN_THE_PULL_REQUEST_IMAGE} <= installed


def test_the_deploy_check_before_an_update_fails_on_a_release_it_could_not_check():
    runs = [step["run"] for step in workflow("deploy.yml")["jobs"]["up"]["steps"] if "fabctl check" in step.get("run", "")]
    assert runs == ["venv/bin/python -m fabctl check --stack '${{ matrix.stack }}' --strict"]


def test_the_pull_request_plan_renders_with_the_helm_make_setup_installs():
    steps = plan_steps()
    assert [s for s in steps if "helm" in s.get("uses", "")] == []
    assert step_index(steps, lambda s: s.get("run") == "make setup") < step_index(steps, lambda s: ".ci/pr-report" in s.get("run", ""))


def test_offline_ci_excepts_exactly_the_pinned_charts_its_mirror_lacks(chart_dir):
    """.ci/run plans every stack with ../shared/charts, which lacks some charts on purpose: only their releases may stay
    unchecked, and an exception the mirror no longer needs is not kept."""
    import json

    from components.versions import CHARTS

    (excepted,) = re.findall(r"--strict-except (\S+)", (PROJECT_DIR / ".ci" / "run").read_text())
    mirrored = {chart["name"] for chart in json.loads((chart_dir / "index.json").read_text())["charts"]}
    assert sorted(excepted.split(",")) == sorted({chart.chart for chart in CHARTS} - mirrored)


FAKE_GH = """#!/usr/bin/env bash
# Stands in for `gh api repos/R/pulls/N --jq .head.sha`: logs the call and prints HEAD_OF_PR.
echo "$*" >> "$LOG"
echo "$HEAD_OF_PR"
"""


def run_number_step(tmp_path: Path, number: str, head_of_pr: str) -> tuple[subprocess.CompletedProcess, str, list[str]]:
    """The comment job's check of the artifact's number against the run's head commit: (result, its output, gh calls)."""
    (step,) = [s for s in comment_job()["steps"] if s.get("id") == "pr"]
    comment_dir, bin_dir = tmp_path / "plan-comment", tmp_path / "bin"
    comment_dir.mkdir()
    bin_dir.mkdir()
    (comment_dir / "number").write_text(number)
    (bin_dir / "gh").write_text(FAKE_GH)
    (bin_dir / "gh").chmod(0o755)
    output, log = tmp_path / "output", tmp_path / "gh.log"
    output.touch()
    log.touch()
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "LOG": str(log), "HEAD_OF_PR": head_of_pr, "GITHUB_OUTPUT": str(output),
           "REPOSITORY": "o/r", "HEAD_SHA": "a" * 40, "COMMENT_DIR": str(comment_dir), "GH_TOKEN": "t"}
    assert set(step["env"]) == set(env) - {"PATH", "LOG", "HEAD_OF_PR", "GITHUB_OUTPUT"}
    result = subprocess.run(["bash", "-e", "-c", step["run"]], env=env, capture_output=True, text=True)
    return result, output.read_text(), log.read_text().splitlines()


def test_the_comment_goes_to_the_pull_request_the_run_tested(tmp_path):
    result, output, calls = run_number_step(tmp_path, "42\n", "a" * 40)
    assert (result.returncode, output, calls) == (0, "number=42\n", ["api repos/o/r/pulls/42 --jq .head.sha"])


def test_fails_when_the_artifact_names_no_pull_request_number(tmp_path):
    result, output, calls = run_number_step(tmp_path, "42; gh api -X DELETE repos/o/r", "a" * 40)
    assert (result.returncode, output, calls) == (1, "", [])
    assert result.stderr == "the artifact names no pull request number\n"


def test_no_comment_when_the_number_names_a_pull_request_at_another_commit(tmp_path):
    """A pull request's run cannot direct its comment to another pull request."""
    result, output, _ = run_number_step(tmp_path, "7", "b" * 40)
    assert (result.returncode, output) == (0, "")
    assert "pull request #7 is at bbbb" in result.stdout
