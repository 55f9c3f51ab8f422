"""The policy pack on a site whose profiles switch on a schedule: the switches' CronJob pods, their RBAC and records
pass every rule (non-root, read-only root, requests and limits, pinned image, nothing privileged, no plaintext
secret), as do the objects Pulumi then leaves to them."""

from __future__ import annotations

import pytest
from helpers import render_small
from small_site import add_profile_schedule, small_site

from components.profiles import SWITCH_NAMESPACE
from fabctl.policy import analyze_in_process


@pytest.mark.parametrize("multikueue", [False, True])
def test_a_site_with_scheduled_switches_passes_every_policy(multikueue):
    site = small_site(multikueue=multikueue)
    add_profile_schedule(site)
    plan = render_small(site)
    assert [obj for _, obj, _ in plan.manifests() if obj["kind"] == "CronJob" and obj["metadata"]["namespace"] == SWITCH_NAMESPACE]
    assert [(v.policy, v.message) for v in analyze_in_process(plan)] == []
