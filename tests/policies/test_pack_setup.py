"""The policy pack starts under the Pulumi CLI from a fresh clone after the setup (`make setup`, or docs/deploy.md's commands).

The CLI runs a local pack (`--policy-pack policies`) with the interpreter of the virtualenv that its
PulumiPolicy.yaml names, resolved from the pack's folder, and installs nothing for it.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from fabctl.policy import POLICIES_DIR, PolicyPackError, pack_python
from fabctl.render import PROJECT_DIR


def _virtualenv(project_file: Path) -> Path:
    options = yaml.safe_load(project_file.read_text())["runtime"]["options"]
    return (project_file.parent / options["virtualenv"]).resolve()


def _pins(path: Path) -> dict[str, str]:
    lines = (line.split("#")[0].strip() for line in path.read_text().splitlines())
    return dict(line.split("==", 1) for line in lines if line and not line.startswith("-r"))


def test_the_pack_runs_in_the_project_virtualenv():
    assert _virtualenv(POLICIES_DIR / "PulumiPolicy.yaml") == _virtualenv(PROJECT_DIR / "Pulumi.yaml")


def test_the_project_requirements_pin_everything_the_pack_needs():
    pack = _pins(POLICIES_DIR / "requirements.txt")
    assert pack, "the pack declares no dependency"
    assert {name: _pins(PROJECT_DIR / "requirements.txt").get(name) for name in pack} == pack


def test_the_pack_virtualenv_exists_after_setup_and_can_start_the_pack():
    python = pack_python()
    done = subprocess.run([str(python), "-c", "import pulumi.policy, pulumi_policy"], capture_output=True, text=True, check=False)
    assert (python.parent.parent, done.returncode, done.stderr) == (_virtualenv(PROJECT_DIR / "Pulumi.yaml"), 0, "")


def test_fails_when_the_pack_virtualenv_does_not_exist(tmp_path):
    (tmp_path / "PulumiPolicy.yaml").write_text(yaml.safe_dump({"runtime": {"name": "python", "options": {"virtualenv": "venv"}}}))
    with pytest.raises(PolicyPackError) as exc:
        pack_python(tmp_path)
    assert str(exc.value) == f"the policy pack's virtualenv {tmp_path / 'venv'} does not exist; create it with: make setup"
