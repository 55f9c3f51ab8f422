"""tests/engines.py: which binary an engine test runs (FAB_<NAME>, then the one `make setup` installs beside the
virtualenv's Python, then the PATH), and the skip that says how to get one."""

from __future__ import annotations

import sys

import engines
import pytest
from engines import engine


@pytest.fixture
def kubectls(tmp_path, monkeypatch):
    """A kubectl in each place: named by FAB_KUBECTL, beside Python (venv/bin), and on the PATH."""
    places = {}
    for place in ("variable", "venv", "path"):
        (tmp_path / place).mkdir()
        places[place] = tmp_path / place / "kubectl"
        places[place].write_text("#!/bin/sh\n")
        places[place].chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(tmp_path / "venv" / "python"))
    monkeypatch.setenv("PATH", str(tmp_path / "path"))
    monkeypatch.delenv("FAB_KUBECTL", raising=False)
    monkeypatch.delenv("FAB_REQUIRE_ENGINES", raising=False)
    return places


def test_fab_kubectl_names_the_kubectl_first(kubectls, monkeypatch):
    monkeypatch.setenv("FAB_KUBECTL", str(kubectls["variable"]))
    assert engine("kubectl") == kubectls["variable"]


def test_kubectl_is_the_virtualenvs_before_the_one_on_the_path(kubectls):
    assert engine("kubectl") == kubectls["venv"]


def test_kubectl_is_the_one_on_the_path_last(kubectls):
    kubectls["venv"].unlink()
    assert engine("kubectl") == kubectls["path"]


def test_a_debian_engine_is_not_looked_for_beside_python(kubectls, tmp_path):
    (tmp_path / "venv" / "promtool").write_text("#!/bin/sh\n")
    with pytest.raises(pytest.skip.Exception) as skipped:
        engine("promtool")
    assert str(skipped.value) == (
        "no promtool: install Debian's prometheus package (apt-get install prometheus), or set FAB_PROMTOOL")


def test_fails_when_engines_are_required_and_there_is_no_kubectl(kubectls, monkeypatch):
    for found in kubectls.values():
        found.unlink()
    monkeypatch.setenv("FAB_REQUIRE_ENGINES", "1")
    with pytest.raises(pytest.fail.Exception) as failed:
        engine("kubectl")
    assert str(failed.value) == (
        "no kubectl: make setup (python -m fabctl.helm_install) installs the pinned one as venv/bin/kubectl, or set "
        "FAB_KUBECTL; FAB_REQUIRE_ENGINES=1 forbids skipping the engine tests")


def test_the_engine_make_setup_installs_is_the_pinned_one():
    from fabctl.helm_install import PINNED

    assert set(engines.BESIDE_PYTHON) == {b.name for b in PINNED.binaries} - {"helm"}
