"""`fabctl report`: the plan of a site as one static HTML page for the reviewers of a change (network, platform and
data teams): the site at a glance, its resources, capacity, guards, and what changes against a saved plan or a git ref.
"""

from fabctl.report.model import Guards, PageData, page_data
from fabctl.report.page import PAGE_NAME, html, write

__all__ = ["PAGE_NAME", "Guards", "PageData", "html", "page_data", "write"]
