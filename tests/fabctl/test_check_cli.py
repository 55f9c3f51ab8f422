"""`python -m fabctl check` and the check in `fabctl plan`: what a user sees, and the exit statuses."""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import yaml

from fabctl.render import HELM_RELEASE_TYPE, PROJECT_DIR
from fabctl.stackfile import SITE_KEY
from helpers import copy_project, render_small
from small_site import small_site

ENV = {k: v for k, v in os.environ.items() if k not in ("FAB_CHART_DIR", "FAB_HELM")}


def fabctl(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "fabctl", *args], cwd=PROJECT_DIR, capture_output=True, text=True, check=False,
                          env={**ENV, **(env or {})})


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A copy of the program with the smallest site as the stack file of stack site-t."""
    folder = tmp_path / "project"
    folder.mkdir()
    project = copy_project(folder)
    (project / "Pulumi.site-t.yaml").write_text(yaml.safe_dump({"config": {SITE_KEY: small_site()}}))
    return project


def test_plan_runs_the_check_after_the_policy_pack(chart_dir, helm, project, tmp_path):
    run = fabctl("plan", "--stack", "site-t", "--project-dir", str(project), "--out", str(tmp_path / "out"),
                 env={"FAB_CHART_DIR": str(chart_dir), "FAB_HELM": str(helm)})
    lines = run.stdout.splitlines()
    assert (run.returncode, run.stderr) == (0, "")
    assert lines[-4:-1] == [
        "policies: 0 mandatory and 0 advisory violations",
        f"not rendered: site-t-compute compute-airflow: no package of airflow 1.22.0 (https://airflow.apache.org) in {chart_dir}",
        f"not rendered: site-t-compute compute-superset: no package of superset 0.22.4 (https://apache.github.io/superset) in {chart_dir}",
    ]
    assert lines[-1].startswith("check site-t: 0 errors, 0 accepted, 0 notes; 18 of 20 releases rendered, 2 not rendered; ")


def test_fails_when_there_is_no_helm():
    run = fabctl("check", "--stack", "site-b", "--helm", "/nonexistent/helm")
    assert (run.returncode, run.stderr) == (
        2, "error: no Helm found at /nonexistent/helm: install Helm (3.8 or later) or pass --helm PATH (or set FAB_HELM); "
        "skip the check with --no-check\n"
    )


def test_fails_when_the_chart_folder_does_not_exist(helm, tmp_path):
    run = fabctl("check", "--stack", "site-b", "--helm", str(helm), "--charts", str(tmp_path / "none"))
    assert (run.returncode, run.stderr) == (2, f"error: --charts {tmp_path / 'none'} is not a folder of chart packages\n")


def test_fails_when_no_chart_repository_can_be_reached(helm, tmp_path):
    subprocess.run([str(helm), "version"], capture_output=True, check=True)  # ../shared's Helm installs itself on first use
    unreachable = {"HTTPS_PROXY": "http://127.0.0.1:1", "HTTP_PROXY": "http://127.0.0.1:1"}
    run = fabctl("check", "--stack", "site-b", "--helm", str(helm), "--chart-cache", str(tmp_path), env=unreachable)
    assert run.returncode == 2
    assert run.stderr.splitlines()[-1] == (
        "error: no chart package could be found or pulled: the chart repositories are not reachable from here. Mirror the charts "
        "into a folder (helm pull CHART --repo URL --version VERSION -d DIR, or helm pull oci://... ) and pass --charts DIR; "
        "skip the check with --no-check"
    )
    assert any(line.startswith("error: cannot pull cilium 1.18.3 (https://helm.cilium.io/): ") for line in run.stderr.splitlines())


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
