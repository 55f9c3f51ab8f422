"""The report's "Access by team": each team's matrix, as `fabctl access --as team:<team>` answers (issue 37 item 2)."""

from __future__ import annotations

from small_site import small_site

from components.config import parse_site
from fabctl.access.matrix import answer
from fabctl.report import Guards, html, page_data


def test_each_team_has_its_matrix_with_a_row_per_area(small_plan):
    data = page_data(small_plan, parse_site(small_site()), Guards())
    section = html(data).split('<section id="access">')[1].split("</section>")[0]
    assert list(data.team_access) == ["yield"]
    assert data.team_access["yield"] == answer(small_plan, "team:yield")
    assert '<details class="team-access" id="access-yield" data-team="yield">' in section
    assert section.count('<tr data-area="rbac">') == 1
    assert "RoleBinding team-yield/team-members -&gt; ClusterRole fab-team-member" in section
    assert '<tr data-area="ci"><th>ci</th><td><span class="muted">none</span></td></tr>' in section
