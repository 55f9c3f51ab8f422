"""Cross-field checks of vendor sharing (`storage.vendors`, issue 23 item 3): a vendor reads gold tables through the external
S3 endpoint and Polaris through the compute ingress, so the site must have both, and a gold namespace to share; it comes
from its own ranges only, which are small and outside the site's clusters."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from components.config.problems import Problem

if TYPE_CHECKING:
    from components.config.views import SiteViews


MIN_VENDOR_PREFIX = 16
"""The widest range a vendor may be admitted from: its egress ranges, never a whole provider's or the world."""


def vendor_problems(site: SiteViews) -> Iterator[Problem]:
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
        if not vendor.source_cidrs:
            yield (*path, "source_cidrs"), (f"vendor {name!r} has no source ranges; list its own egress ranges under "
                                            "source_cidrs: the catalog route and the S3 endpoint admit those alone")
        for i, cidr in enumerate(vendor.source_cidrs):
            where = (*path, "source_cidrs", i)
            if cidr.prefixlen < MIN_VENDOR_PREFIX:
                yield where, (f"{cidr} admits {cidr.num_addresses} addresses; list the vendor's own egress ranges, each at most a "
                              f"/{MIN_VENDOR_PREFIX}")
            for key, cluster in sorted(site.clusters.items()):
                if cidr.overlaps(cluster.pod_cidr) or cidr.overlaps(cluster.node_cidr):
                    yield where, (f"{cidr} overlaps clusters.{key}; a vendor's source_cidrs are its addresses outside the "
                                  "site")
