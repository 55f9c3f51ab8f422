"""`python -m fabctl check` and the check in `fabctl plan`: what a user sees, and the exit statuses."""

from __future__ import annotations

import tarfile
from pathlib import Path

import pytest
import yaml
from helpers import CliRun, copy_project, fabctl_in_process, render_small
from small_site import small_site

from fabctl.render import HELM_RELEASE_TYPE
from fabctl.stackfile import SITE_KEY

WITHOUT_SHARED = {"FAB_CHART_DIR": None, "FAB_HELM": None}
"""The tests name the chart folder and Helm themselves."""


def fabctl(*args: str, env: dict[str, str] | None = None) -> CliRun:
    return fabctl_in_process(*args, env={**WITHOUT_SHARED, **(env or {})})


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A copy of the program with the smallest site as the stack file of stack site-t."""
    folder = tmp_path / "project"
    folder.mkdir()
    project = copy_project(folder)
    (project / "Pulumi.site-t.yaml").write_text(yaml.safe_dump({"config": {SITE_KEY: small_site()}}))
    return project


UNREACHABLE = {"HTTPS_PROXY": "http://127.0.0.1:1", "HTTP_PROXY": "http://127.0.0.1:1"}
"""No chart repository answers (the tests never depend on the network)."""


def _pull_failure(repo: str) -> str:
    """What ../shared's Helm 4 says when the proxy of UNREACHABLE refuses a pull."""
    return (f'Error: looks like "{repo}" is not a valid chart repository or cannot be reached: Get "{repo}/index.yaml": '
            "proxyconnect tcp: dial tcp 127.0.0.1:1: connect: connection refused")


def test_plan_runs_the_check_after_the_policy_pack_and_ends_saying_what_it_did_not_check(chart_dir, helm, project, tmp_path):
    cache = tmp_path / "cache"
    run = fabctl("plan", "--stack", "site-t", "--project-dir", str(project), "--out", str(tmp_path / "out"), "--chart-cache",
                 str(cache), env={"FAB_CHART_DIR": str(chart_dir), "FAB_HELM": str(helm), **UNREACHABLE})
    lines = run.stdout.splitlines()
    airflow, superset = ("airflow 1.22.0 (https://airflow.apache.org)", "superset 0.22.4 (https://apache.github.io/superset)")
    assert (run.returncode, run.stderr) == (0, "")
    assert lines[-11:-8] == [
        "policies: 0 mandatory and 0 advisory violations",
        f"not rendered: site-t-compute compute-airflow: no package of {airflow} in {chart_dir}; cannot pull {airflow}: "
        + _pull_failure("https://airflow.apache.org"),
        f"not rendered: site-t-compute compute-superset: no package of {superset} in {chart_dir}; cannot pull {superset}: "
        + _pull_failure("https://apache.github.io/superset"),
    ]
    assert lines[-8].startswith("check site-t: 0 errors, 2 releases NOT checked, 0 accepted, 0 notes; 18 of 20 releases rendered; ")
    assert lines[-7:] == [
        "NOT CHECKED: 2 of 20 releases of site-t; what they install is unknown to the check:",
        f"  site-t-compute compute-airflow: {airflow}: no chart package",
        f"  site-t-compute compute-superset: {superset}: no chart package",
        "Pull their charts into the chart cache, where the next run finds them, or pass a folder that holds them with --charts DIR:",
        f"  helm pull airflow --repo https://airflow.apache.org --version 1.22.0 -d {cache}",
        f"  helm pull superset --repo https://apache.github.io/superset --version 0.22.4 -d {cache}",
        "NOT CHECKED: 2 of 20 releases; --strict makes this an error",
    ]


def test_fails_when_strict_except_does_not_name_a_chart_it_could_not_check(chart_dir, helm, project, tmp_path):
    run = fabctl("check", "--stack", "site-t", "--project-dir", str(project), "--chart-cache", str(tmp_path),
                 "--strict-except", "airflow", env={"FAB_CHART_DIR": str(chart_dir), "FAB_HELM": str(helm), **UNREACHABLE})
    assert (run.returncode, run.stderr) == (
        6, "error: 1 release NOT checked and --strict-except airflow forbids it: site-t-compute compute-superset\n")
    assert run.stdout.splitlines()[-1] == "NOT CHECKED: 2 of 20 releases (--strict-except: 1 of them may not be)"


def test_fails_when_the_helm_option_names_no_file():
    run = fabctl("check", "--stack", "site-b", "--helm", "/nonexistent/helm")
    assert (run.returncode, run.stderr) == (
        2, ("error: --helm names /nonexistent/helm, which is not a file: give the path of a Helm binary (3.8 or later); or "
            "leave it out to use the virtualenv's Helm (make setup installs it) or the one on the PATH\n")
    )


def test_fails_when_the_chart_folder_does_not_exist(helm, tmp_path):
    run = fabctl("check", "--stack", "site-b", "--helm", str(helm), "--charts", str(tmp_path / "none"))
    assert (run.returncode, run.stderr) == (2, f"error: --charts {tmp_path / 'none'} is not a folder of chart packages\n")


def _broken_chart(folder: Path, name: str, version: str) -> None:
    """A package that Helm refuses to render, under the name and version of a chart the stack pins."""
    source = folder / "src" / name
    (source / "templates").mkdir(parents=True)
    (source / "Chart.yaml").write_text(f"apiVersion: v2\nname: {name}\nversion: {version}\n")
    (source / "templates" / "broken.yaml").write_text('{{ fail "this chart is broken" }}\n')
    with tarfile.open(folder / f"{name}-{version}.tgz", "w:gz") as package:
        package.add(source, arcname=name)


def test_fails_with_status_6_when_the_check_finds_an_error(helm, project, tmp_path):
    charts = tmp_path / "charts"
    charts.mkdir()
    _broken_chart(charts, "kueue", "0.19.2")
    run = fabctl("check", "--stack", "site-t", "--project-dir", str(project), "--helm", str(helm), "--charts", str(charts))
    assert run.returncode == 6
    assert [r["name"] for r in render_small(small_site()).of_type(HELM_RELEASE_TYPE) if r["inputs"]["version"] == "0.19.2"] == ["training-gpu-kueue"]
    assert run.stderr.splitlines() == [
        "error [charts.render] site-t-gpu HelmRelease kueue-system/kueue (training-gpu-kueue): Helm refuses to "
        "render it: Error: execution error at (kueue/templates/broken.yaml:1:3): this chart is broken. Fix: fix the "
        "release's values (the chart's values.schema.json and templates say what it accepts)"
    ]


def test_without_helm_the_check_runs_on_the_programs_own_objects_and_ends_saying_no_release_was_checked(
        project, tmp_path, monkeypatch, capsys):
    from fabctl import cli, helm_install

    monkeypatch.setattr(helm_install, "default_target", lambda: tmp_path / "venv" / "bin" / "helm")
    monkeypatch.setenv("PATH", str(tmp_path))
    for variable in ("FAB_HELM", "FAB_CHART_DIR"):
        monkeypatch.delenv(variable, raising=False)
    status = cli.main(["check", "--stack", "site-t", "--project-dir", str(project)])
    lines = capsys.readouterr().out.splitlines()
    assert status == 0
    assert lines[-4].startswith("check site-t: 0 errors, 20 releases NOT checked, 0 accepted, ")
    assert lines[-3:] == [
        ("NOT CHECKED: 20 of 20 releases of site-t: no Helm was found (--helm, FAB_HELM, helm beside this Python, helm on the "
         "PATH), so no release was rendered and only the program's own objects were checked."),
        "Install the pinned Helm into the virtualenv with `make setup` (venv/bin/helm), or pass --helm PATH.",
        "NOT CHECKED: 20 of 20 releases; --strict makes this an error",
    ]


def test_renders_are_kept_under_the_cache_folder_by_default(tmp_path, monkeypatch):
    from fabctl import cli
    from fabctl.commands import charts

    monkeypatch.delenv(charts.CACHE_VARIABLE)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    args = cli.parser().parse_args(["check", "--stack", "site-t"])
    assert charts.render_cache_folder(args) == tmp_path / "fab-platform" / "renders"


def test_the_cache_variable_moves_the_render_cache_and_the_chart_cache(tmp_path, monkeypatch):
    from fabctl import cli
    from fabctl.commands import charts

    monkeypatch.setenv(charts.CACHE_VARIABLE, str(tmp_path / "cache"))
    args = cli.parser().parse_args(["check", "--stack", "site-t"])
    assert (charts.render_cache_folder(args), charts._chart_cache(args)) == (tmp_path / "cache" / "renders", tmp_path / "cache" / "charts")


def test_renders_are_kept_in_the_folder_the_option_names_or_nowhere():
    from fabctl import cli
    from fabctl.commands import charts

    named, nowhere = (cli.parser().parse_args(["plan", "--stack", "site-t", *options])
                      for options in (["--render-cache", "/tmp/renders"], ["--no-render-cache"]))
    assert (charts.render_cache_folder(named), charts.render_cache_folder(nowhere)) == (Path("/tmp/renders"), None)


def test_the_check_keeps_the_stacks_render_each_release_render_and_value_trials_in_the_render_cache(
        chart_dir, helm, project, tmp_path, monkeypatch, capsys):
    from fabctl import cli
    from fabctl import helm as helm_module

    monkeypatch.setattr(helm_module, "_CRD_NAMES", {})  # as in a new process: the CRD names are read once per process
    for variable, value in {"FAB_CHART_DIR": str(chart_dir), "FAB_HELM": str(helm), **UNREACHABLE}.items():
        monkeypatch.setenv(variable, value)
    status = cli.main(["check", "--stack", "site-t", "--project-dir", str(project), "--chart-cache", str(tmp_path / "charts"),
                       "--render-cache", str(tmp_path / "renders")])
    capsys.readouterr()
    kept = {folder.name: len(list(folder.glob("*.json"))) for folder in (tmp_path / "renders").iterdir() if folder.is_dir()}
    assert (status, sorted(kept)) == (0, ["crds", "program", "template", "values"])
    # The 18 releases the mirror has packages for (all 20 but Airflow and Superset), CloudNativePG's on compute and on
    # storage alike (same chart, name, namespace and values): one render, one set of trials.
    assert kept["template"] == kept["values"] == 17
    assert kept["program"] == 1  # site-t's render (it links no peer)


def test_fails_when_the_chart_cache_is_a_file(helm, project, tmp_path):
    (tmp_path / "charts").write_text("not a folder")
    run = fabctl("check", "--stack", "site-t", "--project-dir", str(project), "--chart-cache", str(tmp_path / "charts"),
                 env={"FAB_HELM": str(helm)})
    assert (run.returncode, run.stdout, run.stderr) == (2, "", (
        f"error: the chart cache {tmp_path / 'charts'} is not a folder; name another with --chart-cache DIR or FAB_CACHE_DIR\n"))
