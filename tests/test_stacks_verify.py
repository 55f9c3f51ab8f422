"""The stack files' acceptance jobs: `fabctl verify --render` writes every phase's jobs for site-a and site-b, and every
object validates strictly (kubernetes-validate for built-in kinds, ../shared/crds for MPIJob and the rest)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from schemas import CrdSchemas, schema_errors

from fabctl.cli import main

STACKS = ("site-a", "site-b")


@pytest.fixture(scope="module")
def crds(crd_dir) -> CrdSchemas:
    return CrdSchemas(crd_dir)


@pytest.fixture(scope="module", params=STACKS)
def rendered(request, tmp_path_factory) -> tuple[str, list[dict]]:
    out = tmp_path_factory.mktemp(request.param)
    for phase in range(1, 6):
        assert main(["verify", "--stack", request.param, "--phase", str(phase), "--render", "--out", str(out)]) == 0
    objects = [obj for path in sorted(out.rglob("*.yaml")) for obj in yaml.safe_load_all(Path(path).read_text()) if obj]
    return request.param, objects


def test_every_phase_of_the_stack_writes_acceptance_jobs(rendered):
    stack, objects = rendered
    assert {obj["kind"] for obj in objects} >= {"Job"}, stack


def test_every_acceptance_object_of_the_stack_validates_strictly(rendered, crds):
    stack, objects = rendered
    assert objects
    errors = {f"{obj['kind']}/{obj['metadata']['name']}": e for obj in objects if (e := schema_errors(obj, crds))}
    assert errors == {}, stack
