"""Shared fixtures: renders of small sites and of the stack files (one per session), and the upstream CRDs.

Tests that need `../shared` (CRDs, chart packages, Helm) find it beside the project (or through
FAB_CRD_DIR, FAB_CHART_DIR, FAB_HELM) and skip with the reason where it is absent, as in a user's clone. CI sets FAB_REQUIRE_SHARED=1, which turns that
skip into a failure so that schema tests can never silently stop running.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import settings

import components.catalog  # noqa: F401  (declares the engines and their flows to the config before a test parses a site)
from fabctl.render import PROJECT_DIR, Plan
from helpers import STACKS, helm_rendered, render_small, rendered
from small_site import full_site, small_site


pytest_plugins = ("registration_order",)

SHARED_DIR = PROJECT_DIR.parent / "shared"

settings.register_profile("ci", derandomize=True, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))
"""CI draws the same examples for the same commit (docs/testing.md); local runs draw new ones each time."""


def shared_path(variable: str, relative: str, marker: str) -> Path | None:
    """A folder or file of ../shared (or the one an environment variable names), if it holds `marker`."""
    candidate = Path(os.environ.get(variable, SHARED_DIR / relative))
    return candidate if (candidate / marker if marker else candidate).exists() else None


def shared_crd_dir() -> Path | None:
    return shared_path("FAB_CRD_DIR", "crds", "index.json")


def _require(found: Path | None, reason: str) -> Path:
    if found is None:
        if os.environ.get("FAB_REQUIRE_SHARED") == "1":
            pytest.fail(f"{reason}; FAB_REQUIRE_SHARED=1 forbids skipping these tests")
        pytest.skip(reason)
    return found


@pytest.fixture(scope="session")
def crd_dir() -> Path:
    return _require(shared_crd_dir(), "upstream CRDs not found at ../shared/crds (set FAB_CRD_DIR)")


@pytest.fixture(scope="session")
def chart_dir() -> Path:
    return _require(shared_path("FAB_CHART_DIR", "charts", "index.json"), "chart packages not found at ../shared/charts (set FAB_CHART_DIR)")


@pytest.fixture(scope="session")
def helm() -> Path:
    return _require(shared_path("FAB_HELM", "tools/helm", ""), "no helm at ../shared/tools/helm (set FAB_HELM)")


@pytest.fixture(scope="session")
def releases_of(chart_dir, helm):
    """stack -> (every Helm release of its render through `helm template`, the charts ../shared/charts lacks)."""
    return lambda stack: helm_rendered(stack, chart_dir, helm)


@pytest.fixture
def small(chart_dir, helm):
    """The smallest site's plan, config and rendered releases (fabctl check's input), a fresh copy per test."""
    from check_helpers import small_deploy

    return small_deploy(chart_dir, helm)


@pytest.fixture(scope="session")
def small_plan() -> Plan:
    """The smallest site's render (small_site.py), shared by the session: copy what a test changes."""
    return render_small(small_site())


@pytest.fixture(scope="session")
def full_plan() -> Plan:
    """The render of the small site with every optional part once (small_site.full_site), shared by the session."""
    return render_small(full_site())


@pytest.fixture(scope="session", params=STACKS)
def plan(request: pytest.FixtureRequest) -> Plan:
    return rendered(request.param)


@pytest.fixture(scope="session")
def plan_a() -> Plan:
    return rendered("site-a")


@pytest.fixture(scope="session")
def plan_b() -> Plan:
    return rendered("site-b")


@pytest.fixture(scope="session", autouse=True)
def renders(tmp_path_factory: pytest.TempPathFactory):
    """Every render of the session forks from one preloaded renderer, and each distinct request runs once for all the
    session's processes (fabctl.runs); each Helm render and chart-value trial too (fabctl.helm.render_cache), in the
    folder fabctl's commands use as their cache (FAB_CACHE_DIR, inherited by the ones tests start), so that no test writes
    to the user's cache. The workers of a parallel run share the folders; a new session starts with empty ones."""
    from fabctl import helm, runs
    from fabctl.commands.charts import CACHE_VARIABLE, PROGRAM_RENDERS

    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    os.environ[CACHE_VARIABLE] = str(shared / "fab-cache")
    renders = shared / "fab-cache" / "renders"  # where fabctl's commands keep them (fabctl.commands.charts.render_cache_folder)
    with runs.preloaded(), runs.cached(renders / PROGRAM_RENDERS), helm.render_cache(renders):
        yield


@pytest.fixture(scope="session")
def grpc_pack():
    """The policy pack as the Pulumi CLI runs it, started once per stack config for the session (fabctl.policy.analyzer):
    for the tests that prove the Analyzer gRPC service itself; the others analyze in process (analyze_in_process)."""
    from fabctl.policy import analyzer

    with analyzer() as packs:
        yield packs
