"""No phase passes by skipping (fabctl/verify/gates.py, docs/roadmap.md "Required criteria and waivers"): each phase's
required criteria, what a criterion that cannot run becomes, and docs/roadmap.md's table generated from the same rows."""

from __future__ import annotations

import pytest
from small_site import add_gpu_notebooks, add_observability, full_site, small_site

from components.config import parse_site
from fabctl import roadmap_table
from fabctl.roadmap_table import PAGE, main
from fabctl.verify.criteria import PHASES, build
from fabctl.verify.gates import EVERY_SITE, REQUIREMENTS, RUN, plan, requirement
from fabctl.verify.report import INCOMPLETE, SKIPPED, WAIVED


def everything() -> dict:
    """full_site() with every feature a conditional row checks: the metrics stack, profiles, GPU notebooks, model-aware
    routing, a serving-loop run, a peer's team training here, Spark RAPIDS."""
    raw = full_site()
    raw["gpu"]["gpu-train"]["spark_rapids"] = {}
    add_observability(raw, "remote-write")
    add_gpu_notebooks(raw)
    raw["profiles"] = {"day": {}, "night": {"quotas": {"yield": {"gpu": {"gpus": 4}}}}}
    raw["active_profile"] = "day"
    raw["inference"]["routing"] = "inference-extension"
    raw["federation"] = {"peers": {"site-u": {"remote_training": {"yield": {"gpu": {"gpus": 0, "borrowing_limit_gpus": 1}}}}},
                         "ranges": {"site-u": ["172.20.0.0/16"]}, "linked": ["site-u"]}
    raw["teams"]["yield"]["serving_loop"] = {
        "training_images": ["registry.site-t.fab.internal/yield/train"],
        "features": {"wafer": {"table": "yield.wafer_features", "sql": "SELECT wafer_id FROM yield.wafers"}}}
    raw["acceptance"] = {"serving_loop": {"team": "yield", "model": "qwen3-8b", "features": "wafer",
                                          "training_image": "registry.site-t.fab.internal/yield/train:1.0"}}
    return raw


@pytest.fixture(scope="module")
def complete():
    return parse_site(everything())


def statuses(site, phase: int) -> dict[str, str]:
    return {p.id: p.status for p in plan(site, phase, build(site, phase)).planned}


def test_every_phase_has_a_criterion_required_on_every_site():
    assert {r.phase for r in REQUIREMENTS if r.when == EVERY_SITE} == set(PHASES)


def test_every_criterion_of_every_phase_belongs_to_a_row(complete):
    ids = [getattr(b, "id", None) or b[0] for phase in PHASES for b in build(complete, phase)]
    assert ids
    assert {cid: requirement(cid).phase for cid in ids} == {cid: int(cid[:2]) for cid in ids}


def test_every_row_is_built_on_a_site_with_every_feature(complete):
    built = {getattr(b, "id", None) or b[0] for phase in PHASES for b in build(complete, phase)}
    assert [r.family for r in REQUIREMENTS if not any(r.matches(cid) for cid in built)] == []


def test_a_phase_01_site_leaves_phase_02_incomplete():
    """Phase 02 requires the inference call: on a site that serves nothing yet, it cannot run, and the phase cannot pass."""
    raw = small_site()
    raw["phase"] = 1
    del raw["inference"]
    raw["gpu"]["gpu"]["nodes"]["gpu-inf-1"]["pool"] = "training"
    site_ = parse_site(raw)
    assert set(statuses(site_, 2).values()) == {INCOMPLETE}


def test_a_required_criterion_that_cannot_run_is_incomplete():
    assert statuses(parse_site(small_site()), 1)["01-nccl-under-load-gpu"] == INCOMPLETE


def test_a_waived_criterion_is_waived_and_keeps_the_reason_it_could_not_run():
    raw = small_site()
    raw["acceptance"] = {"waivers": {"01-nccl-under-load-gpu": "one training node until the second is racked"}}
    (waived,) = [p for p in plan(parse_site(raw), 1, build(parse_site(raw), 1)).planned if p.id == "01-nccl-under-load-gpu"]
    assert (waived.status, waived.waiver, waived.reason) == (
        WAIVED, "one training node until the second is racked",
        "gpu has 1 training node(s) under the active profile; multi-node NCCL needs two")


def test_metrics_are_not_required_where_the_site_deploys_no_metrics_stack():
    assert {cid: s for cid, s in statuses(parse_site(small_site()), 4).items() if cid.startswith("04-metrics")} == {
        "04-metrics-compute": SKIPPED, "04-metrics-gpu": SKIPPED, "04-metrics-storage": SKIPPED}


def test_a_configured_phase_04_feature_is_required():
    raw = small_site()
    add_observability(raw, "remote-write")
    site_ = parse_site(raw)
    checked = plan(site_, 4, build(site_, 4))
    assert {p.id: (p.status, p.required) for p in checked.planned if p.id.startswith("04-metrics")} == {
        "04-metrics-compute": (RUN, True), "04-metrics-gpu": (RUN, True), "04-metrics-storage": (RUN, True)}


def test_phase_05_always_checks_the_submission_contract():
    raw = small_site()
    raw.setdefault("training", {})["quotas"] = {"yield": {"gpu": {"gpus": 4}}}
    assert statuses(parse_site(raw), 5)["05-submission"] == RUN


def test_phase_05_is_incomplete_where_no_team_has_a_gpu_quota_to_submit_with():
    site_ = parse_site(small_site())
    assert statuses(site_, 5)["05-submission"] == INCOMPLETE


def test_a_flow_with_nothing_to_check_is_skipped_though_its_family_is_required(complete):
    assert statuses(complete, 1)["01-flow-s3-external"] == SKIPPED


def test_a_required_row_the_builders_made_nothing_of_is_incomplete():
    site_ = parse_site(small_site())
    built = [b for b in build(site_, 4) if not (getattr(b, "id", None) or b[0]).startswith("04-vllm-recovery")]
    (missing,) = [p for p in plan(site_, 4, built).planned if p.id.startswith("04-vllm-recovery")]
    assert (missing.status, missing.reason) == (
        INCOMPLETE, "the builders made no 04-vllm-recovery on this site (a bug: its row requires it here)")


def test_fails_when_a_criterion_belongs_to_no_row():
    with pytest.raises(Exception, match="^criterion 06-anything belongs to no row of fabctl/verify/gates.py REQUIREMENTS: add its row$"):
        requirement("06-anything")


def test_the_committed_roadmap_table_is_current(capsys):
    assert (main(["--check"]), capsys.readouterr().out) == (0, "roadmap table is up to date\n")


def test_fails_when_the_roadmap_table_is_stale(tmp_path, capsys):
    page = tmp_path / "roadmap.md"
    page.write_text(PAGE.read_text().replace("| 04 | `04-vllm-recovery` |", "| 04 | `04-vllm-restart` |"))
    assert main(["--check"], page=page) == 1
    assert capsys.readouterr().err == f"error: {page} is out of date; run: python -m fabctl.roadmap_table\n"


def test_the_roadmap_table_has_a_row_per_requirement_in_order():
    rows = [line.split(" | ")[1] for line in PAGE.read_text().splitlines() if line.startswith("| 0")]
    assert rows == [f"`{r.ids}`" for r in REQUIREMENTS]


def test_fails_when_a_rows_text_would_break_the_table():
    with pytest.raises(ValueError, match=r"^'a \| b' has a '\|' or a line break, which would break the table's row$"):
        roadmap_table._cell("a | b")
