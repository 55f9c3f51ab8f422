"""Chart values that move every image a chart runs to the site's registry (config `registry`, docs/airgap.md).

One entry per chart the platform installs, by chart name: an engine's charts in its module (components/engines, each
`EngineChart`'s `images`, which `EngineScope.release` hands to `helm_release`), every other chart's here, in the module
of the part of the design that installs it. Each is the chart's global registry setting where it has one, its
per-component image keys otherwise, the image fields of the custom resources it renders, the images its operator
launches at run time (set explicitly, since a default compiled into an operator is upstream's), and the site's pull
Secret wherever the chart takes one. `helm_release` lays them over the component's own values; without a registry there
are none, and the releases are exactly as before.

Each chart takes its images apart differently (registry, repository and tag; a name and a tag; one whole reference): every
entry keeps the chart's own tag and moves the repository under the mirror (`Registry.ref`), so that a chart upgrade
brings its own tags along. Images a component sets itself (the Spark images, StarRocks' FE and CN, the single-user
images from config) are moved where they are set, by `Registry.image`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from components.airgap import gpu, network, observability, storage
from components.registry import Registry
from components.versions import HelmChart

ChartValues = Callable[[Registry], dict[str, Any]]
CHART_VALUES: dict[str, ChartValues] = {**network.VALUES, **storage.VALUES, **gpu.VALUES, **observability.VALUES}
"""Chart name -> the values that move its images to the registry (the engines' charts: components/engines `CHART_IMAGES`)."""


def chart_values(chart: HelmChart, registry: Registry, images: ChartValues | None = None) -> dict[str, Any]:
    """The values that pull every image of `chart` from `registry`'s mirror; none without a mirror. `images`: those its
    engine declares, for an engine's chart."""
    if not registry.mirrored:
        return {}
    images = images or CHART_VALUES.get(chart.chart)
    if images is None:
        raise LookupError(f"chart {chart.chart} has no image values in components/airgap: add them (an engine's chart: to its "
                          "EngineChart in components/engines), or a site with a registry would pull its images from the internet")
    return images(registry)


def mirror_repository(registry: Registry, source: str) -> str:
    """The mirror's repository of `source` (a repository without a tag): `<images>/<source host>/<path>`."""
    ref = registry.ref(source)
    return f"{ref.registry}/{ref.repository}"


def named_secrets(registry: Registry) -> list[dict[str, str]]:
    """`imagePullSecrets` as most charts take it (a list of `{name: ...}`), or none."""
    return registry.pull_secrets
