"""The checked-in stacks' reports open in Chromium with every section (the stack files' own test: it reads its numbers
from each stack's render, not from the page's template)."""

from __future__ import annotations

import contextlib

import pytest

from components.config import parse_site
from fabctl.render import PROJECT_DIR
from fabctl.report import Guards, page_data, write
from fabctl.stackfile import SITE_KEY, read_stack_config, stack_file

SECTIONS = ["At a glance", "Resources", "Capacity", "Completion checks", "Guards", "Access by team", "Changes"]


@pytest.fixture(scope="module")
def stack_report(plan, tmp_path_factory):
    """Each stack's page, written once for the module's tests (the page is only read)."""
    with contextlib.chdir(PROJECT_DIR):
        site = parse_site(read_stack_config(stack_file(PROJECT_DIR, plan.stack)).get(SITE_KEY))
    data = page_data(plan, site, Guards())
    return write(data, tmp_path_factory.mktemp(plan.stack)), data, site


def test_a_stacks_report_has_every_section(stack_report, open_page):
    path, _, _ = stack_report
    assert open_page(path).page.locator("h2").all_inner_texts() == SECTIONS


def test_a_stacks_report_counts_its_clusters_resources_and_models(stack_report, open_page):
    path, data, site = stack_report
    opened = open_page(path)
    resources = sum(1 for r in data.tree)
    assert resources > 0
    assert [opened.text("#count-clusters"), opened.text("#count-resources")] == [str(len(site.clusters)), str(resources)]
    assert opened.page.locator("#clusters tbody tr").count() == len(site.clusters)
    assert opened.page.locator("#models tbody tr").count() == len(site.inference.models) * len(data.profiles)


def test_a_stacks_report_makes_no_request_and_logs_no_error(stack_report, open_page):
    path, _, _ = stack_report
    opened = open_page(path)
    opened.page.click("#expand-all")
    assert opened.requests == [path.as_uri()]
    assert [entry for entry in opened.console if entry[0] in ("error", "pageerror", "warning")] == []


def test_a_stacks_report_shows_each_teams_access_matrix(stack_report, open_page):
    path, _, site = stack_report
    opened = open_page(path)
    teams = opened.page.locator("#access details.team-access").evaluate_all("ds => ds.map(d => d.dataset.team)")
    team = min(site.teams)
    matrix = opened.page.locator(f"#access-{team}")
    matrix.locator("summary").click()
    rbac = matrix.locator('tr[data-area="rbac"] td').inner_text()
    assert teams == sorted(site.teams)
    assert f"team-{team}: " in rbac and f"RoleBinding team-{team}/team-members -> ClusterRole fab-team-member" in rbac
    assert "escalation: runs pods" in rbac
    assert matrix.locator('tr[data-area="ci"] td').inner_text() == "none"
