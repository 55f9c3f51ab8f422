"""The smallest site that shows every section of the report: profiles (day and night), a team with a quota that
changes at night and a borrowing limit, a model whose replicas change at night, and phase 03's criteria waived."""

from __future__ import annotations

import copy
from typing import Any

from small_site import add_profile_schedule, small_site


def report_site() -> dict[str, Any]:
    site = small_site()
    add_profile_schedule(site)
    site["training"]["quotas"]["yield"]["gpu"]["borrowing_limit_gpus"] = 2
    site["acceptance"] = {"waivers": {"03-serving-loop": "the first serving-loop run is planned for the next quarter"}}
    return site


def with_protected_resource_gone(plan_json: dict[str, Any]) -> dict[str, Any]:
    """A saved plan that had one more protected resource (a bucket under another name): against it, the stack deletes
    a protected resource."""
    before = copy.deepcopy(plan_json)
    buckets = [r for r in before["resources"] if r["type"] == "minio:index/s3Bucket:S3Bucket" and r.get("protect")]
    bucket = min(buckets, key=lambda r: r["name"])  # not the first registered: registration order varies
    gone = {**copy.deepcopy(bucket), "urn": bucket["urn"] + "-old", "name": bucket["name"] + "-old"}
    before["resources"].append(gone)
    return before
