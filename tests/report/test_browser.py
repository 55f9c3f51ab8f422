"""The report in a real browser: headless Chromium opens the page from disk, offline (conftest.py)."""

from __future__ import annotations

import io
import json

import pytest
from helpers import render_small
from PIL import Image
from playwright.sync_api import expect
from report_site import report_site, with_protected_resource_gone
from rules import POLICIES

from components.config import parse_site
from fabctl.policy import analyze_in_process
from fabctl.render import Plan
from fabctl.report import Guards, page_data, write


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    """The smallest site's report with the policy pack's results, against a saved plan that had one protected
    resource more, and what it was made from."""
    raw = report_site()
    site, plan = parse_site(raw), render_small(raw)
    violations, policies = analyze_in_process(plan), len(POLICIES)
    saved = with_protected_resource_gone(plan.to_json())
    before = Plan(stack=saved["stack"], resources=saved["resources"], outputs=saved["outputs"])
    data = page_data(plan, site, Guards(policies=violations, policy_count=policies), before, "plan.json")
    return write(data, tmp_path_factory.mktemp("report")), data


@pytest.fixture
def opened(report, open_page):
    path, _ = report
    return open_page(path)


def test_the_page_counts_the_clusters_resources_and_gpus(opened, report):
    _, data = report
    counts = [opened.text(f"#count-{name}") for name in ("clusters", "resources", "gpus")]
    assert counts == ["3", str(data.resource_count), "16"]
    assert data.resource_count > 100


def test_the_flow_matrix_shows_compute_reaching_the_inference_gateway(opened):
    cell = opened.page.locator('#flow-matrix td[data-from="compute"][data-to="gpu"]')
    assert "inference 443/TCP" in cell.inner_text().splitlines()


def test_the_site_diagram_draws_a_lane_per_cluster_and_an_arrow_per_flow(opened, report):
    _, data = report
    lanes = opened.page.locator("#site-diagram g.lane").evaluate_all("gs => gs.map(g => g.dataset.lane)")
    arrows = opened.page.locator("#site-diagram g.flow").count()
    assert lanes == ["world", "storage", "compute", "gpu"]
    assert arrows == sum(len(f["from"]) * len(f["to"]) for f in data.flows) > 0


def test_a_models_gpus_are_shown_per_profile(opened, report):
    _, data = report
    shown = {profile: opened.text(f'#models tr[data-model="qwen3-8b"][data-profile="{profile}"] td.gpus') for profile in ("day", "night")}
    assert shown == {row.profile: str(row.gpus) for row in data.models} == {"day": "2", "night": "1"}


def test_a_teams_quota_is_shown_per_profile_with_its_borrowing_limit(opened):
    cells = opened.page.locator('#quotas tr[data-team="yield"][data-cluster="gpu"] td[data-profile]').all_inner_texts()
    assert cells == ["4 GPUs\nborrow 2, lend all unused", "8 GPUs\nborrow no limit, lend all unused"]


def test_the_policy_packs_result_is_shown(opened, report):
    _, data = report
    assert opened.text("#policies-state") == f"{data.guards.policy_count} policies: 0 mandatory and 0 advisory violations."
    assert data.guards.policy_count > 10


def test_a_protected_resource_deleted_is_highlighted(opened):
    rows = opened.page.locator("#change-list tr.protected").evaluate_all(
        "rows => rows.map(row => Array.from(row.cells, cell => cell.textContent.trim()))")
    assert rows == [["deleted protected", "storage-bucket-site-t-checkpoints-old", "minio:index/s3Bucket:S3Bucket", ""]]
    assert opened.text("#count-dangerous") == "1"


def test_filtering_the_tree_leaves_the_matching_resources(opened, report):
    _, data = report
    namespaces = sum(1 for entry in data.tree if entry.kind == "Namespace")
    opened.page.fill("#filter", "namespace")
    visible = opened.page.locator("#tree li.resource:not(.hidden)").evaluate_all("items => items.map(i => i.dataset.search)")
    assert namespaces > 0
    assert len(visible) >= namespaces
    assert all("namespace" in item for item in visible)
    assert opened.text("#filter-count") == f"{len(visible)} of {data.resource_count}"


def test_opening_a_secret_shows_its_inputs_with_the_values_hidden(opened, report):
    _, data = report
    secret = next(entry for entry in data.tree if entry.kind == "Secret")
    opened.page.fill("#filter", secret.logical_name)
    resource = opened.page.locator(f'#tree li.resource[data-index="{secret.index}"] details')
    resource.locator("summary").click()
    expect(resource.locator("pre.inputs")).not_to_be_empty()  # filled when the toggle event comes, a task later
    shown = json.loads(resource.locator("pre.inputs").inner_text())
    hidden = {**shown.get("data", {}), **shown.get("stringData", {})}
    assert shown == data.inputs[secret.index]
    assert hidden
    assert set(hidden.values()) <= {"[secret]", "[redacted]"}


def test_the_page_makes_no_request_and_logs_no_error(opened, report):
    path, _ = report
    opened.page.fill("#filter", "bucket")
    opened.page.click("#expand-all")
    opened.page.locator("#tree li.resource:not(.hidden) details summary").first.click()
    assert opened.requests == [path.as_uri()]
    assert [entry for entry in opened.console if entry[0] in ("error", "pageerror", "warning")] == []


def test_the_page_is_drawn(opened):
    shot = Image.open(io.BytesIO(opened.page.screenshot(full_page=True))).convert("RGB")
    colours = shot.getcolors(maxcolors=1 << 16)
    assert shot.size[1] > 2000
    assert colours is None or len(colours) > 50


def test_a_check_that_could_not_see_every_release_is_not_green(small, open_page, tmp_path):
    opened = open_page(write(page_data(small.plan, small.site, Guards(check=small.report())), tmp_path))
    shown = [opened.text(selector) for selector in ("#check-headline", "#count-unchecked")]
    colour = opened.page.locator("#check-state").evaluate("element => getComputedStyle(element).color")
    assert shown == ["0 errors · 2 releases NOT checked", "2"]
    assert colour == "rgb(138, 90, 0)"  # the page's --warn, never --good's green


def test_the_completion_checks_show_per_phase_what_will_run_what_is_waived_and_what_is_incomplete(opened):
    page = opened.page
    nccl = page.locator('#completion-01 tr[data-criterion="01-nccl-under-load-gpu"]')
    waived = page.locator('#completion-03 tr[data-criterion="03-serving-loop"]')
    expect(page.locator("#completion-01")).to_have_attribute("data-state", "INCOMPLETE")
    expect(nccl).to_have_attribute("data-status", "incomplete")
    expect(nccl.locator("td").nth(3)).to_have_text(
        "gpu has 1 training node(s) under the active profile; multi-node NCCL needs two")
    expect(waived).to_have_attribute("data-status", "waived")
    expect(waived.locator("td").nth(3)).to_contain_text("the first serving-loop run is planned for the next quarter")
    expect(page.locator('#completion-02 tr[data-criterion="02-inference-call"] td').nth(2)).to_have_text("will run")
