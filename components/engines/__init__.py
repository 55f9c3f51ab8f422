"""The compute engines, each declared once in its own module of this package (DESIGN section 2, compute row).

`ENGINES` holds every module's `ENGINE`, by name: StorageCluster gives each one its S3 access and Polaris
principal, ComputeCluster deploys each one that `compute.<name>.enabled` switches on. Adding an engine is a
new module here (an `Engine` with its config section, its charts' image values and pod placement, and its deploy
function) and its pins in versions.py; components/catalog.py declares it to the config, and nothing else names it
(docs/architecture.md, "Adding an engine").
"""

from __future__ import annotations

import importlib
import pkgutil

from components.airgap import ChartValues
from components.engines._base import (
    BATCH,
    GATEWAY,
    INTERACTIVE,
    POOL_LABEL,
    POOLS,
    Engine,
    EngineChart,
    EngineScope,
    Pool,
    Quota,
    Ui,
)


def _discover() -> dict[str, Engine]:
    engines = {}
    for module in pkgutil.iter_modules(__path__):
        if module.name.startswith("_"):
            continue
        engine = importlib.import_module(f"{__name__}.{module.name}").ENGINE
        if engine.name in engines:
            raise ValueError(f"components/engines/{module.name}.py declares the engine {engine.name!r}, which another module "
                             "declares already: an engine's name is its namespace and config section, one module each")
        engines[engine.name] = engine
    charts = [c.chart.chart for engine in engines.values() for c in engine.charts]
    if len(charts) != len(set(charts)):
        twice = sorted({chart for chart in charts if charts.count(chart) > 1})
        raise ValueError(f"the charts {twice} are declared by more than one engine: one engine owns a chart's placement")
    return dict(sorted(engines.items()))


ENGINES: dict[str, Engine] = _discover()
"""Every engine, by name."""
CHART_IMAGES: dict[str, ChartValues] = {c.chart.chart: c.images for engine in ENGINES.values() for c in engine.charts}
"""Chart name -> the values that move its images to the site's registry, as its engine declares them (the other charts'
are in components/airgap)."""

__all__ = ["BATCH", "CHART_IMAGES", "ENGINES", "GATEWAY", "INTERACTIVE", "POOLS", "POOL_LABEL", "Engine", "EngineChart", "EngineScope",
           "Pool", "Quota", "Ui"]
