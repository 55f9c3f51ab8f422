"""The runner of `fabctl verify` against a fake Kubernetes API (tests/kube_stub.py) through the real `kubernetes` client:
it applies each step, waits for the deciding object, reads the results from its pods' logs, always cleans up, and
turns what happened into an outcome per criterion."""

from __future__ import annotations

import base64
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from engines import engine
from kube_stub import CORE, MPI, FakeApi, serve

from fabctl.verify.model import GENERATE_ANNOTATION
from fabctl.verify.model import Criterion, Judgement, Step
from fabctl.verify.report import ERROR, FAIL, PASS, Outcome
from fabctl.verify.runner import Runner, parse_results

NS = "fab-verify"
CONTEXT = "site-t-gpu"
JOB_PATH = f"/apis/batch/v1/namespaces/{NS}/jobs/gpu-count"
RUNNING, COMPLETE, FAILED = {"active": 1}, {"conditions": [{"type": "Complete", "status": "True"}]}, {
    "conditions": [{"type": "Failed", "status": "True"}]}


class Clock:
    """A clock that moves only when the runner sleeps."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def job(name: str = "gpu-count", kind: str = "Job", api_version: str = "batch/v1") -> dict[str, Any]:
    return {"apiVersion": api_version, "kind": kind,
            "metadata": {"name": name, "namespace": NS, "labels": {"fab.internal/verify": "01-gpus-gpu-1"}},
            "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox:1.37"}]}}}}


def eight_gpus(results: Mapping[str, str]) -> Judgement:
    if results.get("0.succeeded") != "true":
        return False, "the GPU check did not succeed"
    count = results.get("0.gpus")
    return (count == "8", f"{count} GPUs seen, 8 configured")


def criterion(*steps: Step, judge=eight_gpus, id: str = "01-gpus-gpu-1") -> Criterion:
    return Criterion(phase=1, id=id, title="GPUs recognised on gpu-1", steps=steps, judge=judge, bound="gpus == 8")


def step(*objects: dict[str, Any], decides: tuple[str, str] = ("Job", "gpu-count"), timeout: int = 60,
         background: tuple[str, ...] = ()) -> Step:
    return Step(cluster="gpu", objects=objects or (job(),), decides=decides, timeout_sec=timeout, background=background)


@pytest.fixture
def api() -> FakeApi:
    """A cluster that has no acceptance namespace yet, whose Job completes on the second read with 8 GPUs in its log."""
    return FakeApi(statuses={JOB_PATH: [RUNNING, COMPLETE]}, pods={"batch.kubernetes.io/job-name=gpu-count": ["gpu-count-x1"]},
                   logs={"gpu-count-x1": "GPU 0: NVIDIA H100\nFAB-RESULT gpus=8\n"})


@pytest.fixture
def run(api: FakeApi, tmp_path: Path):
    """Run criteria against `api` with a fake clock (polls every 5 s); the runner is returned with the outcomes."""
    clock = Clock()
    kubeconfig = tmp_path / "kubeconfig"

    def run(*criteria: Criterion, sleep=None, contexts: Mapping[str, str] | None = None) -> tuple[list[Outcome], Runner]:
        with serve(api, kubeconfig, {CONTEXT: "site-t-gpu"}):
            runner = Runner(contexts or {"gpu": CONTEXT}, kubeconfig=str(kubeconfig), poll_sec=5, clock=clock,
                            sleep=sleep or clock.sleep)
            return runner.run(criteria), runner

    return run


def test_passes_when_the_job_completes_and_the_judge_accepts_its_results(run):
    (outcome,), _ = run(criterion(step()))
    assert outcome == Outcome(1, "01-gpus-gpu-1", PASS, "8 GPUs seen, 8 configured", "GPUs recognised on gpu-1",
                              {"0.succeeded": "true", "0.gpus": "8"}, "gpus == 8", 5.0)


def test_fails_when_the_deciding_job_fails(run, api):
    api.statuses[JOB_PATH] = [FAILED]
    (outcome,), _ = run(criterion(step()))
    assert (outcome.status, outcome.message, outcome.results) == (FAIL, "the GPU check did not succeed",
                                                                  {"0.succeeded": "false", "0.gpus": "8"})


def test_fails_when_the_judge_refuses_the_figures(run, api):
    api.logs["gpu-count-x1"] = "FAB-RESULT gpus=7\n"
    (outcome,), _ = run(criterion(step()))
    assert (outcome.status, outcome.message) == (FAIL, "7 GPUs seen, 8 configured")


def test_fails_when_the_job_does_not_finish_within_the_step_timeout(run, api):
    api.statuses[JOB_PATH] = [RUNNING]
    (outcome,), _ = run(criterion(step(timeout=60)))
    assert (outcome.status, outcome.message) == (
        FAIL, f"Job {NS}/gpu-count on cluster gpu (context {CONTEXT}) did not finish within 60 s")
    assert outcome.seconds == 60.0


def test_fails_when_the_cluster_does_not_serve_the_kind(run, api):
    mpijob = job("nccl", kind="MPIJob", api_version="kubeflow.org/v2beta1")
    (outcome,), _ = run(criterion(step(mpijob, decides=("MPIJob", "nccl"))))
    assert (outcome.status, outcome.message) == (
        FAIL, (f"MPIJob kubeflow.org/v2beta1 is not served by cluster gpu (context {CONTEXT}): the MPI Operator is not "
               "installed there"))
    assert api.calls("PATCH", "POST") == []


def test_reads_an_mpijobs_results_from_its_launcher_pod(run, api):
    api.groups["kubeflow.org/v2beta1"] = MPI
    api.statuses[f"/apis/kubeflow.org/v2beta1/namespaces/{NS}/mpijobs/nccl"] = [{"conditions": [
        {"type": "Succeeded", "status": "True"}]}]
    api.pods["training.kubeflow.org/job-name=nccl,training.kubeflow.org/job-role=launcher"] = ["nccl-launcher-a"]
    api.logs["nccl-launcher-a"] = "# Avg bus bandwidth    : 182.4\nFAB-RESULT busbw_gbps=182.4\n"
    mpijob = job("nccl", kind="MPIJob", api_version="kubeflow.org/v2beta1")
    (outcome,), _ = run(criterion(step(mpijob, decides=("MPIJob", "nccl")), judge=lambda r: (True, r["0.busbw_gbps"])))
    assert outcome.results == {"0.succeeded": "true", "0.busbw_gbps": "182.4"}


def test_deletes_what_it_applied_when_the_job_times_out(run, api):
    api.statuses[JOB_PATH] = [RUNNING]
    run(criterion(step()))
    assert api.calls("DELETE") == [("DELETE", JOB_PATH), ("DELETE", f"/api/v1/namespaces/{NS}")]


def test_deletes_what_it_applied_when_interrupted(run, api):
    def interrupt(_seconds: float) -> None:
        raise KeyboardInterrupt

    api.statuses[JOB_PATH] = [RUNNING]
    with pytest.raises(KeyboardInterrupt):
        run(criterion(step()), sleep=interrupt)
    assert api.calls("DELETE") == [("DELETE", JOB_PATH), ("DELETE", f"/api/v1/namespaces/{NS}")]


def test_deletes_with_background_propagation(run, api):
    run(criterion(step()))
    (delete, _) = [r for r in api.requests if r.method == "DELETE"]
    assert delete.body == {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"}


def test_applies_server_side_as_fabctl_verify(run, api):
    run(criterion(step()))
    (patch,) = [r for r in api.requests if r.method == "PATCH"]
    assert (patch.path, patch.query, patch.content_type, patch.body) == (
        JOB_PATH, {"fieldManager": ["fabctl-verify"], "force": ["true"]}, "application/apply-patch+yaml", job())


def test_starts_background_objects_first_and_deletes_them_last(run, api):
    load = job("warp-load")
    api.statuses[f"/apis/batch/v1/namespaces/{NS}/jobs/warp-load"] = [{"active": 1}, {"active": 1, "ready": 1}]
    run(criterion(step(job(), load, background=("warp-load",))))
    warp, count = f"/apis/batch/v1/namespaces/{NS}/jobs/warp-load", JOB_PATH
    assert api.calls("PATCH", "DELETE") == [("PATCH", warp), ("PATCH", count), ("DELETE", count), ("DELETE", warp),
                                             ("DELETE", f"/api/v1/namespaces/{NS}")]


def test_waits_for_a_background_job_to_have_a_ready_pod_before_starting_the_measured_one(run, api):
    warp = f"/apis/batch/v1/namespaces/{NS}/jobs/warp-load"
    api.statuses[warp] = [{"active": 1}, {"active": 1}, {"active": 1, "ready": 1}]
    run(criterion(step(job(), job("warp-load"), background=("warp-load",))))
    assert [path for method, path in api.calls("GET", "PATCH") if path in (warp, JOB_PATH)][:5] == [
        warp, warp, warp, warp, JOB_PATH]


def test_does_not_wait_for_a_background_job_that_finished_before_a_pod_was_seen_ready(run, api):
    api.statuses[f"/apis/batch/v1/namespaces/{NS}/jobs/warp-load"] = [COMPLETE]
    (outcome,), _ = run(criterion(step(job(), job("warp-load"), background=("warp-load",))))
    assert outcome.status == PASS


def test_creates_a_missing_namespace_at_pod_security_restricted(run, api):
    run(criterion(step()))
    (create,) = [r for r in api.requests if r.method == "POST"]
    assert create.body["metadata"] == {"name": NS, "labels": {
        "app.kubernetes.io/managed-by": "fabctl-verify", "pod-security.kubernetes.io/enforce": "restricted",
        "pod-security.kubernetes.io/audit": "restricted", "pod-security.kubernetes.io/warn": "restricted"}}


def test_keeps_a_namespace_that_existed_before_the_run(run, api):
    api.namespaces.add(NS)
    run(criterion(step()))
    assert api.calls("POST", "DELETE") == [("DELETE", JOB_PATH)]


def test_creates_the_namespace_once_for_every_criterion_of_the_run(run, api):
    run(criterion(step()), criterion(step(), id="01-gpus-gpu-2"))
    assert api.calls("POST") == [("POST", "/api/v1/namespaces")]
    assert api.calls("DELETE")[-1] == ("DELETE", f"/api/v1/namespaces/{NS}")


def test_a_failing_criterion_does_not_stop_the_next_one(run, api):
    mpijob = job("nccl", kind="MPIJob", api_version="kubeflow.org/v2beta1")
    outcomes, _ = run(criterion(step(mpijob, decides=("MPIJob", "nccl")), id="01-nccl"), criterion(step()))
    assert [(o.id, o.status) for o in outcomes] == [("01-nccl", FAIL), ("01-gpus-gpu-1", PASS)]


def test_errors_when_the_kubeconfig_has_no_context_for_the_cluster(run):
    (outcome,), _ = run(criterion(step()), contexts={"gpu": "site-t-gpu-admin"})
    assert outcome.status == ERROR
    assert outcome.message.startswith("cluster gpu: cannot use kubeconfig context 'site-t-gpu-admin' from ")


def test_errors_when_the_api_refuses_a_request(run, api):
    api.refuse["PATCH"] = (403, 'jobs.batch "gpu-count" is forbidden: User "ci" cannot patch resource "jobs"')
    (outcome,), _ = run(criterion(step()))
    assert (outcome.status, outcome.message) == (
        ERROR, (f'step 0 on cluster gpu (context {CONTEXT}): the Kubernetes API answered 403 Forbidden: jobs.batch '
                '"gpu-count" is forbidden: User "ci" cannot patch resource "jobs"'))


def test_errors_when_the_cluster_cannot_be_reached(tmp_path):
    kubeconfig = tmp_path / "kubeconfig"
    with serve(FakeApi(), kubeconfig, {CONTEXT: "site-t-gpu"}):
        pass  # the kubeconfig now names a port where nothing listens
    (outcome,) = Runner({"gpu": CONTEXT}, kubeconfig=str(kubeconfig)).run([criterion(step())])
    assert outcome.status == ERROR
    assert outcome.message.startswith(f"step 0: cluster gpu (context {CONTEXT}) cannot be reached: ")


def test_errors_when_the_judge_crashes(run):
    (outcome,), _ = run(criterion(step(), judge=lambda results: (int(results["0.missing"]) > 0, "")))
    assert (outcome.status, outcome.message) == (ERROR, "the judge of 01-gpus-gpu-1 crashed on the results: KeyError('0.missing')")


def test_numbers_each_steps_results_by_its_index(run, api):
    outcome, _ = run(criterion(step(), step(), judge=lambda results: (True, "")))
    assert outcome[0].results == {"0.succeeded": "true", "0.gpus": "8", "1.succeeded": "true", "1.gpus": "8"}


def test_parse_results_reads_only_result_lines_and_the_last_value_wins():
    log = "FAB-RESULT a=1\nnoise a=2\n  FAB-RESULT b = x=y \nFAB-RESULT a=3\nFAB-RESULT broken\n"
    assert parse_results(log) == {"a": "3", "b": "x=y"}


def test_applies_what_a_background_job_mounts_before_starting_it(run, api):
    """The NCCL run under load as fabctl/verify/criteria/phase_01_nccl.py builds it: its namespace, its ssh settings,
    warp's CA bundle, warp (background) and the MPIJob. warp cannot start without its ConfigMap, nor the MPIJob without
    its namespace."""
    api.groups["v1"] = [*CORE, {"name": "configmaps", "kind": "ConfigMap", "namespaced": True}]
    api.groups["kubeflow.org/v2beta1"] = MPI
    api.namespaces.add("team-fdc")
    nccl_ns, team = f"{NS}-nccl-load", "/api/v1/namespaces/team-fdc"
    warp = "/apis/batch/v1/namespaces/team-fdc/jobs/warp-load"
    mpijob = f"/apis/kubeflow.org/v2beta1/namespaces/{nccl_ns}/mpijobs/nccl-load"
    api.statuses[warp] = [{"active": 1, "ready": 1}]
    api.statuses[mpijob] = [{"conditions": [{"type": "Succeeded", "status": "True"}]}]
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": nccl_ns}}
    ssh = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "nccl-ssh", "namespace": nccl_ns}, "data": {}}
    ca = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "warp-load-ca", "namespace": "team-fdc"}, "data": {}}
    load = {**job("warp-load"), "metadata": {"name": "warp-load", "namespace": "team-fdc"}}
    nccl = {**job("nccl-load", kind="MPIJob", api_version="kubeflow.org/v2beta1"),
            "metadata": {"name": "nccl-load", "namespace": nccl_ns}}
    run(criterion(step(namespace, ssh, ca, load, nccl, decides=("MPIJob", "nccl-load"), background=("warp-load",)),
                  judge=lambda results: (True, "")))
    assert api.calls("PATCH") == [
        ("PATCH", f"/api/v1/namespaces/{nccl_ns}"), ("PATCH", f"/api/v1/namespaces/{nccl_ns}/configmaps/nccl-ssh"),
        ("PATCH", f"{team}/configmaps/warp-load-ca"), ("PATCH", warp), ("PATCH", mpijob),
    ]


def keypair_secret(what: str = "ssh-keypair") -> dict[str, Any]:
    """A Secret as phase 01's NCCL run renders it: no data, the runner asked to make it."""
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": "nccl-ssh-key", "namespace": NS, "annotations": {GENERATE_ANNOTATION: what}}}


def test_fills_a_generated_secret_with_a_fresh_key_pair_at_each_apply(run, api, tmp_path):
    """What the runner applies holds an ed25519 key pair that OpenSSH's ssh-keygen reads back to the same public key, which
    is also the authorized key; each apply makes a new one, and the rendered Secret is left without data."""
    keygen = engine("ssh-keygen")
    api.groups["v1"] = [*CORE, {"name": "secrets", "kind": "Secret", "namespaced": True}]
    secret = keypair_secret()
    outcomes, _ = run(criterion(step(secret, job())), criterion(step(secret, job())))
    assert [o.status for o in outcomes] == [PASS, PASS]
    applied = [r.body for r in api.requests if r.method == "PATCH" and r.path == f"/api/v1/namespaces/{NS}/secrets/nccl-ssh-key"]
    publics = []
    for body in applied:
        files = {name: base64.b64decode(value) for name, value in body["data"].items()}
        assert sorted(files) == ["authorized_keys", "id_ed25519", "id_ed25519.pub"]
        key = tmp_path / "id_ed25519"
        key.write_bytes(files["id_ed25519"])
        key.chmod(0o600)
        derived = subprocess.run([str(keygen), "-y", "-f", str(key)], capture_output=True, text=True, check=True).stdout
        assert derived.split()[:2] == files["id_ed25519.pub"].decode().split()[:2] == files["authorized_keys"].decode().split()[:2]
        assert derived.startswith("ssh-ed25519 ")
        publics.append(derived)
    assert len(publics) == 2 and publics[0] != publics[1]
    assert "data" not in secret


def test_errors_when_a_secret_asks_for_what_the_runner_cannot_make(run, api):
    api.groups["v1"] = [*CORE, {"name": "secrets", "kind": "Secret", "namespaced": True}]
    (outcome,), _ = run(criterion(step(keypair_secret("tls-certificate"), job())))
    assert (outcome.status, outcome.message) == (ERROR, (
        f"Secret {NS}/nccl-ssh-key asks for fab.internal/verify-generate: tls-certificate; the runner makes ssh-keypair only"))
