"""The rule table of docs/policies.md, generated from the policy pack's own declarations.

The page's prose is written by hand; the table between the markers below is rewritten by
`python -m fabctl.policy_table` and checked by `--check`, so the table cannot drift from the pack: each row is a rule's
id, its enforcement level, the `docs` text and settings of its `@stack_rule`/`@resource_rule`, in the pack's order.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from fabctl import generated_block
from fabctl.generated_block import with_block
from fabctl.runs import FABCTL_HOME

PAGE = FABCTL_HOME / "docs" / "policies.md"
POLICIES_DIR = FABCTL_HOME / "policies"
COMMAND = "python -m fabctl.policy_table"


def pack_policies() -> list[Any]:
    """The pack's policies in its order, imported from policies/ as the pack imports them (`import rules`)."""
    if str(POLICIES_DIR) not in sys.path:
        sys.path.insert(0, str(POLICIES_DIR))
    import rules

    return list(rules.POLICIES)


def _row(cells: list[str]) -> str:
    return "|" + "|".join(f" {cell} " if cell else " " for cell in cells) + "|"


def generated_table(policies: list[Any]) -> str:
    """One row per policy: id, level, what it enforces (its declared docs text) and the settings a policy config may set."""
    from rules._policy import row_of

    lines = ["| id | level | rule | settings |", "|---|---|---|---|"]
    for policy in policies:
        if "|" in row_of(policy).docs or "\n" in row_of(policy).docs:
            raise ValueError(f"{policy.name}'s docs text has a '|' or a line break, which would break the table's row")
        settings = ", ".join(f"`{key}`" for key in (policy.config_schema.properties if policy.config_schema else {}))
        lines.append(_row([policy.name, policy.enforcement_level.value, row_of(policy).docs, settings]))
    return "\n".join(lines)


def with_table(page: str, policies: list[Any]) -> str:
    """The page with its generated block replaced by the current table."""
    return with_block(page, COMMAND, generated_table(policies), "docs/policies.md")


def main(argv: list[str] | None = None, page: Path = PAGE) -> int:
    """Write, or with `--check` only check, the page's table; 1 when `--check` finds it stale."""
    return generated_block.main(argv, page, COMMAND, "write docs/policies.md's rule table from the policy pack",
                                lambda text: with_table(text, pack_policies()), "policy table")


if __name__ == "__main__":
    sys.exit(main())
