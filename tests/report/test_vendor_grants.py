"""The report's "Vendor grants" table: every grant of every vendor, as the setup Job applies it (issue 23 item 3)."""

from __future__ import annotations

from helpers import render_small
from small_site import add_vendor, small_site

from components.config import parse_site
from fabctl.report import Guards, html, page_data


def test_every_vendor_grant_is_a_row_of_the_table():
    raw = small_site()
    add_vendor(raw)
    page = html(page_data(render_small(raw), parse_site(raw), Guards()))
    rows = page.split('<table id="vendor-grants">')[1].split("</table>")[0].count('<tr data-vendor="etch-tools">')
    assert rows == 2
    assert ("<td>table gold.chamber_health_daily</td><td>TABLE_READ_PROPERTIES</td>"
            "<td><code>s3://site-t-gold/gold/chamber_health_daily/</code></td><td><code>198.51.100.64/28</code></td>") in page
    assert "<td>view gold.chamber_health_etch_tools</td><td>VIEW_READ_PROPERTIES</td>" in page


def test_a_site_without_vendors_says_so():
    raw = small_site()
    page = html(page_data(render_small(raw), parse_site(raw), Guards()))
    assert '<p class="muted" id="vendor-grants">No vendor is granted anything (no <code>storage.vendors</code>).</p>' in page
