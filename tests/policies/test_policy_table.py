"""docs/policies.md's rule table is generated from the rules' declarations (`python -m fabctl.policy_table`), and the
pack is assembled from the rule modules in the places the rules declare."""

from __future__ import annotations

import types

import pytest
from pulumi_policy import ResourceValidationPolicy

from fabctl import policy_table
from fabctl.policy_table import PAGE, main, pack_policies, with_table
from rules._policy import pack_order, resource_rule


def _rule(name: str, place: int, docs: str = "does one thing") -> ResourceValidationPolicy:
    return resource_rule(name, "Does one thing.", place=place, docs=docs)(lambda args, report: None)


def test_the_committed_policy_table_is_current(capsys):
    assert (main(["--check"]), capsys.readouterr().out) == (0, "policy table is up to date\n")


def test_fails_when_the_policy_table_is_stale(tmp_path, capsys):
    page = tmp_path / "policies.md"
    page.write_text(PAGE.read_text().replace("| fab-training-kueue-managed | advisory |", "| fab-training-kueue-managed | mandatory |"))
    assert main(["--check"], page=page) == 1
    assert capsys.readouterr().err == f"error: {page} is out of date; run: python -m fabctl.policy_table\n"


def test_the_command_rewrites_a_stale_table(tmp_path):
    page = tmp_path / "policies.md"
    page.write_text(PAGE.read_text().replace("| fab-pinned-versions |", "| fab-pinned-version |"))
    assert main([], page=page) == 0
    assert page.read_text() == PAGE.read_text()


def test_the_table_lists_every_policy_in_the_packs_order_with_its_level():
    rows = [line.split(" | ")[:2] for line in PAGE.read_text().splitlines() if line.startswith("| fab-")]
    assert rows
    assert rows == [[f"| {p.name}", p.enforcement_level.value] for p in pack_policies()]


def test_fails_when_the_page_lost_its_markers():
    with pytest.raises(ValueError, match="^docs/policies.md lost its generated-block markers$"):
        with_table("# Policy pack\n", pack_policies())


def test_fails_when_a_rules_docs_text_would_break_the_table():
    with pytest.raises(ValueError, match=r"^fab-piped's docs text has a '\|' or a line break, which would break the table's row$"):
        policy_table.generated_table([_rule("fab-piped", 10, docs="allows a | b")])


def test_the_pack_takes_every_rule_of_a_module_in_the_places_they_declare():
    module = types.ModuleType("rules.example")
    module.second, module.first = _rule("fab-second", 20), _rule("fab-first", 10)
    assert [p.name for p in pack_order([module])] == ["fab-first", "fab-second"]


def test_fails_when_two_rules_share_a_place():
    module = types.ModuleType("rules.example")
    module.one, module.other = _rule("fab-one", 10), _rule("fab-other", 10)
    with pytest.raises(ValueError, match="^policies fab-one and fab-other have the same place 10$"):
        pack_order([module])


def test_fails_when_two_rules_share_a_name():
    one, other = types.ModuleType("rules.one"), types.ModuleType("rules.other")
    one.rule, other.rule = _rule("fab-twice", 10), _rule("fab-twice", 20)
    with pytest.raises(ValueError, match="^policies fab-twice and fab-twice have the same name fab-twice$"):
        pack_order([one, other])


def test_fails_when_a_policy_has_no_place():
    module = types.ModuleType("rules.example")
    module.rule = ResourceValidationPolicy(name="fab-unplaced", description="Has no place.", validate=lambda args, report: None)
    with pytest.raises(ValueError, match="^policy fab-unplaced has no place in the pack: declare it with @stack_rule or "
                                         "@resource_rule$"):
        pack_order([module])
