"""The fab-platform rules, one Policy each, gathered from every rule module (those not starting with `_`) and put in
the places they declare (`rules._policy.pack_order`): adding a rule touches its own module only."""

import importlib
import pkgutil

from rules._policy import pack_order

PACK_NAME = "fab-platform"
"""The pack's name, as the Pulumi CLI and the Pulumi Cloud show it."""

RULE_MODULES = [importlib.import_module(f"{__name__}.{module.name}") for module in pkgutil.iter_modules(__path__)
                if not module.name.startswith("_")]
"""The modules that hold rules, by name."""

POLICIES = pack_order(RULE_MODULES)
"""Every rule, in the pack's order: the order the Pulumi CLI lists them in and docs/policies.md's table."""
