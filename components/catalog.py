"""The catalog of the components, declared to the config (issue 38: the config is the ground floor).

The config never imports a component: what it must know of them, it reads from components.config.declared, and
this module, on the top floor, fills it once when it is imported: every compute engine's needs (components/engines,
each from its `Engine`) and the flows the components open, in the order the flow table adds them. Import it before a
site is parsed: the program (__main__.py), fabctl where it parses a site, the tests (tests/conftest.py).
"""

from __future__ import annotations

from components.config import EngineNeeds, FlowSource, declare
from components.engines import ENGINES, Engine
from components.engines.argocd import argocd_flows
from components.engines.trino import external_catalog_flows
from components.federation import federation_flows
from components.monitors import metrics_flows
from components.notebooks import notebooks_flows
from components.ray import ray_flows
from components.sharing import vendor_flows
from components.training import multikueue_flows


def needs(engine: Engine) -> EngineNeeds:
    """What the config must know of an engine."""
    return EngineNeeds(
        name=engine.name, description=engine.description, pool=engine.pool.name,
        ui_host=engine.ui.host if engine.ui is not None else None, buckets=engine.buckets,
        catalog_role=engine.catalog_role, section=engine.section,
    )


FLOWS = (
    FlowSource(multikueue_flows),
    FlowSource(argocd_flows),
    FlowSource(federation_flows),
    FlowSource(ray_flows),
    FlowSource(external_catalog_flows, replaces=True),
    FlowSource(metrics_flows),
    FlowSource(notebooks_flows),
    FlowSource(vendor_flows),
)
"""The flows the components open, in the order the flow table adds them (after the stack's own or the design's base
flows, before the compute ingress's): the order is the render's, so it does not change."""

declare(engines=[needs(engine) for engine in ENGINES.values()], flows=FLOWS)
