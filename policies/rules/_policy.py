"""How a rule becomes a CrossGuard policy: its stable id, one-sentence description, level, settings, place in the pack and
row of docs/policies.md, written above its code.

`@stack_rule(...)` and `@resource_rule(...)` turn a validate function into the Policy of that name, so a rule is
declared once, where it is written; `rules/__init__.py` gathers the policies of every rule module and `pack_order`
puts them in their places. The table of docs/policies.md is generated from the same declarations
(`python -m fabctl.policy_table`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from pulumi_policy import (
    EnforcementLevel,
    Policy,
    PolicyConfigSchema,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)

Settings = dict[str, dict[str, Any]]
"""A rule's settings: the JSON Schema of each property a policy config file may set for it."""

StackValidate = Callable[[StackValidationArgs, ReportViolation], None]
ResourceValidate = Callable[[ResourceValidationArgs, ReportViolation], None]


@dataclass(frozen=True)
class Row:
    """A rule's place in the pack, and what docs/policies.md's table says it enforces."""

    place: int
    """Policies are ordered by it, in the pack (what the Pulumi CLI lists) and in the table; numbers go in tens, so a
    new rule slots in between two others without renumbering."""
    docs: str
    """The table's "rule" cell: what the rule enforces, in more detail than the one-sentence description."""


ROW = "fab_row"
"""The attribute of a declared policy that holds its Row (the policy SDK's classes have no field for it)."""


def _declared(kind: type, name: str, description: str, level: EnforcementLevel,
              settings: Settings | None, row: Row) -> Callable[[Any], Any]:
    def declare(validate: Any) -> Any:
        policy = kind(name=name, description=description, enforcement_level=level, validate=validate,
                      config_schema=PolicyConfigSchema(properties=settings) if settings else None)
        setattr(policy, ROW, row)
        return policy

    return declare


def stack_rule(name: str, description: str, level: EnforcementLevel = EnforcementLevel.MANDATORY,
               settings: Settings | None = None, *, place: int, docs: str) -> Callable[[StackValidate], StackValidationPolicy]:
    """A rule over the whole stack (it compares resources); mandatory unless `level` says otherwise."""
    return _declared(StackValidationPolicy, name, description, level, settings, Row(place, docs))


def resource_rule(name: str, description: str, level: EnforcementLevel = EnforcementLevel.MANDATORY,
                  settings: Settings | None = None, *, place: int,
                  docs: str) -> Callable[[ResourceValidate], ResourceValidationPolicy]:
    """A rule over one resource at a time; mandatory unless `level` says otherwise."""
    return _declared(ResourceValidationPolicy, name, description, level, settings, Row(place, docs))


def row_of(policy: Policy) -> Row:
    """The Row a policy was declared with."""
    return getattr(policy, ROW)


def pack_order(modules: Iterable[ModuleType]) -> list[Policy]:
    """Every policy the modules declare, each once, in the order of their places.

    A policy without a Row (made without `stack_rule` or `resource_rule`) and two policies with one name or one place
    are refused: the pack's order would be left to chance, or a rule shadowed."""
    found: dict[int, Policy] = {}
    for module in modules:
        for value in vars(module).values():
            if isinstance(value, Policy):
                found[id(value)] = value
    policies = list(found.values())
    for policy in policies:
        if not isinstance(getattr(policy, ROW, None), Row):
            raise ValueError(f"policy {policy.name} has no place in the pack: declare it with @stack_rule or @resource_rule")
    for what, key in (("name", lambda p: p.name), ("place", lambda p: row_of(p).place)):
        seen: dict[Any, str] = {}
        for policy in policies:
            if key(policy) in seen:
                raise ValueError(f"policies {seen[key(policy)]} and {policy.name} have the same {what} {key(policy)}")
            seen[key(policy)] = policy.name
    return sorted(policies, key=lambda p: row_of(p).place)
