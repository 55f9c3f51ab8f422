"""`python -m fabctl verify` on the smallest site, with a fake builders module (`fabctl.verify.criteria`) so that the command
is tested apart from the jobs: --render writes the files, a run against the fake API (tests/kube_stub.py) reports and
exits 0 or 1, and usage and config mistakes exit 2."""

from __future__ import annotations

import dataclasses
import sys
import types
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
import yaml
from kube_stub import FakeApi, serve
from small_site import small_site

from fabctl.cli import main
from fabctl.stackfile import SITE_KEY
from fabctl.verify import gates
from fabctl.verify.model import Criterion, NotApplicable, Step

NS = "fab-verify"
REQUIRED = {f"0{phase}-{family}" for phase in range(1, 6) for family in ("nccl-under-load", "flow")}


def job(name: str) -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "namespace": NS},
            "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox:1.37"}]}}}}


def nccl_criterion(phase: int, passes: bool = True) -> Criterion:
    """Two steps on the GPU cluster; the second measures beside a background load."""
    return Criterion(
        phase=phase, id=f"0{phase}-nccl-under-load", title="NCCL under storage load",
        steps=(Step("gpu", (job("nccl-base"),), ("Job", "nccl-base"), 600),
               Step("gpu", (job("nccl-load"), job("warp-load")), ("Job", "nccl-load"), 600, background=("warp-load",))),
        judge=lambda results: (passes, f"busbw {results.get('0.busbw_gbps')} -> {results.get('1.busbw_gbps')} GB/s"),
        bound="reduction <= 20 %",
    )


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A folder with the smallest site as stack site-t."""
    (tmp_path / "Pulumi.site-t.yaml").write_text(yaml.safe_dump({"config": {SITE_KEY: small_site()}}))
    return tmp_path


@pytest.fixture
def jobs(monkeypatch) -> types.ModuleType:
    """The builders module the command imports, as a fake: one NCCL criterion, one flow with nothing to check. Its `build`
    reads `criteria`, `skipped` and `extra` (more criteria, none by default) when called, so that a test may replace any."""
    fake = types.ModuleType("fabctl.verify.criteria")
    fake.criteria = lambda site, phase: [nccl_criterion(phase)]
    fake.skipped = lambda site, phase: [NotApplicable(f"0{phase}-flow-s3-external", "its clients are outside the site's clusters")]
    fake.extra = []
    fake.build = lambda site, phase: [*fake.criteria(site, phase), *fake.skipped(site, phase), *fake.extra]
    monkeypatch.setitem(sys.modules, "fabctl.verify.criteria", fake)
    # The phase requires what the fake builds, so that the command is tested apart from the real table's other rows.
    monkeypatch.setattr(gates, "REQUIREMENTS", tuple(r for r in gates.REQUIREMENTS if r.family in REQUIRED))
    return fake


def verify(project: Path, *args: str) -> int:
    return main(["verify", "--stack", "site-t", "--project-dir", str(project), *args])


def test_render_writes_each_steps_objects_in_apply_order(project, jobs, tmp_path):
    assert verify(project, "--phase", "1", "--render", "--out", str(tmp_path / "out")) == 0
    folder = tmp_path / "out" / "phase-01" / "01-nccl-under-load"
    assert sorted(p.name for p in folder.iterdir()) == ["0-gpu.yaml", "1-gpu.yaml"]
    docs = list(yaml.safe_load_all((folder / "1-gpu.yaml").read_text()))
    assert [d["metadata"]["name"] for d in docs] == ["warp-load", "nccl-load"]


def test_render_says_what_it_wrote_and_what_does_not_apply(project, jobs, tmp_path, capsys):
    verify(project, "--phase", "1", "--render", "--out", str(tmp_path))
    assert capsys.readouterr().out == (f"skipped 01-flow-s3-external: its clients are outside the site's clusters\n"
                                       f"wrote 2 files for 1 criteria under {tmp_path / 'phase-01'}\n")


def test_render_removes_the_files_of_a_criterion_no_longer_built(project, jobs, tmp_path):
    stale = tmp_path / "phase-01" / "01-gone" / "0-gpu.yaml"
    stale.parent.mkdir(parents=True)
    stale.write_text("kind: Job\n")
    verify(project, "--phase", "1", "--render", "--out", str(tmp_path))
    assert not stale.parent.exists()


@pytest.fixture
def api() -> FakeApi:
    """A GPU cluster where both NCCL Jobs complete at once and report their bus bandwidth; the load is ready at once."""
    path = f"/apis/batch/v1/namespaces/{NS}/jobs"
    done = [{"conditions": [{"type": "Complete", "status": "True"}]}]
    return FakeApi(
        statuses={f"{path}/nccl-base": done, f"{path}/nccl-load": done, f"{path}/warp-load": [{"ready": 1}]},
        pods={"batch.kubernetes.io/job-name=nccl-base": ["base-1"], "batch.kubernetes.io/job-name=nccl-load": ["load-1"]},
        logs={"base-1": "FAB-RESULT busbw_gbps=182.4\n", "load-1": "FAB-RESULT busbw_gbps=170.0\n"},
    )


def test_run_exits_0_when_every_applicable_criterion_passes(project, jobs, api, tmp_path, capsys):
    kubeconfig = tmp_path / "kubeconfig"
    with serve(api, kubeconfig, {"site-t-gpu": "gpu"}):
        status = verify(project, "--phase", "1", "--kubeconfig", str(kubeconfig))
    assert status == 0
    assert capsys.readouterr().out.splitlines()[-1] == "site-t phase-01: PASSED: 1 passed, 0 failed, 0 errors, 0 incomplete, 0 waived, 1 skipped"


def test_run_exits_1_when_a_criterion_fails(project, jobs, api, tmp_path, capsys):
    jobs.criteria = lambda site, phase: [nccl_criterion(phase, passes=False)]
    kubeconfig = tmp_path / "kubeconfig"
    with serve(api, kubeconfig, {"site-t-gpu": "gpu"}):
        status = verify(project, "--phase", "1", "--kubeconfig", str(kubeconfig))
    assert status == 1
    assert capsys.readouterr().out.splitlines()[-1] == "site-t phase-01: FAILED: 0 passed, 1 failed, 0 errors, 0 incomplete, 0 waived, 1 skipped"


def test_run_exits_1_when_the_kubeconfig_has_no_context_for_the_cluster(project, jobs, api, tmp_path):
    kubeconfig = tmp_path / "kubeconfig"
    with serve(api, kubeconfig, {"someone-else": "gpu"}):
        assert verify(project, "--phase", "1", "--kubeconfig", str(kubeconfig)) == 1
    assert api.requests == []


def test_run_exits_130_when_interrupted(project, jobs, api, tmp_path, capsys):
    def interrupted(results):
        raise KeyboardInterrupt

    jobs.criteria = lambda site, phase: [dataclasses.replace(nccl_criterion(phase), judge=interrupted)]
    kubeconfig = tmp_path / "kubeconfig"
    with serve(api, kubeconfig, {"site-t-gpu": "gpu"}):
        assert verify(project, "--phase", "1", "--kubeconfig", str(kubeconfig)) == 130
    assert capsys.readouterr().err == "interrupted: what the run had applied was deleted\n"
    assert api.calls("DELETE")[-1] == ("DELETE", f"/api/v1/namespaces/{NS}")


def test_run_writes_the_junit_and_markdown_reports(project, jobs, api, tmp_path):
    kubeconfig, report, table = tmp_path / "kubeconfig", tmp_path / "verify.xml", tmp_path / "verify.md"
    with serve(api, kubeconfig, {"site-t-gpu": "gpu"}):
        verify(project, "--phase", "1", "--kubeconfig", str(kubeconfig), "--junit", str(report), "--markdown", str(table))
    cases = ET.parse(report).getroot().findall("testsuite/testcase")
    assert [(c.get("name"), [e.tag for e in c]) for c in cases] == [
        ("01-flow-s3-external", ["skipped"]), ("01-nccl-under-load", ["system-out"])]
    assert "| 01-nccl-under-load | pass | 0.busbw_gbps=182.4, 1.busbw_gbps=170.0 | reduction <= 20 % |" in table.read_text()


def test_run_reads_the_kubeconfig_named_by_the_environment(project, jobs, api, tmp_path, monkeypatch):
    kubeconfig = tmp_path / "kubeconfig"
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    with serve(api, kubeconfig, {"site-t-gpu": "gpu"}):
        assert verify(project, "--phase", "1") == 0


def test_fails_when_the_stack_file_is_missing(project, jobs, capsys):
    assert main(["verify", "--stack", "site-x", "--phase", "1", "--project-dir", str(project)]) == 2
    assert capsys.readouterr().err == f"error: no stack file Pulumi.site-x.yaml in {project}; stacks: site-t\n"


def test_fails_when_the_config_is_not_valid(project, jobs, capsys):
    site = small_site()
    site["phase"] = 9
    (project / "Pulumi.site-t.yaml").write_text(yaml.safe_dump({"config": {SITE_KEY: site}}))
    assert verify(project, "--phase", "1") == 2
    assert capsys.readouterr().err.startswith("error: fab-platform:site.phase: ")


def test_fails_when_render_is_given_no_out(project, jobs, capsys):
    assert verify(project, "--phase", "1", "--render") == 2
    assert capsys.readouterr().err == "error: --render writes the jobs under --out DIR; give --out\n"


def test_fails_when_the_phase_is_not_a_roadmap_phase(project, jobs, capsys):
    with pytest.raises(SystemExit) as exit_:
        verify(project, "--phase", "6")
    assert exit_.value.code == 2


def test_fails_with_3_when_the_builders_crash(project, jobs, capsys):
    def crash(site, phase):
        raise KeyError("gpu-inf-9")

    jobs.criteria = crash
    assert verify(project, "--phase", "1", "--render", "--out", "unused") == 3
    assert capsys.readouterr().err.startswith(
        "error: the program crashed building phase 1's criteria for site-t (a bug, not your config):\nTraceback")


CANNOT_RUN = ("01-nccl-under-load-gpu-train", "gpu-train has 1 training node")
"""A required criterion (phase 01 requires `01-nccl-under-load-<cluster>` on every site) that cannot run."""


def with_waivers(project: Path, waivers: dict[str, str]) -> None:
    site = small_site()
    site["acceptance"] = {"waivers": waivers}
    (project / "Pulumi.site-t.yaml").write_text(yaml.safe_dump({"config": {SITE_KEY: site}}))


def test_fails_with_4_when_a_required_criterion_did_not_run(project, jobs, api, tmp_path, capsys):
    jobs.extra = [CANNOT_RUN]
    kubeconfig = tmp_path / "kubeconfig"
    with serve(api, kubeconfig, {"site-t-gpu": "gpu"}):
        status = verify(project, "--phase", "1", "--kubeconfig", str(kubeconfig))
    out = capsys.readouterr().out
    assert status == 4
    assert out.splitlines()[1] == (
        "incomplete 01-nccl-under-load-gpu-train: required by phase 01 and not run: gpu-train has 1 training node; make it runnable, or waive it with a reason in acceptance.waivers.01-nccl-under-load-gpu-train")
    assert out.splitlines()[-1] == "site-t phase-01: INCOMPLETE: 1 passed, 0 failed, 0 errors, 1 incomplete, 0 waived, 1 skipped"


def test_a_failure_outranks_an_incomplete_phase(project, jobs, api, tmp_path):
    jobs.criteria = lambda site, phase: [nccl_criterion(phase, passes=False)]
    jobs.extra = [CANNOT_RUN]
    kubeconfig = tmp_path / "kubeconfig"
    with serve(api, kubeconfig, {"site-t-gpu": "gpu"}):
        assert verify(project, "--phase", "1", "--kubeconfig", str(kubeconfig)) == 1


def test_a_waived_criterion_lets_the_phase_pass_and_the_report_repeats_why(project, jobs, api, tmp_path, capsys):
    with_waivers(project, {"01-nccl-under-load-gpu-train": "inference only until the training racks arrive (FAB-12)"})
    jobs.extra = [CANNOT_RUN]
    kubeconfig, table = tmp_path / "kubeconfig", tmp_path / "verify.md"
    with serve(api, kubeconfig, {"site-t-gpu": "gpu"}):
        status = verify(project, "--phase", "1", "--kubeconfig", str(kubeconfig), "--markdown", str(table))
    assert status == 0
    assert ("| 01-nccl-under-load-gpu-train | waived | - | - | waived: inference only until the training racks arrive (FAB-12) "
            "(acceptance.waivers); not run because gpu-train has 1 training node |") in table.read_text()
    assert capsys.readouterr().out.splitlines()[-1] == (
        "site-t phase-01: PASSED: 1 passed, 0 failed, 0 errors, 0 incomplete, 1 waived, 1 skipped")


def test_render_says_the_phase_would_be_incomplete_and_still_writes_the_jobs(project, jobs, tmp_path, capsys):
    jobs.extra = [CANNOT_RUN]
    assert verify(project, "--phase", "1", "--render", "--out", str(tmp_path)) == 0
    assert capsys.readouterr().out.splitlines()[-1] == (
        "phase-01 would be INCOMPLETE: a criterion it requires cannot run on site-t and is not waived (above)")


def test_fails_when_a_waiver_waives_a_criterion_that_runs(project, jobs, capsys):
    with_waivers(project, {"01-nccl-under-load": "the fabric is being recabled this week"})
    assert verify(project, "--phase", "1", "--render", "--out", "unused") == 2
    assert capsys.readouterr().err == (
        "error: fab-platform:site.acceptance.waivers.01-nccl-under-load: 01-nccl-under-load runs on this site, so it passes "
        "or fails on its figures: remove the waiver\n")


def test_fails_when_a_waiver_names_no_criterion_of_the_phase(project, jobs, capsys):
    with_waivers(project, {"01-nccl-under-load-gpu-9": "the fabric is being recabled this week"})
    jobs.extra = [CANNOT_RUN]
    assert verify(project, "--phase", "1", "--render", "--out", "unused") == 2
    assert capsys.readouterr().err == (
        "error: fab-platform:site.acceptance.waivers.01-nccl-under-load-gpu-9: phase 01 has no criterion "
        "01-nccl-under-load-gpu-9 on this site; the criteria that can be waived: 01-nccl-under-load-gpu-train\n")


def test_fails_when_a_waiver_waives_a_criterion_with_nothing_to_check(project, jobs, capsys):
    with_waivers(project, {"01-flow-s3-external": "vendors are not connected yet"})
    assert verify(project, "--phase", "1", "--render", "--out", "unused") == 2
    assert capsys.readouterr().err == (
        "error: fab-platform:site.acceptance.waivers.01-flow-s3-external: phase 01 does not require 01-flow-s3-external on "
        "this site (its clients are outside the site's clusters): remove the waiver\n")


def test_a_waiver_of_another_phase_is_not_judged_by_this_one(project, jobs, tmp_path):
    with_waivers(project, {"03-serving-loop": "the serving loop's first team starts in March"})
    assert verify(project, "--phase", "1", "--render", "--out", str(tmp_path)) == 0


def test_fails_when_a_waiver_gives_no_reason(project, jobs, capsys):
    with_waivers(project, {"01-nccl-under-load-gpu-train": "  ok  "})
    assert verify(project, "--phase", "1", "--render", "--out", "unused") == 2
    assert capsys.readouterr().err.startswith("error: fab-platform:site.acceptance.waivers.01-nccl-under-load-gpu-train: ")


def test_fails_with_3_when_a_builder_makes_a_criterion_no_requirement_row_covers(project, jobs, capsys):
    jobs.criteria = lambda site, phase: [dataclasses.replace(nccl_criterion(phase), id="01-unlisted")]
    assert verify(project, "--phase", "1", "--render", "--out", "unused") == 3
    assert ("criterion 01-unlisted belongs to no row of fabctl/verify/gates.py REQUIREMENTS: add its row"
            in capsys.readouterr().err)
