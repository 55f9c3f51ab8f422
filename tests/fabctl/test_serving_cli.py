"""`python -m fabctl serving` as a user runs it (through the CLI's entry function), on stack files of small sites written
into a copy of the project."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml
from engines import engine
from helpers import CliRun, copy_project, fabctl_in_process
from schemas import CrdSchemas, schema_errors
from small_site import small_site

from fabctl.stackfile import SITE_KEY


def fabctl(project: Path, *args: str) -> CliRun:
    return fabctl_in_process(*args, "--project-dir", str(project))


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    """A copy of the program with the smallest site as stack `site-t`, and the same site at phase 1 (no models) as `site-u`."""
    project = copy_project(tmp_path_factory.mktemp("project"))
    (project / "Pulumi.site-t.yaml").write_text(yaml.safe_dump({"config": {SITE_KEY: small_site()}}))
    base = small_site()
    base.update(name="site-u", domain="site-u.fab.internal", phase=1)
    del base["inference"]
    for node in base["gpu"]["gpu"]["nodes"].values():
        node["pool"] = "training"
    (project / "Pulumi.site-u.yaml").write_text(yaml.safe_dump({"config": {SITE_KEY: base}}))
    return project


def test_render_writes_each_models_directory(project, tmp_path):
    run = fabctl(project, "serving", "render", "--stack", "site-t", "--out", str(tmp_path / "sites" / "site-t"))
    assert (run.returncode, run.stderr) == (0, "")
    assert run.stdout == f"wrote 4 files for 1 model under {tmp_path / 'sites' / 'site-t'}: gpu/qwen3-8b\n"
    assert sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*.yaml")) == [
        "sites/site-t/gpu/qwen3-8b/deployment.yaml", "sites/site-t/gpu/qwen3-8b/httproute.yaml",
        "sites/site-t/gpu/qwen3-8b/pdb.yaml", "sites/site-t/gpu/qwen3-8b/service.yaml",
    ]


def test_render_removes_a_model_that_left_the_config(project, tmp_path):
    stale = tmp_path / "gpu" / "old-model" / "deployment.yaml"
    stale.parent.mkdir(parents=True)
    stale.write_text("kind: Deployment\n")
    run = fabctl(project, "serving", "render", "--stack", "site-t", "--out", str(tmp_path))
    assert run.returncode == 0
    assert not stale.parent.exists()


def test_fails_when_the_stack_serves_no_models(project, tmp_path):
    run = fabctl(project, "serving", "render", "--stack", "site-u", "--out", str(tmp_path))
    assert (run.returncode, run.stdout) == (1, "")
    assert run.stderr == (
        "error: fab-platform:site.inference: the stack serves no models (no inference section), so it has no serving repository\n"
    )


def test_handover_prints_one_state_deletion_per_object(project):
    run = fabctl(project, "serving", "handover", "--stack", "site-t")
    assert (run.returncode, run.stderr) == (0, "")
    assert [line.split("::")[-1] for line in run.stdout.splitlines()] == [
        "inference-route-qwen3-8b'", "inference-vllm-qwen3-8b-svc'", "inference-vllm-qwen3-8b-pdb'", "inference-vllm-qwen3-8b'",
    ]


def test_check_passes_on_the_directory_render_wrote(project, tmp_path):
    assert fabctl(project, "serving", "render", "--stack", "site-t", "--out", str(tmp_path)).returncode == 0
    run = fabctl(project, "serving", "render", "--stack", "site-t", "--out", str(tmp_path), "--check")
    assert (run.returncode, run.stdout, run.stderr) == (0, f"{tmp_path} is the stack's render (4 files)\n", "")


def test_fails_when_the_repository_has_drifted_from_the_stack(project, tmp_path):
    assert fabctl(project, "serving", "render", "--stack", "site-t", "--out", str(tmp_path)).returncode == 0
    deployment = tmp_path / "gpu" / "qwen3-8b" / "deployment.yaml"
    deployment.write_text(deployment.read_text().replace("replicas: 2", "replicas: 3"))
    (tmp_path / "gpu" / "qwen3-8b" / "pdb.yaml").unlink()
    (tmp_path / "gpu" / "qwen3-8b" / "canary.yaml").write_text("kind: Deployment\n")
    run = fabctl(project, "serving", "render", "--stack", "site-t", "--out", str(tmp_path), "--check")
    assert (run.returncode, run.stdout.splitlines()) == (1, [
        "gpu/qwen3-8b/deployment.yaml: differs from the stack's render",
        "gpu/qwen3-8b/pdb.yaml: missing",
        "gpu/qwen3-8b/canary.yaml: not in the stack's render",
        f"3 files of {tmp_path} differ from the stack's render: re-render with fabctl serving render, or bring the stack "
        "file's revision and canary in step with the repository",
    ])
    assert deployment.read_text().count("replicas: 3") == 1


def test_kubectl_kustomize_builds_the_rendered_directory_into_the_objects_the_stack_serves(project, tmp_path, crd_dir):
    """The real kustomize (`kubectl kustomize`, venv/bin/kubectl) reads each file render wrote as one Kubernetes object:
    a kustomization naming every file builds, yields each object once as written, and each validates against its schema.
    (Argo CD reads the directory itself, `directory.recurse`; the kustomization is the test's, render writes none.)"""
    kubectl = engine("kubectl")
    out = tmp_path / "sites" / "site-t"
    assert fabctl(project, "serving", "render", "--stack", "site-t", "--out", str(out)).returncode == 0
    files = sorted(p.relative_to(out / "gpu").as_posix() for p in (out / "gpu").rglob("*.yaml"))
    (out / "gpu" / "kustomization.yaml").write_text(yaml.safe_dump(
        {"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization", "resources": files}))
    built = subprocess.run([str(kubectl), "kustomize", str(out / "gpu")], capture_output=True, text=True, check=False)
    assert (built.returncode, built.stderr) == (0, "")
    objects = [o for o in yaml.safe_load_all(built.stdout) if o]
    assert sorted((o["kind"], o["metadata"]["namespace"], o["metadata"]["name"]) for o in objects) == [
        ("Deployment", "inference", "vllm-qwen3-8b"), ("HTTPRoute", "inference", "vllm-qwen3-8b"),
        ("PodDisruptionBudget", "inference", "vllm-qwen3-8b"), ("Service", "inference", "vllm-qwen3-8b"),
    ]
    written = sorted((yaml.safe_load((out / "gpu" / f).read_text()) for f in files), key=lambda o: o["kind"])
    assert sorted(objects, key=lambda o: o["kind"]) == written
    crds = CrdSchemas(crd_dir)
    assert {o["kind"]: schema_errors(o, crds) for o in objects} == {o["kind"]: [] for o in objects}


def test_fails_when_kustomize_finds_a_file_that_is_no_object(project, tmp_path):
    """The engine refuses what Argo CD could not apply either: a file of the directory that is not a Kubernetes object."""
    kubectl = engine("kubectl")
    assert fabctl(project, "serving", "render", "--stack", "site-t", "--out", str(tmp_path)).returncode == 0
    (tmp_path / "gpu" / "qwen3-8b" / "pdb.yaml").write_text("spec: {}\n")
    files = sorted(p.relative_to(tmp_path / "gpu").as_posix() for p in (tmp_path / "gpu").rglob("*.yaml"))
    (tmp_path / "gpu" / "kustomization.yaml").write_text(yaml.safe_dump({"resources": files}))
    built = subprocess.run([str(kubectl), "kustomize", str(tmp_path / "gpu")], capture_output=True, text=True, check=False)
    assert built.returncode == 1 and "missing Resource metadata" in built.stderr
