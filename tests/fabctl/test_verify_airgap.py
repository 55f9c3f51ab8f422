"""`fabctl verify` on an air-gapped site (config `registry`): every acceptance pod pulls its image from the site registry
and names its pull Secret, which the runner copies from kube-system into a namespace of a step that lacks it; without a
registry the jobs name no pull Secret."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from airgap_cases import FILES, MIRROR, PULL_SECRET, with_registry
from kube_stub import BATCH, CORE, FakeApi, serve
from small_site import full_site

from components.config import parse_site
from fabctl.check.mirror import image_references, pod_specs
from fabctl.verify.criteria import PHASES, criteria
from fabctl.verify.model import Criterion, Step
from fabctl.verify.report import ERROR, PASS
from fabctl.verify.runner import Runner


def pods(raw: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(criterion id, pod spec) of every pod the site's acceptance jobs run, over every phase."""
    site = parse_site(raw)
    found = [(c.id, spec) for phase in PHASES for c in criteria(site, phase) for step in c.steps
             for obj in step.objects for _, spec in pod_specs(obj.get("spec") or {})]
    assert found
    return found


def mirrored_site() -> dict[str, Any]:
    return with_registry(full_site(), files=FILES)


def test_with_a_registry_every_acceptance_pod_pulls_from_it():
    assert [(cid, ref) for cid, spec in pods(mirrored_site()) for _, ref in image_references(spec)
            if not ref.startswith(f"{MIRROR}/")] == []


def test_with_a_registry_every_acceptance_pod_names_the_pull_secret():
    assert [cid for cid, spec in pods(mirrored_site()) if spec.get("imagePullSecrets") != [{"name": PULL_SECRET}]] == []


def test_without_a_registry_no_acceptance_pod_names_a_pull_secret():
    assert [cid for cid, spec in pods(full_site()) if "imagePullSecrets" in spec] == []


# --- the runner ------------------------------------------------------------------------------------------------------

NS = "fab-verify"
CONTEXT = "site-t-gpu"
JOB_PATH = f"/apis/batch/v1/namespaces/{NS}/jobs/probe"
SECRET_PATH = f"/api/v1/namespaces/{NS}/secrets/{PULL_SECRET}"
SOURCE = {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/dockerconfigjson",
          "metadata": {"name": PULL_SECRET, "namespace": "kube-system"}, "data": {".dockerconfigjson": "e30="}}


def probe_criterion() -> Criterion:
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "probe", "namespace": NS},
           "spec": {"template": {"spec": {"restartPolicy": "Never", "imagePullSecrets": [{"name": PULL_SECRET}],
                                          "containers": [{"name": "main", "image": f"{MIRROR}/docker.io/library/busybox:1.37"}]}}}}
    return Criterion(phase=1, id="01-probe", title="a probe", judge=lambda results: (True, "ran"),
                     steps=(Step(cluster="gpu", objects=(job,), decides=("Job", "probe"), timeout_sec=60),))


@pytest.fixture
def api() -> FakeApi:
    """A cluster without the acceptance namespace, whose kube-system holds the pull Secret and whose Job completes."""
    return FakeApi(groups={"v1": [*CORE, {"name": "secrets", "kind": "Secret", "namespaced": True}], "batch/v1": BATCH},
                   statuses={JOB_PATH: [{"conditions": [{"type": "Complete", "status": "True"}]}]},
                   secrets={f"kube-system/{PULL_SECRET}": SOURCE})


def run(api: FakeApi, tmp_path: Path, pull_secret: str | None = PULL_SECRET):
    kubeconfig = tmp_path / "kubeconfig"
    with serve(api, kubeconfig, {CONTEXT: CONTEXT}):
        runner = Runner({"gpu": CONTEXT}, kubeconfig=str(kubeconfig), poll_sec=0, sleep=lambda _: None, pull_secret=pull_secret)
        return runner.run([probe_criterion()])


def test_the_runner_copies_the_pull_secret_into_a_namespace_without_it_before_the_pods_and_deletes_it(api, tmp_path):
    (outcome,) = run(api, tmp_path)
    (copy,) = [r.body for r in api.requests if r.method == "PATCH" and r.path == SECRET_PATH]
    assert (outcome.status, api.calls("PATCH", "DELETE"), copy["type"], copy["data"]) == (
        PASS, [("PATCH", SECRET_PATH), ("PATCH", JOB_PATH), ("DELETE", JOB_PATH), ("DELETE", SECRET_PATH),
               ("DELETE", f"/api/v1/namespaces/{NS}")],
        "kubernetes.io/dockerconfigjson", {".dockerconfigjson": "e30="})


def test_the_runner_leaves_a_namespaces_own_pull_secret(api, tmp_path):
    api.namespaces.add(NS)
    api.secrets[f"{NS}/{PULL_SECRET}"] = {**SOURCE, "metadata": {"name": PULL_SECRET, "namespace": NS}}
    run(api, tmp_path)
    assert [call for call in api.calls("PATCH", "DELETE") if call[1] == SECRET_PATH] == []


def test_without_a_pull_secret_the_runner_copies_none(api, tmp_path):
    run(api, tmp_path, pull_secret=None)
    assert [r.path for r in api.requests if "/secrets/" in r.path] == []


def test_fails_when_the_pull_secret_is_not_in_kube_system(api, tmp_path):
    api.secrets.clear()
    (outcome,) = run(api, tmp_path)
    assert (outcome.status, outcome.message) == (
        ERROR, (f"the pull Secret {PULL_SECRET} (registry.pull_secret) is not in kube-system on cluster gpu (context "
                f"{CONTEXT}): the jobs' pods name it; deploy the stack first"))
