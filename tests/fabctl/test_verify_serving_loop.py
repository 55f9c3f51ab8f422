"""Phase 03 end to end (fabctl/verify/criteria/phase_03.py, docs/acceptance.md): `fabctl verify` triggers the team's
serving-loop DAG through Airflow's API as a member of the team and follows the run across the clusters. The steps and
their order, each verdict by its exact message, the runner's figures handed from one step to the next (against the
fake Kubernetes API), and the probe's commands against small local servers standing for Keycloak, Airflow, AIStor and
Polaris."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import pytest
from helpers import config_errors
from kube_stub import FakeApi, serve
from schemas import CrdSchemas, schema_errors
from small_site import small_site, with_argocd

from components.config import parse_site
from components.dags import serving_loop_steps
from components.kube import restricted_security_context
from fabctl.verify import probe as probe_script
from fabctl.verify.criteria import criteria, not_applicable
from fabctl.verify.criteria.blocks import PROBE_SCRIPT
from fabctl.verify.criteria.phase_03 import TASKS
from fabctl.verify.model import Criterion, Step
from fabctl.verify.runner import Runner, figure

FIXTURES = Path(__file__).parents[1] / "fixtures" / "verify"
LOOP = {"training_images": ["registry.site-t.fab.internal/yield/train"],
        "features": {"wafer": {"table": "yield.wafer_features", "sql": "SELECT wafer_id FROM yield.wafers"}}}
RUN = {"team": "yield", "model": "qwen3-8b", "features": "wafer", "training_image": "registry.site-t.fab.internal/yield/train:1.0"}
RUN_ID, SLUG = "fab-verify-20260301T100000Z", "fab-verify-20260301t100000z"


def raw_site(argocd: bool = False, **run: Any) -> dict[str, Any]:
    raw = small_site()
    if argocd:
        with_argocd(raw)
    raw["teams"]["yield"]["serving_loop"] = copy.deepcopy(LOOP)
    raw["acceptance"] = {"serving_loop": {**RUN, **run}}
    return raw


@pytest.fixture(scope="module")
def check() -> Criterion:
    (found,) = criteria(parse_site(raw_site()), 3)
    return found


@pytest.fixture(scope="module")
def synced() -> Criterion:
    (found,) = criteria(parse_site(raw_site(argocd=True)), 3)
    return found


def good(argocd: bool = False) -> dict[str, str]:
    """What a run that went through reports, step by step."""
    last = 4 if argocd else 3
    return {
        "0.succeeded": "true", "0.signin": "ok", "0.run_id": RUN_ID, "0.run": SLUG, "0.revision": SLUG,
        "0.trigger_status": "200", "0.state": "success", **{f"0.task_{t}": "success" for t in TASKS},
        "1.succeeded": "true", "1.job": "found", "1.cluster_queue": "team-yield", "1.admitted": "true",
        "2.succeeded": "true", "2.get_status": "200", "2.snapshot_id": "4242", "2.iceberg_ref": f"fab-{SLUG}",
        "2.has_metrics": "true", "2.table_status": "200", "2.tag_snapshot_id": "4242", "2.tag_type": "tag",
        **({"3.succeeded": "true", "3.sync": "Synced", "3.health": "Healthy", "3.canary": "Healthy"} if argocd else {}),
        f"{last}.succeeded": "true", f"{last}.token_status": "200", f"{last}.chat_status": "200",
    }


def pods(criterion: Criterion) -> Iterator[dict[str, Any]]:
    for step in criterion.steps:
        for obj in step.objects:
            if obj["kind"] == "Job":
                yield obj["spec"]["template"]["spec"]


def container(step: Step) -> dict[str, Any]:
    (job,) = [o for o in step.objects if o["kind"] == "Job"]
    return job["spec"]["template"]["spec"]["containers"][0]


# --- what is built -------------------------------------------------------------------------------------------------

def test_the_run_is_triggered_on_compute_then_followed_on_the_gpu_cluster_and_back(check):
    assert check.id == "03-serving-loop-yield"
    assert [(s.cluster, s.decides[1]) for s in check.steps] == [
        ("compute", "serving-loop-run"), ("gpu", "serving-loop-admission"), ("gpu", "serving-loop-pin"),
        ("compute", "serving-loop-answer")]


def test_with_argo_cd_the_sync_is_checked_before_the_answer(synced):
    assert [(s.cluster, s.decides[1]) for s in synced.steps] == [
        ("compute", "serving-loop-run"), ("gpu", "serving-loop-admission"), ("gpu", "serving-loop-pin"),
        ("compute", "serving-loop-sync"), ("compute", "serving-loop-answer")]


def test_the_trigger_signs_in_as_the_team_member_of_the_secret_and_commits_the_canary(check):
    probe = container(check.steps[0])
    assert probe["args"][:4] == ["airflow-run", "https://airflow.site-t.fab.internal", "serving_loop_yield", "21600"]
    assert json.loads(probe["args"][4]) == {
        "model": "qwen3-8b", "features": "wafer", "training_image": "registry.site-t.fab.internal/yield/train:1.0",
        "code_revision": "fab-verify", "serving_change": "commit", "git_server": "none"}
    secrets = {e["name"]: e["valueFrom"]["secretKeyRef"] for e in probe["env"] if "valueFrom" in e}
    assert secrets == {"AIRFLOW_USERNAME": {"name": "airflow-team-yield", "key": "username"},
                       "AIRFLOW_PASSWORD": {"name": "airflow-team-yield", "key": "password"}}
    assert check.steps[0].timeout_sec == 21600 + 600


def test_a_configured_revision_is_passed_to_the_run():
    (found,) = criteria(parse_site(raw_site(revision="r7")), 3)
    assert json.loads(container(found.steps[0])["args"][4])["revision"] == "r7"


def test_the_later_steps_follow_the_run_the_trigger_reported(check):
    """The run's name and revision are placeholders the runner fills from step 0's figures: the render is the same on
    every run, and a second check does not collide with the first."""
    assert f"fab.internal/run={figure(0, 'run')},fab.internal/step=train" in container(check.steps[1])["args"][0]
    assert container(check.steps[2])["args"] == [
        "model-pin", f"s3://site-t-models/qwen/qwen3-8b/{figure(0, 'revision')}/metadata.json", "yield.wafer_features",
        f"fab-{figure(0, 'run')}"]


def test_the_model_pin_runs_as_the_teams_job_with_its_s3_and_polaris_secrets(check):
    (job,) = [o for o in check.steps[2].objects if o["kind"] == "Job"]
    assert job["metadata"]["namespace"] == "team-yield"
    assert job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "training"
    assert container(check.steps[2])["envFrom"] == [{"secretRef": {"name": "s3-training"}},
                                                    {"secretRef": {"name": "polaris-training"}}]


def test_the_admission_reader_may_list_jobs_and_workloads_in_the_teams_namespace_only(check):
    roles = [o for o in check.steps[1].objects if o["kind"] in ("Role", "ClusterRole")]
    assert [(r["kind"], r["metadata"]["namespace"], r["rules"]) for r in roles] == [
        ("Role", "team-yield", [{"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["list"]},
                                {"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads"], "verbs": ["list"]}])]


def test_the_sync_reader_may_get_the_serving_application_only(synced):
    (role,) = [o for o in synced.steps[3].objects if o["kind"] in ("Role", "ClusterRole")]
    assert (role["metadata"]["namespace"], role["rules"]) == ("argocd", [
        {"apiGroups": ["argoproj.io"], "resources": ["applications"], "verbs": ["get"], "resourceNames": ["serving-gpu"]}])


def test_every_object_validates_strictly(check, synced, crd_dir):
    crds = CrdSchemas(crd_dir)
    built = [obj for c in (check, synced) for step in c.steps for obj in step.objects]
    errors = {f"{obj['kind']}/{obj['metadata']['name']}": e for obj in built if (e := schema_errors(obj, crds))}
    assert built and errors == {}


def test_every_pod_is_restricted(check, synced):
    restricted = {k: v for k, v in restricted_security_context(0).items() if k not in ("runAsUser", "runAsGroup")}
    specs = [*pods(check), *pods(synced)]
    assert len(specs) == 9
    for pod in specs:
        assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        for c in pod["containers"]:
            assert {k: v for k, v in c["securityContext"].items() if k not in ("runAsUser", "runAsGroup")} == restricted
            assert c["resources"]["requests"] and c["resources"]["limits"]


def test_the_secret_of_the_team_member_is_a_need(check):
    assert check.needs[0] == (
        "the Secret airflow-team-yield in fab-verify on compute with keys username and password: a Keycloak account "
        "(realm fab) in the group team-yield, without a second factor, that signs in to Airflow")


def test_a_team_without_a_serving_loop_gives_the_reason():
    raw = raw_site()
    del raw["teams"]["yield"]["serving_loop"]
    assert not_applicable(parse_site(raw), 3) == [(
        "03-serving-loop-yield",
        "team yield has no serving loop (teams.yield.serving_loop): its DAG serving_loop_yield is not in Airflow")]


def test_the_check_is_skipped_without_a_run():
    assert not_applicable(parse_site(small_site()), 3) == [(
        "03-serving-loop", "acceptance.serving_loop names no team and model whose serving-loop DAG the check triggers "
        "(docs/acceptance.md, phase 03)")]


def test_fails_when_the_run_names_features_the_team_does_not_have():
    assert config_errors(raw_site(features="lots")) == [
        "fab-platform:site.acceptance.serving_loop.features: lots is not a feature set of team yield; name one of wafer "
        "(teams.yield.serving_loop.features)"]


# --- verdicts ------------------------------------------------------------------------------------------------------

def test_passes_when_the_run_went_through(check):
    assert check.judge(good()) == (True, (
        f"run {RUN_ID} of serving_loop_yield, triggered as team yield, trained in team-yield (admitted by team-yield) from "
        f"yield.wafer_features at fab-{SLUG} (snapshot 4242), published qwen3-8b {SLUG}, to be served by the stack-file "
        "change the run printed; qwen3-8b answered at https://llm.site-t.fab.internal/models/qwen3-8b/v1"))


def test_passes_with_argo_cd_when_the_canary_is_synced(synced):
    passed, message = synced.judge(good(argocd=True))
    assert passed and "served as a canary by serving-gpu;" in message


def test_fails_when_the_trigger_probe_did_not_run(check):
    assert check.judge({"0.succeeded": "false"}) == (
        False, "the Airflow run probe did not finish (its job failed or timed out)")


def test_fails_when_the_sign_in_is_refused(check):
    assert check.judge({**good(), "0.signin": "no-token"}) == (
        False, "signing in to https://airflow.site-t.fab.internal through Keycloak with the account of Secret "
        "airflow-team-yield failed (no-token)")


def test_fails_when_the_run_id_exists(check):
    assert check.judge({**good(), "0.trigger_status": "409"}) == (
        False, f"serving_loop_yield has a run {RUN_ID} already (409): run the check again")


def test_fails_when_the_account_may_not_trigger_the_dag(check):
    assert check.judge({**good(), "0.trigger_status": "403"}) == (
        False, "Airflow refused to trigger serving_loop_yield as the account of Secret airflow-team-yield (403): it must "
        "be a member of the Keycloak group team-yield, whose role alone may trigger it")


def test_fails_when_the_trigger_answers_otherwise(check):
    assert check.judge({**good(), "0.trigger_status": "422", "0.trigger_detail": "conf invalid"}) == (
        False, "triggering serving_loop_yield answered 422: conf invalid")


def test_fails_when_the_run_fails(check):
    results = {**good(), "0.state": "failed", "0.task_train": "failed", "0.task_wait_for_training": "upstream_failed",
               "0.task_publish_model": "none"}
    del results["0.task_wait_for_publish"]
    results["0.task_open_serving_change"] = "upstream_failed"
    assert check.judge(results) == (
        False, f"run {RUN_ID} of serving_loop_yield ended failed (tasks not succeeded: train failed, wait_for_training "
        "upstream_failed, publish_model none, wait_for_publish none, open_serving_change upstream_failed)")


def test_fails_when_a_task_did_not_succeed_in_a_successful_run(check):
    assert check.judge({**good(), "0.task_prepare_features": "skipped"}) == (
        False, f"run {RUN_ID} of serving_loop_yield succeeded without prepare_features succeeding")


def test_fails_when_the_training_job_is_not_found(check):
    assert check.judge({**good(), "1.job": "none", "1.cluster_queue": "", "1.admitted": ""}) == (
        False, f"no training Job of run {SLUG} (label fab.internal/run={SLUG}) in team-yield on gpu")


def test_fails_when_the_admission_check_was_not_run(check):
    results = {k: v for k, v in good().items() if not k.startswith("1.")}
    assert check.judge({**results, "1.succeeded": "false", "1.missing": "0.run"}) == (
        False, "the admission check did not finish (its job failed or timed out)")


def test_fails_when_another_cluster_queue_admitted_the_training(check):
    assert check.judge({**good(), "1.cluster_queue": "team-fdc"}) == (
        False, f"the training Job of run {SLUG} was admitted by ClusterQueue team-fdc (admitted true); team-yield's quota "
        "expected")


def test_a_finished_workload_whose_admission_kueue_cleared_counts_as_admitted_by_its_queue(check):
    """kubernetes-sigs/kueue#8188: a finished Workload loses `status.admission`; it finished Succeeded from the team's
    LocalQueue, so the team's ClusterQueue admitted it."""
    cleared = {"1.cluster_queue": "", "1.admitted": "false", "1.finished": "Succeeded", "1.queue_name": "training"}
    assert check.judge({**good(), **cleared})[0] is True


def test_fails_when_a_cleared_workload_did_not_finish_from_the_teams_queue(check):
    cleared = {"1.cluster_queue": "", "1.admitted": "false", "1.finished": "Succeeded", "1.queue_name": "other"}
    assert check.judge({**good(), **cleared}) == (
        False, f"the training Job of run {SLUG} was admitted by ClusterQueue none (admitted false); team-yield's quota expected")


def test_fails_when_the_model_was_not_published(check):
    assert check.judge({**good(), "2.get_status": "404"}) == (
        False, f"s3://site-t-models/qwen/qwen3-8b/{SLUG}/metadata.json answered 404 to team yield's keys: the run did not "
        "publish")


def test_fails_when_the_published_model_names_another_tag(check):
    assert check.judge({**good(), "2.iceberg_ref": "fab-manual-1"}) == (
        False, f"s3://site-t-models/qwen/qwen3-8b/{SLUG}/metadata.json names snapshot 4242, Iceberg ref fab-manual-1 and "
        f"metrics true: fab-{SLUG}, its snapshot and the metrics expected")


def test_fails_when_the_tag_is_gone_from_polaris(check):
    assert check.judge({**good(), "2.tag_snapshot_id": ""}) == (
        False, f"yield.wafer_features's tag fab-{SLUG} in Polaris points to snapshot none (table 200); the model was "
        "trained from 4242")


def test_fails_when_argo_cd_has_not_synced_the_canary(synced):
    assert synced.judge({**good(argocd=True), "3.sync": "OutOfSync", "3.canary": ""}) == (
        False, "Argo CD Application serving-gpu is OutOfSync and Healthy, Deployment vllm-qwen3-8b-canary absent; Synced, "
        "Healthy and a Healthy canary expected")


def test_fails_when_the_gateway_does_not_answer(check):
    assert check.judge({**good(), "3.chat_status": "503"}) == (
        False, "the gateway call to qwen3-8b at https://llm.site-t.fab.internal/models/qwen3-8b/v1: token 200, chat 503; "
        "200 expected for both")


# --- the runner hands figures from one step to the next ------------------------------------------------------------

NS = "fab-verify"
CONTEXT = "site-t-gpu"


def _job(name: str, env_value: str) -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "namespace": NS},
            "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [
                {"name": "main", "image": "busybox:1.37", "env": [{"name": "RUN", "value": env_value}]}]}}}}


def _run(api: FakeApi, tmp_path: Path, *steps: Step) -> dict[str, str]:
    clock = [0.0]
    kubeconfig = tmp_path / "kubeconfig"
    criterion = Criterion(3, "03-serving-loop-yield", "t", steps, lambda r: (True, "ok"))
    with serve(api, kubeconfig, {CONTEXT: "site-t-gpu"}):
        runner = Runner({"gpu": CONTEXT}, kubeconfig=str(kubeconfig), poll_sec=5, clock=lambda: clock[0],
                        sleep=lambda s: clock.__setitem__(0, clock[0] + s))
        (outcome,) = runner.run([criterion])
    return outcome.results


def _follow_api() -> FakeApi:
    done = {"conditions": [{"type": "Complete", "status": "True"}]}
    return FakeApi(statuses={f"/apis/batch/v1/namespaces/{NS}/jobs/{n}": [done] for n in ("trigger", "follow")},
                   pods={"batch.kubernetes.io/job-name=trigger": ["trigger-a"], "batch.kubernetes.io/job-name=follow": ["follow-a"]},
                   logs={"trigger-a": "FAB-RESULT run=fab-verify-1\n", "follow-a": "FAB-RESULT followed=true\n"})


def test_a_later_step_is_applied_with_the_figure_an_earlier_step_reported(tmp_path):
    api = _follow_api()
    steps = (Step("gpu", (_job("trigger", "none"),), ("Job", "trigger"), 60),
             Step("gpu", (_job("follow", f"run {figure(0, 'run')}"),), ("Job", "follow"), 60))
    results = _run(api, tmp_path, *steps)
    (applied,) = [r.body for r in api.requests if r.method == "PATCH" and r.path.endswith("/jobs/follow")]
    assert applied["spec"]["template"]["spec"]["containers"][0]["env"] == [{"name": "RUN", "value": "run fab-verify-1"}]
    assert results["1.followed"] == "true"


def test_a_step_whose_figure_was_not_reported_is_not_applied(tmp_path):
    api = _follow_api()
    api.logs["trigger-a"] = "FAB-RESULT signin=no-token\n"
    steps = (Step("gpu", (_job("trigger", "none"),), ("Job", "trigger"), 60),
             Step("gpu", (_job("follow", figure(0, "run")),), ("Job", "follow"), 60))
    results = _run(api, tmp_path, *steps)
    assert not [r for r in api.requests if r.path.endswith("/jobs/follow")]
    assert (results["1.succeeded"], results["1.missing"]) == ("false", "0.run")


def test_a_figure_that_is_not_a_plain_token_is_not_put_in_a_later_step(tmp_path):
    """A figure read from a pod's log goes into a later step's scripts and label selectors: a value with a quote or a
    blank (a log that says more than a run id) is refused as if not reported."""
    api = _follow_api()
    api.logs["trigger-a"] = "FAB-RESULT run=x' -l 'app=other\n"
    steps = (Step("gpu", (_job("trigger", "none"),), ("Job", "trigger"), 60),
             Step("gpu", (_job("follow", figure(0, "run")),), ("Job", "follow"), 60))
    results = _run(api, tmp_path, *steps)
    assert not [r for r in api.requests if r.path.endswith("/jobs/follow")]
    assert results["1.missing"] == "0.run"


# --- the probe against local servers -------------------------------------------------------------------------------

JWT = "eyJhbGciOiJIUzUxMiJ9.eyJzdWIiOiI3In0.c2ln"


class Airflow:
    """Keycloak's sign-in and Airflow's API as far as the probe uses them: the FAB auth manager's OAuth sign-in
    (`/auth/login/keycloak` -> Keycloak's form -> `/auth/oauth-authorized/keycloak`, which sets the `_token` cookie) and
    the REST API v2 (trigger, the run's state, its task instances) for that token alone."""

    def __init__(self, password: str = "s3cret", trigger_status: int = 200, states: tuple[str, ...] = ("running", "success"),
                 paused: bool = False):
        self.password, self.trigger_status, self.states, self.paused = password, trigger_status, list(states), paused
        self.triggered: list[dict[str, Any]] = []
        self.base = ""

    def handle(self, method: str, path: str, query: dict[str, list[str]], headers: Mapping[str, str], body: bytes
               ) -> tuple[int, dict[str, str], bytes]:
        if path == "/auth/login/keycloak":
            return 302, {"Location": f"{self.base}/realms/fab/protocol/openid-connect/auth?client_id=airflow&state=s1"}, b""
        if path == "/realms/fab/protocol/openid-connect/auth":
            page = (FIXTURES / "keycloak" / "login.html").read_text().replace("{base}", self.base)
            return 200, {"Content-Type": "text/html"}, page.encode()
        if path == "/realms/fab/login-actions/authenticate":
            form = parse_qs(body.decode())
            assert query["session_code"] == ["Xq3f"] and query["tab_id"] == ["Tz1"]  # the action, unescaped
            if form.get("username") == ["verify-yield"] and form.get("password") == [self.password]:
                return 302, {"Location": f"{self.base}/auth/oauth-authorized/keycloak?state=s1&code=c1"}, b""
            return 200, {"Content-Type": "text/html"}, b"<html>Invalid username or password.</html>"
        if path == "/auth/oauth-authorized/keycloak":
            return 302, {"Location": f"{self.base}/", "Set-Cookie": f"_token={JWT}; HttpOnly; Path=/"}, b""
        if path == "/":
            return 200, {"Content-Type": "text/html"}, b"<html>Airflow</html>"
        if headers.get("Authorization") != f"Bearer {JWT}":
            return 401, {}, b'{"detail": "Not authenticated"}'
        runs = "/api/v2/dags/serving_loop_yield/dagRuns"
        if method == "GET" and path == "/api/v2/dags/serving_loop_yield":
            return 200, {}, json.dumps({"dag_id": "serving_loop_yield", "is_paused": self.paused}).encode()
        if method == "POST" and path == runs:
            self.triggered.append(json.loads(body))
            return self.trigger_status, {}, json.dumps({"detail": "exists"} if self.trigger_status != 200 else {}).encode()
        run = self.triggered[-1]["dag_run_id"] if self.triggered else ""
        if path == f"{runs}/{run}":
            state = self.states.pop(0) if len(self.states) > 1 else self.states[0]
            return 200, {}, json.dumps({"dag_run_id": run, "state": state}).encode()
        if path == f"{runs}/{run}/taskInstances":
            tasks = [{"task_id": t, "state": "success"} for t in TASKS]
            return 200, {}, json.dumps({"task_instances": tasks, "total_entries": len(tasks)}).encode()
        return 404, {}, b"{}"


@contextmanager
def local(app: Any) -> Iterator[str]:
    class Handler(BaseHTTPRequestHandler):
        def _serve(self) -> None:
            split = urlsplit(self.path)
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            status, headers, data = app.handle(self.command, unquote(split.path), parse_qs(split.query), self.headers, body)
            self.send_response(status)
            for key, value in headers.items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = _serve

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        app.base = f"http://127.0.0.1:{server.server_port}"
        yield app.base
    finally:
        server.shutdown()
        server.server_close()


def probe(args: list[str], **env: str) -> dict[str, str]:
    out = subprocess.run([sys.executable, str(PROBE_SCRIPT), *args], capture_output=True, text=True, check=True,
                         env={**os.environ, "FAB_POLL_SEC": "0", **env}, timeout=60).stdout
    return probe_results(out)


def probe_results(out: str) -> dict[str, str]:
    found: dict[str, str] = {}
    for line in out.splitlines():
        if line.startswith("FAB-RESULT "):
            key, value = line[len("FAB-RESULT "):].split("=", 1)
            found[key] = value
    return found


CONF = json.dumps({"model": "qwen3-8b", "features": "wafer", "serving_change": "commit"})


def test_the_probe_signs_in_through_keycloak_triggers_as_the_member_and_follows_the_run():
    airflow = Airflow()
    with local(airflow) as base:
        results = probe(["airflow-run", base, "serving_loop_yield", "600", CONF],
                        AIRFLOW_USERNAME="verify-yield", AIRFLOW_PASSWORD="s3cret")
    (posted,) = airflow.triggered
    run_id = results["run_id"]
    assert run_id.startswith("fab-verify-") and results["run"] == serving_loop_steps.run_slug(run_id)
    assert posted == {"dag_run_id": run_id, "logical_date": None,
                      "conf": {"model": "qwen3-8b", "features": "wafer", "serving_change": "commit", "revision": results["run"]}}
    assert {k: v for k, v in results.items() if k not in ("run_id", "run", "revision")} == {
        "signin": "ok", "paused": "false", "trigger_status": "200", "state": "success",
        **{f"task_{t}": "success" for t in TASKS}}
    assert results["revision"] == results["run"]


def test_the_probe_does_not_trigger_a_paused_dag():
    airflow = Airflow(paused=True)
    with local(airflow) as base:
        results = probe(["airflow-run", base, "serving_loop_yield", "600", CONF],
                        AIRFLOW_USERNAME="verify-yield", AIRFLOW_PASSWORD="s3cret")
    assert (airflow.triggered, results["paused"], "trigger_status" in results) == ([], "true", False)


def test_fails_when_the_dag_is_paused(check):
    assert check.judge({**{k: v for k, v in good().items() if k.startswith("0.s")}, "0.paused": "true"}) == (
        False, "serving_loop_yield is paused in Airflow: a trigger would queue a run that never starts; unpause it "
        "(`airflow dags unpause serving_loop_yield`, or the toggle in Airflow's UI) and run the check again")


def test_the_probe_reports_refused_credentials():
    with local(Airflow(password="other")) as base:
        results = probe(["airflow-run", base, "serving_loop_yield", "600", CONF],
                        AIRFLOW_USERNAME="verify-yield", AIRFLOW_PASSWORD="s3cret")
    assert results == {"signin": "no-token"}


def test_the_probe_reports_a_run_id_that_exists():
    with local(Airflow(trigger_status=409)) as base:
        results = probe(["airflow-run", base, "serving_loop_yield", "600", CONF],
                        AIRFLOW_USERNAME="verify-yield", AIRFLOW_PASSWORD="s3cret")
    assert (results["trigger_status"], results["trigger_detail"], "state" in results) == ("409", '{"detail": "exists"}', False)


def test_the_probe_names_runs_as_the_dag_does():
    for run_id in ("fab-verify-20260301T100000Z", "manual__2026-03-01T10:00:00+00:00", "x" * 80):
        assert probe_script.run_slug(run_id) == serving_loop_steps.run_slug(run_id)


class Store:
    """AIStor's GET Object of a published model's metadata.json and Polaris's token and loadTable, for the probe's
    `model-pin` (neither checks the signature or the token: the probe's signing is tested against AWS's example)."""

    def __init__(self, refs: dict[str, Any]):
        self.refs, self.base = refs, ""

    def handle(self, method: str, path: str, query: Any, headers: Any, body: bytes) -> tuple[int, dict[str, str], bytes]:
        if path == "/site-t-models/qwen/qwen3-8b/r7/metadata.json":
            return 200, {}, json.dumps({"snapshot_id": 4242, "iceberg_ref": "fab-r7", "team": "yield", "revision": "r7",
                                        "metrics": {"loss": 0.1}}).encode()
        if method == "POST" and path == "/api/catalog/v1/oauth/tokens":
            return 200, {}, b'{"access_token": "t1", "token_type": "bearer"}'
        if path == "/api/catalog/v1/fab/namespaces/yield/tables/wafer_features":
            return 200, {}, json.dumps({"metadata": {"refs": self.refs}}).encode()
        return 404, {}, b""


def test_the_model_pin_reads_the_metadata_and_the_tags_snapshot_in_polaris():
    with local(Store({"fab-r7": {"snapshot-id": 4242, "type": "tag"}, "main": {"snapshot-id": 5000, "type": "branch"}})) as base:
        results = probe(["model-pin", "s3://site-t-models/qwen/qwen3-8b/r7/metadata.json", "yield.wafer_features", "fab-r7"],
                        AWS_ENDPOINT_URL_S3=base, AWS_ACCESS_KEY_ID="k", AWS_SECRET_ACCESS_KEY="s",
                        POLARIS_URI=f"{base}/api/catalog", POLARIS_CLIENT_ID="c", POLARIS_CLIENT_SECRET="s",
                        POLARIS_SCOPE="PRINCIPAL_ROLE:ALL", POLARIS_WAREHOUSE="fab")
    assert results == {"get_status": "200", "snapshot_id": "4242", "team": "yield", "revision": "r7", "iceberg_ref": "fab-r7",
                       "has_metrics": "true", "table_status": "200", "tag_snapshot_id": "4242", "tag_type": "tag"}


def test_the_model_pin_reports_a_tag_that_is_gone():
    with local(Store({"main": {"snapshot-id": 5000, "type": "branch"}})) as base:
        results = probe(["model-pin", "s3://site-t-models/qwen/qwen3-8b/r7/metadata.json", "yield.wafer_features", "fab-r7"],
                        AWS_ENDPOINT_URL_S3=base, AWS_ACCESS_KEY_ID="k", AWS_SECRET_ACCESS_KEY="s",
                        POLARIS_URI=f"{base}/api/catalog", POLARIS_CLIENT_ID="c", POLARIS_CLIENT_SECRET="s",
                        POLARIS_SCOPE="PRINCIPAL_ROLE:ALL", POLARIS_WAREHOUSE="fab")
    assert (results["tag_snapshot_id"], results["tag_type"]) == ("", "")


# --- the kubectl scripts, run by bash against a kubectl that answers as the API would ------------------------------

FAKE_KUBECTL = r'''#!/bin/bash
printf '%s\n' "$*" >> "$KUBECTL_LOG"
case "$*" in
  *"get jobs"*) echo -n job-uid-1 ;;
  *'uid=="job-uid-1"'*clusterQueue*) echo -n team-yield ;;
  *'uid=="job-uid-1"'*Admitted*) echo -n True ;;
  *'uid=="job-uid-1"'*Finished*) echo -n Succeeded ;;
  *'uid=="job-uid-1"'*queueName*) echo -n training ;;
  *"{.status.sync.status}"*) echo -n Synced ;;
  *"{.status.health.status}"*) echo -n Healthy ;;
  *".status.resources"*) printf 'Service/vllm-qwen3-8b-canary=Healthy\nDeployment/vllm-qwen3-8b-canary=Healthy\nDeployment/vllm-qwen3-8b=Healthy\n' ;;
esac
'''


def run_script(script: str, tmp_path: Path) -> tuple[dict[str, str], list[str]]:
    (tmp_path / "kubectl").write_text(FAKE_KUBECTL)
    (tmp_path / "kubectl").chmod(0o755)
    log = tmp_path / "calls"
    out = subprocess.run(["/bin/bash", "-c", script], capture_output=True, text=True, check=True, timeout=60,
                         env={"PATH": f"{tmp_path}:/usr/bin:/bin", "KUBECTL_LOG": str(log)}).stdout
    return probe_results(out), log.read_text().splitlines()


def test_the_admission_script_reads_the_workload_of_the_runs_training_job(check, tmp_path):
    script = container(check.steps[1])["args"][0].replace(figure(0, "run"), SLUG)
    results, calls = run_script(script, tmp_path)
    assert results == {"job": "found", "cluster_queue": "team-yield", "admitted": "true", "finished": "Succeeded",
                       "queue_name": "training"}
    assert calls[0] == (f"-n team-yield get jobs -l fab.internal/run={SLUG},fab.internal/step=train -o "
                        "jsonpath={.items[0].metadata.uid}")


def test_the_sync_script_finds_the_canarys_deployment(synced, tmp_path):
    results, calls = run_script(container(synced.steps[3])["args"][0], tmp_path)
    assert results == {"sync": "Synced", "health": "Healthy", "canary": "Healthy"}
    assert all(c.startswith("-n argocd get applications.argoproj.io serving-gpu -o jsonpath=") for c in calls)



def test_a_training_image_the_dag_would_refuse_gives_its_reason():
    assert not_applicable(parse_site(raw_site(training_image="docker.io/library/python:3.12")), 3) == [(
        "03-serving-loop-yield",
        "acceptance.serving_loop: training_image 'docker.io/library/python:3.12' is not an image of team yield's training "
        "repositories (registry.site-t.fab.internal/yield/train; teams.yield.serving_loop.training_images): name one of "
        "them with a tag or a digest")]


def test_an_unpinned_training_image_gives_the_reason():
    assert [cid for cid, _ in not_applicable(parse_site(raw_site(training_image="registry.site-t.fab.internal/yield/train")), 3)] == [
        "03-serving-loop-yield"]
