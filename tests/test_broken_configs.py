"""The malformed-config corpus: every broken site is refused by `fabctl plan` with one clear line, never a traceback."""

from __future__ import annotations

import copy
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import yaml

from fabctl.render import PROJECT_DIR
from fabctl.stackfile import SITE_KEY
from helpers import copy_project, stack_config
from small_site import full_site, small_site

CASES = yaml.safe_load((Path(__file__).parent / "corpus" / "broken_sites.yaml").read_text())
SMALL_BASES = {"small": small_site, "full": full_site}
"""Bases a case may break instead of a stack file: the smallest site, and the one with every optional part (small_site.py).
A case whose expected line depends on the site's topology (its clusters, teams...) uses one of these, so that a stack
file can grow without changing what the case is refused with."""


def base_config(base: str) -> dict[str, Any]:
    return {SITE_KEY: SMALL_BASES[base]()} if base in SMALL_BASES else copy.deepcopy(stack_config(base))


def apply(case: dict[str, Any]) -> dict[str, Any]:
    config = base_config(case["base"])
    if "replace" in case:
        config[SITE_KEY] = case["replace"]
        return config
    site = config[SITE_KEY]
    for path, value in case.get("set", {}).items():
        *parents, last = path.split(".")
        node = site
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = value
    for path in case.get("delete", []):
        *parents, last = path.split(".")
        node = site
        for part in parents:
            node = node[part]
        del node[last]
    return config


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> dict[str, subprocess.CompletedProcess]:
    """Run the whole corpus once, two cases at a time (the renderer is a subprocess per case)."""
    project = copy_project(tmp_path_factory.mktemp("project"))
    for case in CASES:
        (project / f"Pulumi.{case['name']}.yaml").write_text(yaml.safe_dump({"config": apply(case)}))

    def run(case: dict[str, Any]) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "fabctl", "plan", "--stack", case["name"], "--project-dir", str(project), "--no-policies", "--no-check",
             "--out", str(project / "out")],
            cwd=PROJECT_DIR, capture_output=True, text=True, check=False,
        )

    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(zip([c["name"] for c in CASES], pool.map(run, CASES)))


def test_the_corpus_has_at_least_sixty_distinct_cases():
    names = [c["name"] for c in CASES]
    assert len(names) >= 60 and len(set(names)) == len(names)


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_fails_cleanly_for_a_broken_config(results, case):
    run = results[case["name"]]
    lines = run.stderr.splitlines()
    assert run.returncode == 1, run.stderr
    assert len(lines) == 1, run.stderr
    assert lines[0].startswith("error: fab-platform:site")
    assert case["expect"] in lines[0]
    assert "Traceback" not in run.stderr + run.stdout
