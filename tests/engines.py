"""The real engines some tests run instead of reading text: Prometheus' `promtool` and Alertmanager's `amtool` (Debian's
`prometheus` and `prometheus-alertmanager`), `kubectl` (its `kubectl kustomize`: the pinned one `make setup` installs
as venv/bin/kubectl, fabctl/helm_install.py), and Python engines from requirements-dev.txt.

A test asks for a binary with `engine("promtool")`: where it is absent the test skips with the reason and the package
that provides it, as in a user's clone; CI installs every one (.ci/run, DEBIAN_PACKAGES) and sets FAB_REQUIRE_ENGINES=1,
which turns the skip into a failure. `FAB_<NAME>` (FAB_PROMTOOL, FAB_AMTOOL, FAB_KUBECTL) names another build. An engine
`make setup` installs beside the virtualenv's Python (kubectl) is taken from there before the PATH."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

PACKAGES = {"promtool": "prometheus", "amtool": "prometheus-alertmanager", "java": "openjdk-17-jre-headless",
            "keytool": "openjdk-17-jre-headless", "curl": "curl",
            "git": "git", "busybox": "busybox", "ssh-keygen": "openssh-client"}
"""The Debian package that provides each engine binary (.ci/run installs them)."""

BESIDE_PYTHON = {"kubectl": "make setup (python -m fabctl.helm_install) installs the pinned one as venv/bin/kubectl"}
"""Engines `make setup` installs beside the virtualenv's Python, looked for there first, and how to get them."""


def engine(name: str) -> Path:
    """The path of engine binary `name`, or skip (fail under FAB_REQUIRE_ENGINES=1) saying how to install it."""
    beside = Path(sys.executable).parent / name
    found = os.environ.get(f"FAB_{name.upper()}") or (str(beside) if name in BESIDE_PYTHON and beside.is_file() else None) \
        or shutil.which(name)
    if found and Path(found).is_file():
        return Path(found)
    how = BESIDE_PYTHON.get(name) or f"install Debian's {PACKAGES[name]} package (apt-get install {PACKAGES[name]})"
    reason = f"no {name}: {how}, or set FAB_{name.upper()}"
    if os.environ.get("FAB_REQUIRE_ENGINES") == "1":
        pytest.fail(f"{reason}; FAB_REQUIRE_ENGINES=1 forbids skipping the engine tests")
    pytest.skip(reason)
