"""What the config knows of the components without importing them (issue 38: the config is the ground floor).

The config reads the compute engines' needs (their pool, UI host, S3 bucket access, Polaris catalog role and config
section) and the flows the components open from here, never from the components' modules: those import the config.
components/catalog.py, on the top floor, imports the components and declares them once (`components.config.declare`,
which also completes `SiteConfig`'s `compute` section); reading this registry before then raises `NotDeclared`, so that
a site is never judged against an empty table.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pydantic import BaseModel


@dataclass(frozen=True)
class BucketAccess:
    """Bucket classes a principal may read, and classes it may read and write."""

    read: tuple[str, ...] = ()
    read_write: tuple[str, ...] = ()
    description: str = ""


@dataclass(frozen=True)
class EngineNeeds:
    """What the config must know of a compute engine (components/engines declares the engine itself)."""

    name: str
    """Its name, also its section under `compute` and its namespace."""
    description: str
    pool: str
    """The name of the compute node pool its pods run in (batch or interactive)."""
    ui_host: str | None
    """First label of its UI's host name, `<host>.<site domain>`; none without a UI."""
    buckets: BucketAccess | None
    """Its S3 access (its Secret `s3-<name>`); none without S3 keys."""
    catalog_role: str | None
    """Its Polaris catalog role (its Secret `polaris-<name>`); none without a Polaris principal."""
    section: type[BaseModel]
    """The model of its section of the site's `compute` config."""

    def config(self, compute: Any) -> Any:
        """Its section of the site's `compute` config."""
        return getattr(compute, self.name)


@dataclass(frozen=True)
class FlowSource:
    """Flows a component opens, as a function of the site: flow name -> Flow (none while the component is off)."""

    opens: Callable[[Any], dict[str, Any]]
    """The site (a `SiteConfig`) -> flow name -> `Flow`; named by neither type here, both being above this module (the
    names of config keys read this registry: components.config.names)."""
    replaces: bool = False
    """Whether its flows replace a stack's own of the same name (otherwise the stack's own is kept)."""


class NotDeclared(RuntimeError):
    """The registry was read before components/catalog.py declared the components."""


_engines: dict[str, EngineNeeds] | None = None
_flows: tuple[FlowSource, ...] | None = None


def fill(engines: Mapping[str, EngineNeeds], flows: Iterable[FlowSource]) -> None:
    """Declares the components, once (components.config.declare, called by components/catalog.py)."""
    global _engines, _flows
    if _engines is not None:
        raise RuntimeError("the components are declared already: components/catalog.py declares them once")
    _engines, _flows = dict(engines), tuple(flows)


def _not_declared() -> NotDeclared:
    return NotDeclared(
        "the components are not declared: import components.catalog before parsing a site (it declares the compute "
        "engines and the flows the components open)"
    )


def engines() -> dict[str, EngineNeeds]:
    """Every compute engine's needs, by name."""
    if _engines is None:
        raise _not_declared()
    return _engines


def flow_sources() -> tuple[FlowSource, ...]:
    """The components' flows, in the order the flow table adds them."""
    if _flows is None:
        raise _not_declared()
    return _flows
