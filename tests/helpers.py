"""Helpers shared by tests: renders of small sites (one per distinct site), stack configs to mutate, one render per stack."""

from __future__ import annotations

import contextlib
import copy
import functools
import io
import json
import os
import shutil
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fabctl.helm import ChartPackages, MissingChart, RenderedRelease, render_releases
from fabctl.render import PROJECT_DIR, Plan, render, with_secret_stand_ins
from fabctl.stackfile import SITE_KEY, read_stack_config, stack_file

STACKS = ("site-a", "site-b")


def copy_project(dest: Path) -> Path:
    """A copy of the program with its stack files and what they name (CA bundles), to render stack files a test writes."""
    for name in ("__main__.py", "Pulumi.yaml", *(p.name for p in PROJECT_DIR.glob("Pulumi.*.yaml"))):
        shutil.copy(PROJECT_DIR / name, dest / name)
    for folder in ("components", "certs"):
        shutil.copytree(PROJECT_DIR / folder, dest / folder, ignore=shutil.ignore_patterns("__pycache__"))
    return dest


def config_errors(raw: dict[str, Any]) -> list[str]:
    """The lines of the ConfigError a site object is refused with (the test fails if it is accepted)."""
    import pytest

    from components.config import ConfigError, parse_site

    with pytest.raises(ConfigError) as info:
        parse_site(raw)
    return info.value.lines


def stack_config(stack: str) -> dict[str, Any]:
    """A fresh, mutable copy of a stack file's `config:` mapping, with stand-ins for the secrets the stack sets only on
    its real copy (`with_secret_stand_ins`)."""
    return copy.deepcopy(_stack_config(stack))


@functools.cache
def _stack_config(stack: str) -> dict[str, Any]:
    """The stack file read once per process (the files do not change during a test session)."""
    return with_secret_stand_ins(read_stack_config(stack_file(PROJECT_DIR, stack)))[0]


def site_raw(stack: str) -> dict[str, Any]:
    """A fresh, mutable copy of a stack file's `fab-platform:site` object."""
    return stack_config(stack)[SITE_KEY]


def render_site(stack: str, site: dict[str, Any]) -> Plan:
    """Render the program with a modified site object."""
    config = stack_config(stack)
    config[SITE_KEY] = site
    return render_config(stack, config)


_PLANS: dict[str, Plan] = {}
_SMALL_PLANS: dict[str, Plan] = {}


def render_small(site: dict[str, Any], stack: str = "site-t", secrets: dict[str, Any] | None = None) -> Plan:
    """The render of a site object built by a test (small_site.py) as stack `stack`, with the secret config keys
    `secrets` beside it (`small_site.SERVING_REPO_TOKEN`); each distinct site is rendered once per test session, so the
    plan is shared: copy what a test changes."""
    key = json.dumps([stack, site, secrets], sort_keys=True)
    if key not in _SMALL_PLANS:
        _SMALL_PLANS[key] = render_config(stack, {SITE_KEY: site, **(secrets or {})})
    return _SMALL_PLANS[key]


def rendered(stack: str) -> Plan:
    """The render of a checked-in stack file, done once per test session."""
    if stack not in _PLANS:
        _PLANS[stack] = render(stack)
    return _PLANS[stack]


_HELM: dict[str, tuple] = {}


def helm_rendered(stack: str, chart_dir: Path, helm: Path) -> tuple[list[RenderedRelease], list[MissingChart]]:
    """The Helm releases of a checked-in stack file through `helm template`, done once per test session."""
    if stack not in _HELM:
        _HELM[stack] = render_releases(rendered(stack), ChartPackages(chart_dir), helm, PROJECT_DIR)
    return _HELM[stack]


def render_config(stack: str, config: dict[str, Any]) -> Plan:
    """Render the program with a whole modified `config:` mapping (secrets as `{secure: ...}`)."""
    from fabctl.render import render_config as _render

    return _render(stack, config)


@dataclass(frozen=True)
class CliRun:
    """What `python -m fabctl ...` did: its exit status and what it printed."""

    returncode: int
    stdout: str
    stderr: str


def fabctl_in_process(*args: str, env: Mapping[str, str | None] | None = None) -> CliRun:
    """`python -m fabctl ARGS` through the CLI's entry function in this process, with the variables `env` sets (None
    unsets one) for the run: its exit status and its output, as a process would give them (a usage error's exit included).
    The session's renders are shared with it (tests/conftest.py), so it costs what the command itself does."""
    from fabctl import cli

    out, err = io.StringIO(), io.StringIO()
    with _environment(env or {}), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            returncode = cli.main(list(args))
        except SystemExit as exc:  # argparse's usage errors
            returncode = exc.code if isinstance(exc.code, int) else 1
    return CliRun(returncode, out.getvalue(), err.getvalue())


@contextlib.contextmanager
def _environment(env: Mapping[str, str | None]) -> Iterator[None]:
    saved = {key: os.environ.get(key) for key in env}
    try:
        for key, value in env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
