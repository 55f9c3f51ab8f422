"""An evaluator of Trino's file-based system access control (`access-control.name=file`), for the rules the program
writes: who may use a catalog, select from or write to a table, own a schema, see or kill a query.

No Trino rule evaluator installs from PyPI (Trino's is the Java class `FileBasedSystemAccessControl` of the
trino-main module), so this follows that class and the pinned version's documentation
(docs/src/main/sphinx/security/file-system-access-control.md, Trino 480) rule by rule:
- each section (`catalogs`, `schemas`, `tables`, `queries`) is read top to bottom and the FIRST rule that matches
  decides; no matching rule denies;
- a section that is missing grants everything of its kind (catalogs `all`, every table privilege, schema ownership,
  every query); an empty section denies;
- a rule's `user`, `group`, `catalog`, `schema`, `table` (and `queryOwner`) are Java regular expressions matched
  against the WHOLE name (`Matcher.matches()`, here `re.fullmatch`); a missing one matches anything; `group` matches
  when at least one of the user's groups matches it, so a user in no group matches no rule naming a group;
- catalog rules: `allow` is `all`, `read-only` or `none` (legacy `true`/`false` are `all`/`none`); Trino appends its
  own last rule that lets anyone use the `system` catalog; a table privilege needs the catalog at `read-only` or more
  (`all` for writes);
- query rules: `allow` lists `execute`, `view`, `kill`; a user always views and kills their own queries.
Only what the program's rules use is modelled: no roles, column masks, row filters, functions or procedures (left
unlisted, which Trino denies but for `system.builtin`).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

ACCESS = {"none": 0, "read-only": 1, "all": 2, True: 2, False: 0}
WRITES = {"INSERT", "DELETE", "UPDATE", "OWNERSHIP"}
SYSTEM_RULE = {"catalog": "system", "allow": "all"}
"""The rule Trino appends to the catalog rules it reads (FileBasedSystemAccessControl: the `system` catalog for anyone)."""


@dataclass(frozen=True)
class Identity:
    """Who runs a query: the user (the token's `preferred_username`) and the groups the group provider gives."""

    user: str
    groups: frozenset[str] = field(default_factory=frozenset)

    @classmethod
    def of(cls, user: str, *groups: str) -> Identity:
        return cls(user, frozenset(groups))


def _matches(pattern: str | None, value: str) -> bool:
    return pattern is None or re.fullmatch(pattern, value) is not None


def _applies(rule: dict[str, Any], who: Identity, **names: str) -> bool:
    if not _matches(rule.get("user"), who.user):
        return False
    if "group" in rule and not any(_matches(rule["group"], g) for g in who.groups):
        return False
    return all(_matches(rule.get(key), value) for key, value in names.items())


@dataclass(frozen=True)
class TrinoRules:
    """The rules file as Trino reads it."""

    rules: dict[str, Any]

    @classmethod
    def parse(cls, text: str) -> TrinoRules:
        return cls(json.loads(text))

    def _first(self, section: str, who: Identity, **names: str) -> dict[str, Any] | None:
        return next((rule for rule in self.rules[section] if _applies(rule, who, **names)), None)

    def catalog_access(self, who: Identity, catalog: str) -> str:
        """`all`, `read-only` or `none`: what the first matching catalog rule allows."""
        if "catalogs" not in self.rules:
            return "all"
        rules = [*self.rules["catalogs"], SYSTEM_RULE]
        rule = next((r for r in rules if _applies(r, who, catalog=catalog)), None)
        level = ACCESS[rule.get("allow", "none")] if rule is not None else 0
        return {0: "none", 1: "read-only", 2: "all"}[level]

    def table_privileges(self, who: Identity, catalog: str, schema: str, table: str) -> frozenset[str]:
        """The privileges the first matching table rule grants, within what the catalog rule allows."""
        level = ACCESS[self.catalog_access(who, catalog)]
        if level == 0:
            return frozenset()
        if "tables" not in self.rules:
            granted = {"SELECT", "GRANT_SELECT", *WRITES}
        else:
            rule = self._first("tables", who, catalog=catalog, schema=schema, table=table)
            granted = set(rule["privileges"]) if rule is not None else set()
        return frozenset(p for p in granted if level == 2 or p not in WRITES)

    def can_select(self, who: Identity, catalog: str, schema: str, table: str) -> bool:
        return "SELECT" in self.table_privileges(who, catalog, schema, table)

    def owns_schema(self, who: Identity, catalog: str, schema: str) -> bool:
        if ACCESS[self.catalog_access(who, catalog)] < 2:
            return False
        if "schemas" not in self.rules:
            return True
        rule = self._first("schemas", who, catalog=catalog, schema=schema)
        return bool(rule and rule.get("owner"))

    def query_access(self, who: Identity, owner: str | None = None) -> frozenset[str]:
        """What `who` may do with a query of `owner` (None: run a new one): `execute`, `view`, `kill`."""
        if owner == who.user:
            return frozenset({"view", "kill"})
        if "queries" not in self.rules:
            return frozenset({"execute", "view", "kill"})
        names = {} if owner is None else {"queryOwner": owner}
        rule = self._first("queries", who, **names)
        allowed = set(rule["allow"]) if rule is not None else set()
        return frozenset(allowed & ({"execute"} if owner is None else {"view", "kill"}))


def properties(text: str) -> dict[str, str]:
    """A Java properties file as Trino's config files are written (key=value lines)."""
    return dict(line.split("=", 1) for line in text.splitlines() if line.strip() and not line.startswith("#"))


def coordinator_rules(objects: list[dict[str, Any]]) -> tuple[dict[str, str], dict[str, str], TrinoRules]:
    """From the objects Trino's release installs (helm template): the coordinator's access-control.properties and
    group-provider.properties, and the rules file access-control.properties names, read from the ConfigMap the chart
    mounts at that folder."""
    maps = {o["metadata"]["name"]: o.get("data") or {} for o in objects if o["kind"] == "ConfigMap"}
    (coordinator,) = [data for name, data in maps.items() if name.endswith("-coordinator") and "config.properties" in data]
    access = properties(coordinator["access-control.properties"])
    groups = properties(coordinator.get("group-provider.properties", ""))
    rules_file = access["security.config-file"].rsplit("/", 1)[1]
    (rules,) = [data[rules_file] for name, data in maps.items() if name.endswith("access-control-volume-coordinator")]
    return access, groups, TrinoRules.parse(rules)
