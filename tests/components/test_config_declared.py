"""The config knows the components only by their declarations (components/config/declared.py), which
components/catalog.py makes once: read before then, the config fails closed; an engine's section comes from its
declaration."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from components.config import NotDeclared, declared, parse_site
from fabctl.render import PROJECT_DIR
from small_site import small_site

NOT_DECLARED = (
    "the components are not declared: import components.catalog before parsing a site (it declares the compute engines "
    "and the flows the components open)"
)


def test_fails_when_a_site_is_parsed_before_the_components_are_declared(monkeypatch):
    monkeypatch.setattr(declared, "_engines", None)
    with pytest.raises(NotDeclared) as info:
        parse_site(small_site())
    assert str(info.value) == NOT_DECLARED


def test_fails_when_the_flows_are_read_before_they_are_declared(monkeypatch):
    monkeypatch.setattr(declared, "_flows", None)
    with pytest.raises(NotDeclared) as info:
        declared.flow_sources()
    assert str(info.value) == NOT_DECLARED


def test_fails_when_the_components_are_declared_twice():
    with pytest.raises(RuntimeError) as info:
        declared.fill({}, ())
    assert str(info.value) == "the components are declared already: components/catalog.py declares them once"


DECLARED_FLINK = textwrap.dedent('''
    import sys
    sys.path.insert(0, "tests")
    from components.config import ConfigError, EngineNeeds, ServiceToggle, declare, parse_site
    from small_site import small_site

    declare(engines=[EngineNeeds(name="flink", description="Apache Flink", pool="batch", ui_host=None, buckets=None,
                                 catalog_role=None, section=ServiceToggle)], flows=())
    site = small_site()
    print(parse_site(site).compute.flink.enabled)
    site["compute"]["flink"] = {"enabled": False}
    print(parse_site(site).compute.flink.enabled)
    site["compute"]["flink"] = {"enabld": False}
    try:
        parse_site(site)
    except ConfigError as error:
        print(error.lines)
''')


def test_a_declared_engine_without_a_field_gets_its_section_and_it_is_strict():
    """In a process of its own: the tests' process has declared the real engines, once."""
    run = subprocess.run([sys.executable, "-c", DECLARED_FLINK], cwd=PROJECT_DIR, capture_output=True, text=True, check=True)
    assert run.stdout.splitlines() == [
        "True", "False", "['fab-platform:site.compute.flink.enabld: unknown key; allowed keys: enabled']",
    ]
