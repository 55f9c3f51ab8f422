"""The catalog of the components, declared to the config (issue 38: the config is the ground floor).

The config never imports a component: what it must know of them, it reads from components.config.declared, and
this module, on the top floor, fills it once when it is imported: every compute engine's needs (components/engines,
each from its `Engine`) and the flows the components open, in the order the flow table adds them. Import it before a
site is parsed: the program (__main__.py), fabctl where it parses a site, the tests (tests/conftest.py).
"""

from __future__ import annotations

from components.config import EngineNeeds, declare
from components.engines import ENGINES, Engine


def needs(engine: Engine) -> EngineNeeds:
    """What the config must know of an engine."""
    return EngineNeeds(
        name=engine.name, description=engine.description, pool=engine.pool.name,
        ui_host=engine.ui.host if engine.ui is not None else None, buckets=engine.buckets,
        catalog_role=engine.catalog_role, section=engine.section,
    )


declare(engines=[needs(engine) for engine in ENGINES.values()], flows=())
