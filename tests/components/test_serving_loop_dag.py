"""The serving-loop DAG (components/dags/serving_loop.py) offline: its steps (components/dags/serving_loop_steps.py): the
serving edits on the rendered manifests, the jobs it submits; its task graph (with stubbed Airflow modules, and with
Airflow's own DagBag where Airflow is installed)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import types
from pathlib import Path
from typing import Any, Self

import pytest
import yaml
from airflow_dagbag import airflow_dagbag, needs_airflow
from helpers import render_small
from small_site import small_site

from components.constants import TRAINING_MODEL_URI
from components.data_access import team_prefix
from components.training_submission import airflow_submission, example_job
from fabctl.serving import delivered_by_pulumi, manifest_text, serving_tree
from fabctl.stackfile import SITE_KEY

DAG_FILE = Path(__file__).parents[2] / "components" / "dags" / "serving_loop.py"
STEPS_FILE = DAG_FILE.with_name("serving_loop_steps.py")


def load_dag_module(name: str) -> types.ModuleType:
    """The DAG file as a module, without building the DAG."""
    os.environ["FAB_SERVING_LOOP_NO_DAG"] = "1"
    try:
        spec = importlib.util.spec_from_file_location(name, DAG_FILE)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        del os.environ["FAB_SERVING_LOOP_NO_DAG"]
    return module


steps = load_dag_module("serving_loop_functions").steps
"""The steps' pure functions, as the DAG file loads them."""

# ------------------------------------------------------------------------------------------------
# One model's directory of the serving repository, as `fabctl serving render` writes it (fabctl/serving.py) for the
# smallest site serving its one model at a revision, with or without a canary.

MODEL, SOURCE, BUCKET = "qwen3-8b", "qwen/qwen3-8b/", "site-t-models"
_RENDERS: dict[str, dict[str, str]] = {}


def render_model_dir(revision: str, canary: dict[str, Any] | None = None) -> dict[str, str]:
    """The files of `<cluster>/<model>/` for the model serving `revision` (and a canary): the real renderer's output."""
    key = json.dumps([revision, canary], sort_keys=True)
    if key not in _RENDERS:
        site = small_site()
        site["inference"]["models"][MODEL].update(revision=revision, **({"canary": canary} if canary else {}))
        config = delivered_by_pulumi({SITE_KEY: site})
        tree = serving_tree(render_small(config[SITE_KEY]), config)
        _RENDERS[key] = {path.rsplit("/", 1)[1]: manifest_text(obj) for path, (obj, _) in tree.items()}
    return dict(_RENDERS[key])


CANARY = {"revision": "r20260301", "weight_percent": 10, "replicas": 1}


def test_open_canary_on_the_render_gives_the_render_with_the_canary_config():
    # With the lead's renderer: render_model_dir -> `fabctl serving render` of the same site without and with the canary.
    assert steps.open_canary(render_model_dir("r20260101"), MODEL, **CANARY) == render_model_dir("r20260101", CANARY)


def test_promote_on_the_render_with_a_canary_gives_the_render_at_the_canarys_revision():
    # With the lead's renderer: `revision: r20260301` and no canary, against `revision: r20260101` with the canary.
    assert steps.promote(render_model_dir("r20260101", CANARY), MODEL) == render_model_dir("r20260301")


def test_reverting_the_canary_is_the_render_before_it():
    """Rollback is `git revert` of the canary's commit: the files before it, which open_canary left untouched."""
    before = render_model_dir("r20260101")
    after = steps.open_canary(before, MODEL, **CANARY)
    assert {name: after[name] for name in ("deployment.yaml", "service.yaml", "pdb.yaml")} == {
        name: before[name] for name in ("deployment.yaml", "service.yaml", "pdb.yaml")}


def test_the_stable_service_and_pdb_select_no_canary_pod():
    files = steps.open_canary(render_model_dir("r20260101"), MODEL, **CANARY)
    canary_pods = yaml.safe_load(files["canary.yaml"])["spec"]["template"]["metadata"]["labels"]
    selectors = [yaml.safe_load(files["service.yaml"])["spec"]["selector"],
                 yaml.safe_load(files["pdb.yaml"])["spec"]["selector"]["matchLabels"]]
    assert selectors
    assert [s for s in selectors if s.items() <= canary_pods.items()] == []


def test_the_canary_reads_its_revisions_weights_and_cache():
    canary = yaml.safe_load(steps.open_canary(render_model_dir("r20260101"), MODEL, **CANARY)["canary.yaml"])
    pod = canary["spec"]["template"]["spec"]
    sync = next(c for c in pod["initContainers"] if c["name"] == "weights-sync")
    assert (sync["args"][-2:], pod["containers"][0]["args"][1]) == (
        [f"models/{BUCKET}/{SOURCE}r20260301", f"/models/{MODEL}/r20260301"], f"/models/{MODEL}/r20260301")


def test_fails_when_the_model_has_a_canary_already():
    with pytest.raises(steps.ServingChangeError) as info:
        steps.open_canary(render_model_dir("r20260101", CANARY), MODEL, "r20260401", 10, 1)
    assert str(info.value) == (f"vllm-{MODEL} already has a canary (canary.yaml, canary-service.yaml, revision r20260301): "
                               "promote it or revert its commit first")


def test_fails_when_the_stable_deployment_serves_no_revision():
    files = render_model_dir("r20260101")
    deployment = yaml.safe_load(files["deployment.yaml"])
    del deployment["spec"]["template"]["metadata"]["labels"]["fab.internal/model-revision"]
    with pytest.raises(steps.ServingChangeError) as info:
        steps.open_canary({**files, "deployment.yaml": steps.dump(deployment)}, MODEL, **CANARY)
    assert str(info.value) == (
        f"Deployment vllm-{MODEL} serves no revision (its pods have no fab.internal/model-revision label): set "
        f"inference.models.{MODEL}.revision to the revision it serves, render, and start the canary from there")


def test_fails_when_the_canary_weight_is_above_half():
    with pytest.raises(steps.ServingChangeError) as info:
        steps.open_canary(render_model_dir("r20260101"), MODEL, "r20260301", 60, 1)
    assert str(info.value) == "weight_percent 60 is outside 1-50 (inference.models.<m>.canary.weight_percent)"


def test_fails_when_promoting_without_a_canary():
    with pytest.raises(steps.ServingChangeError) as info:
        steps.promote(render_model_dir("r20260101"), MODEL)
    assert str(info.value) == f"vllm-{MODEL} has no canary to promote"


# ------------------------------------------------------------------------------------------------
# The run and its jobs.

TRAIN_REPO = "registry.site-t.fab.internal/wafermap/train"
PLATFORM = {"models_bucket": BUCKET, "checkpoints_bucket": "site-t-checkpoints",
            "images": {"s3": "quay.io/minio/mc:RELEASE.2025-08-13T08-35-41Z", "python": "python:3.13.9-slim-bookworm"},
            "spark": {"namespace": "spark", "template": "/opt/airflow/spark/sparkapplication.yaml",
                      "image": "apache/spark:3.5.7-scala2.12-java17-python3-ubuntu", "spark_version": "3.5.7",
                      "packages": ["org.apache.iceberg:iceberg-spark-runtime-3.5_2.12:1.10.0"],
                      "feature_job": {"config_map": "feature-job", "mount_path": "/opt/fab", "file": "feature_job.py"}},
            "serving_loop": {team: {"role": f"team-{team}", "training_images": [f"registry.site-t.fab.internal/{team}/train"],
                                    "features": {"wafers": {"table": f"{team}.features", "sql": "SELECT wafer_id FROM yield.wafers"}}}
                             for team in ("wafermap", "fdc")}}
SUBMISSION = airflow_submission({"wafermap": ("site-t-gpu", "team-wafermap", "gpu_gpu")})
PARAMS = {"model": MODEL, "source": "", "features": "wafers", "training_image": f"{TRAIN_REPO}:1.0.0",
          "code_revision": "4f2c9e1", "revision": ""}


def plan_for(params: dict[str, Any], team: str = "wafermap") -> dict[str, Any]:
    return steps.plan_run(team, {**PARAMS, **params}, "run-1", PLATFORM, SUBMISSION)


def refusal(params: dict[str, Any], team: str = "wafermap") -> str:
    with pytest.raises(ValueError) as info:
        plan_for(params, team)
    return str(info.value)


def test_a_run_publishes_into_the_teams_prefix_of_the_models_bucket():
    plan = steps.plan_run("wafermap", PARAMS, "manual__2026-03-01T10:00:00+00:00", PLATFORM, SUBMISSION)
    assert (plan["model_prefix"], plan["tag"], plan["output_uri"]) == (
        f"s3://{BUCKET}/wafermap/{MODEL}/manual-2026-03-01t10-00-00-00-00/",
        "fab-manual-2026-03-01t10-00-00-00-00",
        "s3://site-t-checkpoints/wafermap/runs/manual-2026-03-01t10-00-00-00-00/",
    )


def test_fails_when_the_source_is_outside_the_teams_prefix():
    assert refusal({"source": "meta/llama/"}) == (f"source 'meta/llama/' is outside the team's prefix s3://{BUCKET}/wafermap/: a team publishes only "
                               "under wafermap/ (inference.models.<m>.source)")


def test_fails_when_the_team_has_no_submission():
    assert refusal({"training_image": "registry.site-t.fab.internal/fdc/train:1.0.0"}, "fdc") == (
        "team 'fdc' has no training submission on this site; teams: wafermap")


def test_a_run_takes_its_image_and_features_from_the_teams_lists():
    plan = plan_for({})
    assert (plan["team"], plan["namespace"], plan["training_image"], plan["table"], plan["sql"]) == (
        "wafermap", "team-wafermap", f"{TRAIN_REPO}:1.0.0", "wafermap.features", "SELECT wafer_id FROM yield.wafers")


def test_a_run_may_name_its_own_team():
    assert plan_for({"team": "wafermap"})["namespace"] == "team-wafermap"


def test_fails_when_a_run_names_another_team():
    assert refusal({"team": "fdc"}) == "serving_loop_wafermap runs for team wafermap only: a run may not name team 'fdc' (its members trigger serving_loop_fdc)"


def test_fails_when_the_training_image_is_not_from_the_teams_repositories():
    assert refusal({"training_image": "registry.site-t.fab.internal/fdc/train:1.0.0"}) == (
        "training_image 'registry.site-t.fab.internal/fdc/train:1.0.0' is not an image of team wafermap's training "
        f"repositories ({TRAIN_REPO}; teams.wafermap.serving_loop.training_images): name one of them with a tag or a digest")


@pytest.mark.parametrize("image", [TRAIN_REPO, f"{TRAIN_REPO}:", f"{TRAIN_REPO}@sha256:abc", f"{TRAIN_REPO}/../x:1",
                                   f"{TRAIN_REPO}-evil:1", f"evil.example/{TRAIN_REPO}:1"])
def test_fails_when_the_training_image_is_not_a_pinned_image_of_the_repository(image):
    assert refusal({"training_image": image}).startswith(f"training_image {image!r} is not an image of team wafermap's")


def test_a_pinned_digest_of_the_repository_is_a_training_image():
    image = f"{TRAIN_REPO}:1.0.0@sha256:{'a' * 64}"
    assert plan_for({"training_image": image})["training_image"] == image


def test_fails_when_a_run_chooses_the_feature_steps_image_or_job():
    assert refusal({"spark_image": "docker.io/me/spark:1", "feature_job": "s3a://me/job.py"}) == (
        "a run may not choose feature_job, spark_image: the feature step runs the platform's Spark image and feature job as "
        "the Spark engine, with the features of teams.wafermap.serving_loop.features (name one as `features`)")


def test_fails_when_a_run_gives_its_own_feature_sql():
    assert refusal({"feature_sql": "SELECT reflect('java.lang.System', 'getenv', 'AWS_SECRET_ACCESS_KEY')"}).startswith(
        "a run may not choose feature_sql: ")


def test_fails_when_the_features_are_not_the_teams():
    assert refusal({"features": "other"}) == "features 'other' is not one of team wafermap's feature sets: wafers (teams.wafermap.serving_loop.features)"


def test_fails_when_the_team_has_no_serving_loop():
    assert refusal({}, "yield") == "team yield has no serving loop on this site (teams.yield.serving_loop)"


def test_the_feature_step_runs_the_platforms_image_and_job_whatever_the_run():
    app = steps.feature_application({"spec": {}}, PLATFORM, ["--table", "t"])["spec"]
    assert (app["image"], app["sparkVersion"], app["mainApplicationFile"], app["deps"]) == (
        PLATFORM["spark"]["image"], "3.5.7", "local:///opt/fab/feature_job.py", {"packages": PLATFORM["spark"]["packages"]})


def test_the_training_job_is_the_submission_contracts_job():
    """The DAG's Job carries what `training.example_job` (the stack output) shows a job must: suspended, the LocalQueue
    and priority labels, the training PriorityClass, the team's keys, principal and NCCL settings by envFrom."""
    plan = plan_for({})
    job = steps.training_job(SUBMISSION["job"], plan, "registry.site.fab.internal/ml/train:1.0.0", 1, "16", "128Gi")
    example = example_job("http://polaris", "fab")
    pick = lambda j: (
        j["spec"]["suspend"], {k: v for k, v in j["metadata"]["labels"].items() if k.startswith("kueue.x-k8s.io/")},
        j["spec"]["template"]["spec"]["priorityClassName"], j["spec"]["template"]["spec"]["containers"][0]["envFrom"])
    assert pick(job) == pick(example)


def test_the_publish_job_writes_metadata_last_with_the_teams_keys():
    plan = plan_for({})
    pod = steps.publish_job(SUBMISSION["job"], plan, PLATFORM, "2026-03-01T10:00:00+00:00")["spec"]["template"]["spec"]
    assert ([c["name"] for c in pod["initContainers"]], pod["containers"][0]["args"]) == (
        ["alias", "metrics", "metadata", "model"],
        ["cp", "/work/metadata.json", f"s3/{BUCKET}/wafermap/{MODEL}/run-1/metadata.json"])


def test_the_teams_policy_lets_the_publish_job_write_the_revision_and_nothing_of_another_team():
    from components.data_access import team_policy_document

    statements = team_policy_document("wafermap", ["site-t-datasets"], [BUCKET, "site-t-checkpoints"])["Statement"]
    allowed = [r for s in statements if s["Effect"] == "Allow" and "s3:PutObject" in s["Action"] for r in s["Resource"]]
    matches = lambda key: any(key.startswith(r.removesuffix("*")) for r in allowed)
    written = f"arn:aws:s3:::{BUCKET}/wafermap/{MODEL}/run-1/metadata.json"
    assert (matches(written), matches(f"arn:aws:s3:::{BUCKET}/yield/{MODEL}/run-1/metadata.json"),
            matches(f"arn:aws:s3:::{BUCKET}/meta/llama/run-1/config.json")) == (True, False, False)
    assert team_prefix(BUCKET, "wafermap") == f"s3://{BUCKET}/wafermap/"  # MODEL_URI, the prefix plan_run checks
    assert SUBMISSION["job"]["model_uri_env"] == TRAINING_MODEL_URI


def test_the_metadata_script_records_the_tags_snapshot_and_the_metrics(tmp_path):
    """The publish Job's metadata step against a stand-in Polaris on loopback."""
    import http.server
    import threading

    class Polaris(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            self._send({"access_token": "t"})

        def do_GET(self):
            assert self.path == "/api/catalog/v1/fab/namespaces/wafermap/tables/features", self.path
            self._send({"metadata": {"refs": {"fab-run-1": {"snapshot-id": 4187342123553412345, "type": "tag"}}}})

        def _send(self, body):
            data = json.dumps(body).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Polaris)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    work = tmp_path / "work"
    work.mkdir()
    (work / "metrics.json").write_text(json.dumps({"accuracy": 0.97}))
    script = steps.METADATA_SCRIPT.replace("/work/", f"{work}/")
    env = {"POLARIS_URI": f"http://127.0.0.1:{server.server_port}/api/catalog", "POLARIS_CLIENT_ID": "c",
           "POLARIS_CLIENT_SECRET": "s", "POLARIS_SCOPE": "PRINCIPAL_ROLE:ALL", "POLARIS_WAREHOUSE": "fab",
           "ICEBERG_TABLE": "wafermap.features", "ICEBERG_REF": "fab-run-1", "FAB_METADATA": json.dumps({"revision": "r1"})}
    try:
        subprocess.run([sys.executable, "-c", script], env=env, check=True, timeout=60)
    finally:
        server.shutdown()
    assert json.loads((work / "metadata.json").read_text()) == {
        "metrics": {"accuracy": 0.97}, "revision": "r1", "snapshot_id": 4187342123553412345}


def test_pull_requests_go_to_the_git_servers_api():
    assert steps.pull_request("gitea", "https://git.site-a.fab.internal/ml/serving.git", "fab/m-r2", "main", "t", "b") == (
        "https://git.site-a.fab.internal/api/v1/repos/ml/serving/pulls",
        {"title": "t", "head": "fab/m-r2", "base": "main", "body": "b"})


# ------------------------------------------------------------------------------------------------
# The task graph, with stubbed Airflow modules.

ORDER = ["plan", "prepare_features", "train", "wait_for_training", "publish_model", "wait_for_publish", "open_serving_change"]
"""(a) prepare_features -> (b) train, wait_for_training -> (c) publish_model, wait_for_publish -> (d) open_serving_change."""


class _Task:
    def __init__(self, dag: _Dag, task_id: str, **kwargs: Any):
        self.task_id, self.kwargs, self.upstream = task_id, kwargs, set()
        dag.tasks[task_id] = self

    def __rshift__(self, other: _Task) -> _Task:
        other.upstream.add(self.task_id)
        return other


class _Dag:
    current: _Dag | None = None

    def __init__(self, dag_id: str, **kwargs: Any):
        self.dag_id, self.kwargs, self.tasks = dag_id, kwargs, {}

    def __enter__(self) -> Self:
        _Dag.current = self
        return self

    def __exit__(self, *exc: object) -> None:
        _Dag.current = None


def _task(function=None, **kwargs):
    def decorate(fn):
        def call(*args: Any) -> _Task:
            made = _Task(_Dag.current, fn.__name__, **kwargs)
            made.upstream |= {a.task_id for a in args if isinstance(a, _Task)}
            return made
        return call
    return decorate(function) if function else decorate


_task.sensor = lambda **kwargs: _task(**kwargs)


def stub_airflow(monkeypatch) -> None:
    sdk = types.ModuleType("airflow.sdk")
    sdk.DAG, sdk.task, sdk.Param = _Dag, _task, lambda default=None, **kw: {"default": default, **kw}
    spark = types.ModuleType("airflow.providers.cncf.kubernetes.operators.spark_kubernetes")
    spark.SparkKubernetesOperator = lambda task_id, **kw: _Task(_Dag.current, task_id, **kw)
    for name in ("airflow", "airflow.providers", "airflow.providers.cncf", "airflow.providers.cncf.kubernetes",
                 "airflow.providers.cncf.kubernetes.operators"):
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    monkeypatch.setitem(sys.modules, "airflow.sdk", sdk)
    monkeypatch.setitem(sys.modules, spark.__name__, spark)


def _topological(tasks: dict[str, _Task]) -> list[str]:
    done: list[str] = []
    while len(done) < len(tasks):
        ready = sorted(t for t, task in tasks.items() if t not in done and task.upstream <= set(done))
        assert ready, f"a cycle among {sorted(set(tasks) - set(done))}"
        done.append(ready[0])
    return done


def stubbed_dags(monkeypatch) -> dict[str, _Dag]:
    stub_airflow(monkeypatch)
    module = load_dag_module("serving_loop_stubbed")
    module.PLATFORM, module.SPARK = PLATFORM, PLATFORM["spark"]
    return module._build_dags()


def test_the_dag_runs_features_then_training_then_publishing_then_the_serving_change(monkeypatch):
    dag = stubbed_dags(monkeypatch)["serving_loop_wafermap"]
    assert _topological(dag.tasks) == ORDER
    assert {t: sorted(task.upstream) for t, task in dag.tasks.items()} == {
        "plan": [], "prepare_features": ["plan"], "train": ["plan", "prepare_features"],
        "wait_for_training": ["plan", "train"], "publish_model": ["plan", "wait_for_training"],
        "wait_for_publish": ["plan", "publish_model"], "open_serving_change": ["plan", "wait_for_publish"]}


def test_each_team_with_a_serving_loop_has_its_own_dag(monkeypatch):
    assert sorted(stubbed_dags(monkeypatch)) == ["serving_loop_fdc", "serving_loop_wafermap"]


def test_the_dag_is_parametrised_by_model_features_and_image_not_by_team(monkeypatch):
    params = stubbed_dags(monkeypatch)["serving_loop_wafermap"].kwargs["params"]
    assert ({"model", "features", "training_image", "revision", "code_revision"} <= params.keys(),
            params.keys() & {"team", "table", "feature_sql", "feature_job", "spark_image", "spark_version"},
            params["features"]["enum"]) == (True, set(), ["wafers"])


def test_the_feature_step_takes_nothing_from_the_runs_parameters(monkeypatch):
    spec = stubbed_dags(monkeypatch)["serving_loop_wafermap"].tasks["prepare_features"].kwargs["template_spec"]
    assert ("params" in json.dumps(spec), spec["spec"]["image"]) == (False, PLATFORM["spark"]["image"])


def test_no_dag_without_spark(monkeypatch):
    stub_airflow(monkeypatch)
    module = load_dag_module("serving_loop_stubbed")
    module.PLATFORM, module.SPARK = {**PLATFORM, "spark": None}, {}
    assert module._build_dags() == {}


# ------------------------------------------------------------------------------------------------
# Airflow's own loader, where Airflow is installed: in this interpreter, or the one FAB_AIRFLOW_PYTHON names.

@pytest.fixture(scope="module")
def loaded(tmp_path_factory) -> dict[str, Any]:
    """The DAG file and its steps with this module's platform.json, in Airflow's DagBag, and the plans of a few runs of
    wafermap's DAG."""
    from components.engines.airflow import AIRFLOWIGNORE

    runs = {"own": ("serving_loop_wafermap", PARAMS), "other-team": ("serving_loop_wafermap", {**PARAMS, "team": "fdc"}),
            "other-image": ("serving_loop_wafermap", {**PARAMS, "training_image": "docker.io/me/train:1"})}
    files = {path.name: path.read_text() for path in (DAG_FILE, STEPS_FILE)}
    return airflow_dagbag(tmp_path_factory.mktemp("dagbag"), {**files, ".airflowignore": AIRFLOWIGNORE,
                                                              "platform.json": json.dumps(PLATFORM)}, SUBMISSION, runs)


@needs_airflow
def test_airflows_dagbag_loads_a_dag_per_team_from_the_configmap_volume(loaded):
    assert (loaded["found"], loaded["errors"], {d: dag["order"] for d, dag in loaded["dags"].items()}) == (
        ["platform/serving_loop.py"], {}, {"serving_loop_fdc": ORDER, "serving_loop_wafermap": ORDER})


@needs_airflow
def test_each_teams_dag_names_only_that_teams_role_in_its_access_control(loaded):
    assert {d: dag["access_control"] for d, dag in loaded["dags"].items()} == {
        f"serving_loop_{team}": {f"team-{team}": {"DAG Runs": ["can_create", "can_read"], "DAGs": ["can_edit", "can_read"]}}
        for team in ("fdc", "wafermap")}


@needs_airflow
def test_each_teams_dag_is_not_paused_at_creation_so_that_its_triggered_runs_start(loaded):
    """Airflow pauses a new DAG by default (core.dags_are_paused_at_creation): a team's trigger would queue a run that
    never starts. The DAG has no schedule, so unpaused it runs only when triggered."""
    assert {d: dag["paused_upon_creation"] for d, dag in loaded["dags"].items()} == {
        "serving_loop_fdc": False, "serving_loop_wafermap": False}


@needs_airflow
def test_the_dags_plan_task_plans_a_run_of_its_own_team(loaded):
    assert loaded["runs"]["own"]["plan"]["namespace"] == "team-wafermap"


@needs_airflow
def test_fails_when_a_run_of_the_loaded_dag_names_another_team(loaded):
    assert loaded["runs"]["other-team"] == {"refused": "serving_loop_wafermap runs for team wafermap only: a run may not "
                                            "name team 'fdc' (its members trigger serving_loop_fdc)"}


@needs_airflow
def test_fails_when_a_run_of_the_loaded_dag_names_an_unlisted_image(loaded):
    assert loaded["runs"]["other-image"] == {"refused": (
        "training_image 'docker.io/me/train:1' is not an image of team wafermap's training repositories "
        f"({TRAIN_REPO}; teams.wafermap.serving_loop.training_images): name one of them with a tag or a digest")}
