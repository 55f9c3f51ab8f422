"""SiteConfig: the one schema of a site stack, read from `fab-platform:site` (DESIGN section 4, "Config first").

The root model puts the domain schemas (components.config.schema; their fields together in
components.config.schema.site) and the derived views (components.config.views) together, and runs its
cross-field checks (components.config.checks) once the whole site is parsed.
"""

from __future__ import annotations

from collections.abc import Iterable

from pydantic import Field, create_model, model_validator

from components.config import declared
from components.config.checks import site_problems
from components.config.declared import EngineNeeds, FlowSource
from components.config.problems import SiteRuleError
from components.config.schema.compute import ComputeConfig
from components.config.views import SiteViews


class SiteConfig(SiteViews):
    """One fab site: its clusters, how they are connected and which flows may cross between them."""

    @model_validator(mode="after")
    def _site_rules(self) -> SiteConfig:
        problems = list(site_problems(self))
        if problems:
            raise SiteRuleError(problems)
        return self


def declare(engines: Iterable[EngineNeeds], flows: Iterable[FlowSource]) -> None:
    """Declares the components to the config, once (components/catalog.py): the compute engines' needs and the flow
    sources in the flow table's order, and completes SiteConfig's `compute` with the section of each engine that has no
    field of its own (`compute.<name>`, its declared model); an engine's existing field must be of its declared model."""
    needs = {engine.name: engine for engine in engines}
    sections = {}
    for name, engine in needs.items():
        field = ComputeConfig.model_fields.get(name)
        if field is None:
            required = any(f.is_required() for f in engine.section.model_fields.values())
            default = {} if required else {"default_factory": engine.section}
            sections[name] = (engine.section, Field(description=f"{engine.description}.", **default))
        elif field.annotation is not engine.section:
            raise TypeError(f"engine {name!r} declares the section {engine.section.__name__}, but compute.{name} is "
                            f"{getattr(field.annotation, '__name__', field.annotation)}")
    compute = create_model("ComputeConfig", __base__=ComputeConfig, __doc__=ComputeConfig.__doc__,
                           __module__=ComputeConfig.__module__, **sections) if sections else ComputeConfig
    # pydantic resolves the forward reference `ComputeSections` of SiteSchema's `compute` from this namespace.
    SiteConfig.model_rebuild(_types_namespace={"ComputeSections": compute})
    # Filled last: if the model cannot be completed, the registry stays empty and the error is this one, not "declared".
    declared.fill(needs, flows)
