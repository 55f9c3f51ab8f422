"""The checked-in stacks on an air-gapped site (issue 21, docs/airgap.md): with a registry added to a copy of each stack
file, every chart and every image of the program's objects and of every rendered chart object comes from it, and
`fabctl mirror` lists them all."""

from __future__ import annotations

import copy
from functools import cache

import pytest
from airgap_cases import CHART_REPOSITORY, FILES, MIRROR, MIRROR_RULES, SECRETS, with_registry
from helpers import STACKS, stack_config

from components import versions
from components.config import parse_site
from components.registry import ImageRef
from components.versions import NODE_OS_TAGS
from fabctl.check import check
from fabctl.check.mirror import object_images
from fabctl.check.picture import Picture
from fabctl.helm import ChartPackages, render_releases
from fabctl.mirror import manifest
from fabctl.render import HELM_RELEASE_TYPE, PROJECT_DIR, render_config
from fabctl.stackfile import SITE_KEY


@cache
def _air_gapped(stack: str, chart_dir, helm):
    config = stack_config(stack)
    with_registry(config[SITE_KEY], files=FILES)
    config.update(copy.deepcopy(SECRETS))
    plan = render_config(stack, config)
    releases, missing = render_releases(plan, ChartPackages(chart_dir), helm, PROJECT_DIR)
    return plan, parse_site(config[SITE_KEY]), releases, missing


@pytest.fixture(params=STACKS)
def air_gapped(request, chart_dir, helm):
    return _air_gapped(request.param, chart_dir, helm)


@cache
def _checked(stack: str, chart_dir, helm):
    return check(*_air_gapped(stack, chart_dir, helm))


@pytest.fixture(params=STACKS)
def air_gapped_check(request, chart_dir, helm):
    """The deploy check of an air-gapped stack (without the chart-value trials), run once."""
    return _checked(request.param, chart_dir, helm)


def test_no_object_of_an_air_gapped_stack_reaches_outside_the_registry(air_gapped_check):
    assert air_gapped_check.releases
    assert [f.line() for f in air_gapped_check.findings if f.rule in MIRROR_RULES] == []


def test_an_air_gapped_stack_passes_the_deploy_check(air_gapped_check):
    assert [f.line() for f in air_gapped_check.errors] == []


def test_every_image_of_an_air_gapped_stack_is_under_the_prefix(air_gapped):
    plan, site, releases, missing = air_gapped
    images = [ref for placed in Picture(plan, site, releases, missing).placed for _, ref in object_images(placed)]
    assert len(images) > 50
    assert sorted({ref for ref in images if not ref.startswith(f"{MIRROR}/")}) == []


def test_every_chart_of_an_air_gapped_stack_comes_from_the_registry(air_gapped):
    plan = air_gapped[0]
    charts = [r["inputs"]["chart"] for r in plan.of_type(HELM_RELEASE_TYPE)]
    assert charts
    assert [c for c in charts if not c.startswith(f"{CHART_REPOSITORY}/")] == []


def test_mirror_lists_every_image_and_chart_of_an_air_gapped_stack(air_gapped):
    plan, site, releases, missing = air_gapped
    found = manifest(plan, site, releases, missing, node_os=["ubuntu24.04"])
    images = {ref for placed in Picture(plan, site, releases, missing).placed for _, ref in object_images(placed)}
    # The drivers are listed with the tag their operators pull: the nodes' OS appended.
    by_os = {ref for ref in images if ImageRef.parse(ref).repository.split("/", 1)[1] in NODE_OS_TAGS}
    assert by_os
    assert (found.outside, sorted(images - by_os - {i.mirror for i in found.images})) == ([], [])
    assert {f"{ref.rsplit(':', 1)[0]}:{ImageRef.parse(ref).tag}-ubuntu24.04" for ref in by_os if "nvidia/driver" in ref} <= \
        {i.mirror for i in found.images}
    assert {c.name for c in found.charts} == {r["inputs"]["chart"].rsplit("/", 1)[-1] for r in plan.of_type(HELM_RELEASE_TYPE)}


def test_mirror_lists_what_the_site_pulls_beyond_its_objects(air_gapped):
    """The acceptance jobs' images, and the user servers' image the hub reads from its configuration Secret."""
    plan, site, releases, missing = air_gapped
    mirrored = {i.source for i in manifest(plan, site, releases, missing, node_os=["ubuntu24.04"]).images}
    assert {str(ImageRef.parse(versions.VERIFY_PROBE_IMAGE)), versions.VERIFY_WARP_IMAGE,
            "quay.io/jupyterhub/k8s-singleuser-sample:4.4.0"} <= mirrored


def test_the_policy_pack_passes_an_air_gapped_stack(air_gapped):
    """The rules find every release by its chart's name, from the registry too (policies/rules/_k8s.chart_name)."""
    from fabctl.policy import analyze_in_process

    assert [f"{v.policy}: {v.message}" for v in analyze_in_process(air_gapped[0])] == []
