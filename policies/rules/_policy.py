"""How a rule becomes a CrossGuard policy: its stable id, one-sentence description, level and settings, written above its code.

`@stack_rule(...)` and `@resource_rule(...)` turn a validate function into the Policy of that name, so a rule is
declared once, where it is written, and `rules/__init__.py` lists the policies in the README's order.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pulumi_policy import (
    EnforcementLevel,
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


def _declared(kind: type, name: str, description: str, level: EnforcementLevel,
              settings: Settings | None) -> Callable[[Any], Any]:
    def declare(validate: Any) -> Any:
        return kind(name=name, description=description, enforcement_level=level, validate=validate,
                    config_schema=PolicyConfigSchema(properties=settings) if settings else None)

    return declare


def stack_rule(name: str, description: str, level: EnforcementLevel = EnforcementLevel.MANDATORY,
               settings: Settings | None = None) -> Callable[[StackValidate], StackValidationPolicy]:
    """A rule over the whole stack (it compares resources); mandatory unless `level` says otherwise."""
    return _declared(StackValidationPolicy, name, description, level, settings)


def resource_rule(name: str, description: str, level: EnforcementLevel = EnforcementLevel.MANDATORY,
                  settings: Settings | None = None) -> Callable[[ResourceValidate], ResourceValidationPolicy]:
    """A rule over one resource at a time; mandatory unless `level` says otherwise."""
    return _declared(ResourceValidationPolicy, name, description, level, settings)
