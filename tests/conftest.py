"""Shared fixtures: the stack files' config, their renders (one per session), and the upstream CRDs.

Tests that need `../shared/crds` find it beside the project (or through FAB_CRD_DIR) and skip with
the reason where it is absent, as in a user's clone. CI sets FAB_REQUIRE_SHARED=1, which turns that
skip into a failure so that schema tests can never silently stop running.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from fabctl.render import PROJECT_DIR, Plan
from helpers import STACKS, rendered


def shared_crd_dir() -> Path | None:
    candidate = Path(os.environ.get("FAB_CRD_DIR", PROJECT_DIR.parent / "shared" / "crds"))
    return candidate if (candidate / "index.json").is_file() else None


@pytest.fixture(scope="session")
def crd_dir() -> Path:
    found = shared_crd_dir()
    if found is None:
        reason = "upstream CRDs not found at ../shared/crds (set FAB_CRD_DIR)"
        if os.environ.get("FAB_REQUIRE_SHARED") == "1":
            pytest.fail(f"{reason}; FAB_REQUIRE_SHARED=1 forbids skipping schema tests")
        pytest.skip(reason)
    return found


@pytest.fixture(scope="session", params=STACKS)
def plan(request: pytest.FixtureRequest) -> Plan:
    return rendered(request.param)


@pytest.fixture(scope="session")
def plan_a() -> Plan:
    return rendered("site-a")


@pytest.fixture(scope="session")
def plan_b() -> Plan:
    return rendered("site-b")
