"""The pack knows a release's chart by its name wherever the chart comes from: its upstream repository, or an air-gapped
site's registry (`oci://<registry>/<path>/<chart>`), so a registry does not hide a release from the rules."""

from __future__ import annotations

import pytest
from rules._k8s import UNKNOWN, chart_name


@pytest.mark.parametrize("chart", ["kueue", "oci://registry.k8s.io/kueue/charts/kueue", "oci://registry.fab.internal/charts/kueue"])
def test_a_chart_is_known_by_its_name_from_any_repository(chart):
    assert chart_name(chart) == "kueue"


def test_an_unknown_chart_stays_unknown():
    assert chart_name(UNKNOWN) is UNKNOWN
