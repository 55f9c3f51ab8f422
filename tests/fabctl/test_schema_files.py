"""The files generated from the config model: the stack-file JSON Schema and the reference tables."""

from __future__ import annotations

import json

import jsonschema
import pytest
import yaml

from components.config import stack_file_schema
from fabctl.commands.schema import REFERENCE_PATH, SCHEMA_PATH
from fabctl.reference import with_reference
from fabctl.render import PROJECT_DIR
from helpers import STACKS


def test_committed_schema_is_generated_from_the_model():
    assert json.loads(SCHEMA_PATH.read_text()) == stack_file_schema()


def test_committed_reference_is_generated_from_the_model():
    page = REFERENCE_PATH.read_text()
    assert with_reference(page) == page


@pytest.mark.parametrize("stack", STACKS)
def test_stack_file_validates_against_the_schema(stack):
    doc = yaml.safe_load((PROJECT_DIR / f"Pulumi.{stack}.yaml").read_text())
    jsonschema.Draft202012Validator(stack_file_schema()).validate(doc)


@pytest.mark.parametrize("stack", STACKS)
def test_stack_file_points_editors_at_the_schema(stack):
    first = (PROJECT_DIR / f"Pulumi.{stack}.yaml").read_text().splitlines()[0]
    assert first == "# yaml-language-server: $schema=./schema/stack.schema.json"


def test_fails_when_a_stack_file_has_an_unknown_key_under_the_schema():
    doc = yaml.safe_load((PROJECT_DIR / "Pulumi.site-b.yaml").read_text())
    doc["config"]["fab-platform:site"]["clusters"]["gpu"]["podCidr"] = "10.0.0.0/16"
    with pytest.raises(jsonschema.ValidationError, match="'podCidr' was unexpected"):
        jsonschema.Draft202012Validator(stack_file_schema()).validate(doc)


def test_every_section_the_configuration_reference_links_to_exists():
    import re

    page = (PROJECT_DIR / "docs" / "configuration.md").read_text()
    anchors = set(re.findall(r"\]\(#([a-z0-9-]+)\)", page))
    headings = {h.lower() for h in re.findall(r"^### (\w+)$", page, re.MULTILINE)}
    assert anchors
    assert sorted(anchors - headings) == []
