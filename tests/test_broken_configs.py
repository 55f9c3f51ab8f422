"""The malformed-config corpus: every broken site is refused by `fabctl plan` with one clear line, never a traceback.

Every case runs through the CLI's entry function in this process (`fabctl plan` refuses a config before it starts a
render, with the program's own functions: fabctl.render._refusal); the first case of three classes, one for each way a
config is refused (the stack file itself, a config key beside the site object, the site object), also runs as a real
`python -m fabctl plan` process, so that what a user's shell gets is shown for each.

The cases live in tests/corpus/, one file per class of operator mistake (docs/configuration.md). A case is a
mapping with:

- `name`: unique across the corpus; `expect`: text the one error line contains;
- `base`: what it breaks: `small` or `full` (tests/small_site.py), or a stack file (`site-a`, `site-b`);
- `set` (dotted site path -> value) and `delete` (dotted site paths): edits of the base's `fab-platform:site`;
- `replace`: the whole `fab-platform:site` value instead;
- `config`: stack config keys (outside the site object) -> value, such as a secret written in plain text;
- `file`: the whole stack file as text instead of a generated one, written in `encoding` (default utf-8);
- `prefix`: how the error line starts when it names no site key (a file problem). Defaults to
  `error: fab-platform:site`.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from fabctl import cli
from fabctl.render import PROJECT_DIR
from fabctl.stackfile import SITE_KEY
from helpers import copy_project, stack_config
from small_site import full_site, small_site

CORPUS = Path(__file__).parent / "corpus"
CASES = [case | {"class": path.stem} for path in sorted(CORPUS.glob("*.yaml")) for case in yaml.safe_load(path.read_text())]
SMALL_BASES = {"small": small_site, "full": full_site}
"""Bases a case may break instead of a stack file: the smallest site, and the one with every optional part (small_site.py).
A case whose expected line depends on the site's topology (its clusters, teams...) uses one of these, so that a stack
file can grow without changing what the case is refused with."""
EDITS = ("set", "delete", "replace", "config", "file")


def base_config(base: str) -> dict[str, Any]:
    return {SITE_KEY: SMALL_BASES[base]()} if base in SMALL_BASES else copy.deepcopy(stack_config(base))


def apply(case: dict[str, Any]) -> dict[str, Any]:
    config = base_config(case["base"])
    config.update(case.get("config", {}))
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


def write_stack_file(project: Path, case: dict[str, Any]) -> None:
    path = project / f"Pulumi.{case['name']}.yaml"
    if "file" in case:
        path.write_bytes(case["file"].encode(case.get("encoding", "utf-8")))
    else:
        path.write_text(yaml.dump({"config": apply(case)}, Dumper=yaml.CSafeDumper))


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    """A copy of the program with every case's stack file."""
    project = copy_project(tmp_path_factory.mktemp("project"))
    for case in CASES:
        write_stack_file(project, case)
    return project


@dataclass(frozen=True)
class Refusal:
    returncode: int
    stdout: str
    stderr: str


PLAN = ("plan", "--no-policies", "--no-check")


def plan_args(project: Path, case: dict[str, Any]) -> list[str]:
    return [*PLAN, "--stack", case["name"], "--project-dir", str(project), "--out", str(project / "out")]


def refusal(project: Path, case: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> Refusal:
    """What `fabctl plan` did with a case, run through the CLI's entry function."""
    capsys.readouterr()
    returncode = cli.main(plan_args(project, case))
    out = capsys.readouterr()
    return Refusal(returncode, out.out, out.err)


IN_A_SHELL = [next(c for c in CASES if c["class"] == name) for name in ("files", "secrets", "general")]


def test_the_corpus_has_at_least_150_cases_with_distinct_names():
    names = [c["name"] for c in CASES]
    assert len(names) >= 150 and len(set(names)) == len(names)


def test_no_two_cases_make_the_same_edit():
    edits = [json.dumps([c["base"], *(c.get(key) for key in EDITS)], sort_keys=True) for c in CASES]
    assert len(set(edits)) == len(edits)


def assert_refused_cleanly(run: Refusal, case: dict[str, Any]) -> None:
    lines = run.stderr.splitlines()
    assert run.returncode == 1, run.stderr
    assert len(lines) == 1, run.stderr
    assert lines[0].startswith(case.get("prefix", "error: fab-platform:site"))
    assert case["expect"] in lines[0]
    assert "Traceback" not in run.stderr + run.stdout


@pytest.mark.parametrize("case", CASES, ids=[f"{c['class']}/{c['name']}" for c in CASES])
def test_fails_cleanly_for_a_broken_config(project, case, capsys):
    assert_refused_cleanly(refusal(project, case, capsys), case)


@pytest.mark.parametrize("case", IN_A_SHELL, ids=[f"{c['class']}/{c['name']}" for c in IN_A_SHELL])
def test_fails_cleanly_for_a_broken_config_in_a_shell(project, case):
    """The same refusal from a real `python -m fabctl plan` process: its exit status and its stderr, one line."""
    done = subprocess.run([sys.executable, "-m", "fabctl", *plan_args(project, case)], cwd=PROJECT_DIR, capture_output=True,
                          text=True, check=False)
    assert_refused_cleanly(Refusal(done.returncode, done.stdout, done.stderr), case)


def test_a_config_the_program_refuses_starts_no_render(project, monkeypatch, capsys):
    """The refusal comes before any renderer process: a broken config costs no program run."""
    from fabctl import runs

    def no_render(request):
        raise AssertionError(f"a render was started for {request['stack']}")

    monkeypatch.setattr(runs, "run", no_render)
    case = next(c for c in CASES if "file" not in c)
    assert_refused_cleanly(refusal(project, case, capsys), case)


def _site_edit(case: dict[str, Any]) -> bool:
    return not {"file", "config"} & set(case)


BY_THE_PROGRAM = [next(c for c in CASES if c["class"] == path.stem and _site_edit(c)) for path in sorted(CORPUS.glob("*.yaml"))
                  if any(c["class"] == path.stem and _site_edit(c) for c in CASES)]
"""The first case of each class that edits the site object only (a stack file that does not load, or a secret in plain
text, is refused before any program would start): the program, started, refuses it with the line `fabctl plan` found
without starting it."""


@pytest.mark.parametrize("case", BY_THE_PROGRAM, ids=[f"{c['class']}/{c['name']}" for c in BY_THE_PROGRAM])
def test_the_program_refuses_a_broken_config_with_the_line_fabctl_refuses_it_with(project, case, capsys, monkeypatch):
    from fabctl import render, runs

    before = refusal(project, case, capsys)
    started, run = [], runs.run
    monkeypatch.setattr(render, "_refusal", lambda *args: [])
    monkeypatch.setattr(runs, "run", lambda request: started.append(request["stack"]) or run(request))
    assert (refusal(project, case, capsys), started) == (before, [case["name"]])
