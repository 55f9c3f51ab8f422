"""Chart values that move every image a chart runs to the site's registry (config `registry`, docs/airgap.md).

One entry per chart the platform installs, by chart name, in the module of the part of the design that installs it: the
chart's global registry setting where it has one, its per-component image keys otherwise, the image fields of the
custom resources it renders, the images its operator launches at run time (set explicitly, since a default compiled
into an operator is upstream's), and the site's pull Secret wherever the chart takes one. `helm_release` lays them over
the component's own values; without a registry there are none, and the releases are exactly as before.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from components.airgap import compute, gpu, network, observability, storage
from components.registry import Registry
from components.versions import HelmChart

ChartValues = Callable[[Registry], dict[str, Any]]
CHART_VALUES: dict[str, ChartValues] = {**network.VALUES, **storage.VALUES, **gpu.VALUES, **compute.VALUES, **observability.VALUES}
"""Chart name -> the values that move its images to the registry."""


def chart_values(chart: HelmChart, registry: Registry) -> dict[str, Any]:
    """The values that pull every image of `chart` from `registry`'s mirror; none without a mirror."""
    if not registry.mirrored:
        return {}
    if chart.chart not in CHART_VALUES:
        raise LookupError(f"chart {chart.chart} has no image values in components/airgap: add them, or a site with a registry "
                          "would pull its images from the internet")
    return CHART_VALUES[chart.chart](registry)
