"""Cross-field rules of vendor sharing (`storage.vendors`, issue 23 item 3): a vendor reads gold tables through the external
S3 endpoint and Polaris through the compute ingress, so the site must have both, and a gold namespace to share."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from components.config.problems import Problem

if TYPE_CHECKING:
    from components.config.site import SiteConfig


def vendor_problems(site: SiteConfig) -> Iterator[Problem]:
    storage = site.storage
    for name, vendor in sorted(storage.vendors.items()):
        path = ("storage", "vendors", name)
        if storage.s3.external_pool is None:
            yield path, (f"vendor {name!r} reads its tables through the external S3 endpoint, but the site has none; set "
                         "storage.s3.external_pool and storage.s3.external_vip")
        if not any(bucket.data_class == "gold" for bucket in storage.buckets.values()):
            yield path, (f"vendor {name!r} is granted gold tables, but the site has no bucket of class gold; add one (the gold "
                         "namespace's location)")
        if not vendor.tables and not vendor.views:
            yield path, f"vendor {name!r} is granted nothing; list the gold tables or views it may read under tables or views"
        for i, view in enumerate(vendor.views):
            if view in vendor.tables:
                yield (*path, "views", i), (f"{view!r} is also listed under tables; a name of the gold namespace is a table or "
                                            "a view, not both: remove one")
