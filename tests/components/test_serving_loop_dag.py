"""The serving-loop DAG (components/dags/serving_loop.py) offline: its serving edits on the rendered manifests, the jobs
it submits, its task graph (with stubbed Airflow modules, and with Airflow's own DagBag where Airflow is installed)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap
import types
from pathlib import Path
from typing import Any, Self

import pytest
import yaml
from helpers import render_small
from small_site import small_site

from components.constants import TRAINING_MODEL_URI
from components.data_access import team_prefix
from components.training import airflow_submission, example_job
from fabctl.serving import delivered_by_pulumi, manifest_text, serving_tree
from fabctl.stackfile import SITE_KEY

DAG_FILE = Path(__file__).parents[2] / "components" / "dags" / "serving_loop.py"


def load_dag_module(name: str = "serving_loop_functions") -> types.ModuleType:
    """The DAG file as a module, without building the DAG (its pure functions)."""
    os.environ["FAB_SERVING_LOOP_NO_DAG"] = "1"
    try:
        spec = importlib.util.spec_from_file_location(name, DAG_FILE)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        del os.environ["FAB_SERVING_LOOP_NO_DAG"]
    return module


loop = load_dag_module()

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
    assert loop.open_canary(render_model_dir("r20260101"), MODEL, **CANARY) == render_model_dir("r20260101", CANARY)


def test_promote_on_the_render_with_a_canary_gives_the_render_at_the_canarys_revision():
    # With the lead's renderer: `revision: r20260301` and no canary, against `revision: r20260101` with the canary.
    assert loop.promote(render_model_dir("r20260101", CANARY), MODEL) == render_model_dir("r20260301")


def test_reverting_the_canary_is_the_render_before_it():
    """Rollback is `git revert` of the canary's commit: the files before it, which open_canary left untouched."""
    before = render_model_dir("r20260101")
    after = loop.open_canary(before, MODEL, **CANARY)
    assert {name: after[name] for name in ("deployment.yaml", "service.yaml", "pdb.yaml")} == {
        name: before[name] for name in ("deployment.yaml", "service.yaml", "pdb.yaml")}


def test_the_stable_service_and_pdb_select_no_canary_pod():
    files = loop.open_canary(render_model_dir("r20260101"), MODEL, **CANARY)
    canary_pods = yaml.safe_load(files["canary.yaml"])["spec"]["template"]["metadata"]["labels"]
    selectors = [yaml.safe_load(files["service.yaml"])["spec"]["selector"],
                 yaml.safe_load(files["pdb.yaml"])["spec"]["selector"]["matchLabels"]]
    assert selectors
    assert [s for s in selectors if s.items() <= canary_pods.items()] == []


def test_the_canary_reads_its_revisions_weights_and_cache():
    canary = yaml.safe_load(loop.open_canary(render_model_dir("r20260101"), MODEL, **CANARY)["canary.yaml"])
    pod = canary["spec"]["template"]["spec"]
    sync = next(c for c in pod["initContainers"] if c["name"] == "weights-sync")
    assert (sync["args"][-2:], pod["containers"][0]["args"][1]) == (
        [f"models/{BUCKET}/{SOURCE}r20260301", f"/models/{MODEL}/r20260301"], f"/models/{MODEL}/r20260301")


def test_fails_when_the_model_has_a_canary_already():
    with pytest.raises(loop.ServingChangeError) as info:
        loop.open_canary(render_model_dir("r20260101", CANARY), MODEL, "r20260401", 10, 1)
    assert str(info.value) == (f"vllm-{MODEL} already has a canary (canary.yaml, canary-service.yaml, revision r20260301): "
                               "promote it or revert its commit first")


def test_fails_when_the_stable_deployment_serves_no_revision():
    files = render_model_dir("r20260101")
    deployment = yaml.safe_load(files["deployment.yaml"])
    del deployment["spec"]["template"]["metadata"]["labels"]["fab.internal/model-revision"]
    with pytest.raises(loop.ServingChangeError) as info:
        loop.open_canary({**files, "deployment.yaml": loop.dump(deployment)}, MODEL, **CANARY)
    assert str(info.value) == (
        f"Deployment vllm-{MODEL} serves no revision (its pods have no fab.internal/model-revision label): set "
        f"inference.models.{MODEL}.revision to the revision it serves, render, and start the canary from there")


def test_fails_when_the_canary_weight_is_above_half():
    with pytest.raises(loop.ServingChangeError) as info:
        loop.open_canary(render_model_dir("r20260101"), MODEL, "r20260301", 60, 1)
    assert str(info.value) == "weight_percent 60 is outside 1-50 (inference.models.<m>.canary.weight_percent)"


def test_fails_when_promoting_without_a_canary():
    with pytest.raises(loop.ServingChangeError) as info:
        loop.promote(render_model_dir("r20260101"), MODEL)
    assert str(info.value) == f"vllm-{MODEL} has no canary to promote"


# ------------------------------------------------------------------------------------------------
# The run and its jobs.

PLATFORM = {"models_bucket": BUCKET, "checkpoints_bucket": "site-t-checkpoints",
            "images": {"s3": "quay.io/minio/mc:RELEASE.2025-08-13T08-35-41Z", "python": "python:3.13.9-slim-bookworm"}}
SUBMISSION = airflow_submission({"wafermap": ("site-t-gpu", "team-wafermap", "gpu_gpu")})
PARAMS = {"team": "wafermap", "model": MODEL, "source": "", "table": "wafermap.features", "code_revision": "4f2c9e1",
          "revision": ""}


def test_a_run_publishes_into_the_teams_prefix_of_the_models_bucket():
    plan = loop.plan_run(PARAMS, "manual__2026-03-01T10:00:00+00:00", PLATFORM, SUBMISSION)
    assert (plan["model_prefix"], plan["tag"], plan["output_uri"]) == (
        f"s3://{BUCKET}/wafermap/{MODEL}/manual-2026-03-01t10-00-00-00-00/",
        "fab-manual-2026-03-01t10-00-00-00-00",
        "s3://site-t-checkpoints/wafermap/runs/manual-2026-03-01t10-00-00-00-00/",
    )


def test_fails_when_the_source_is_outside_the_teams_prefix():
    with pytest.raises(ValueError) as info:
        loop.plan_run({**PARAMS, "source": "meta/llama/"}, "run-1", PLATFORM, SUBMISSION)
    assert str(info.value) == (f"source 'meta/llama/' is outside the team's prefix s3://{BUCKET}/wafermap/: a team publishes only "
                               "under wafermap/ (inference.models.<m>.source)")


def test_fails_when_the_team_has_no_submission():
    with pytest.raises(ValueError) as info:
        loop.plan_run({**PARAMS, "team": "fdc"}, "run-1", PLATFORM, SUBMISSION)
    assert str(info.value) == "team 'fdc' has no training submission on this site; teams: wafermap"


def test_the_training_job_is_the_submission_contracts_job():
    """The DAG's Job carries what `training.example_job` (the stack output) shows a job must: suspended, the LocalQueue
    and priority labels, the training PriorityClass, the team's keys, principal and NCCL settings by envFrom."""
    plan = loop.plan_run(PARAMS, "run-1", PLATFORM, SUBMISSION)
    job = loop.training_job(SUBMISSION["job"], plan, "registry.site.fab.internal/ml/train:1.0.0", 1, "16", "128Gi")
    example = example_job("http://polaris", "fab")
    pick = lambda j: (
        j["spec"]["suspend"], {k: v for k, v in j["metadata"]["labels"].items() if k.startswith("kueue.x-k8s.io/")},
        j["spec"]["template"]["spec"]["priorityClassName"], j["spec"]["template"]["spec"]["containers"][0]["envFrom"])
    assert pick(job) == pick(example)


def test_the_publish_job_writes_metadata_last_with_the_teams_keys():
    plan = loop.plan_run(PARAMS, "run-1", PLATFORM, SUBMISSION)
    pod = loop.publish_job(SUBMISSION["job"], plan, PLATFORM, "2026-03-01T10:00:00+00:00")["spec"]["template"]["spec"]
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
    script = loop.METADATA_SCRIPT.replace("/work/", f"{work}/")
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
    assert loop.pull_request("gitea", "https://git.site-a.fab.internal/ml/serving.git", "fab/m-r2", "main", "t", "b") == (
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


def test_the_dag_runs_features_then_training_then_publishing_then_the_serving_change(monkeypatch):
    stub_airflow(monkeypatch)
    dag = load_dag_module("serving_loop_stubbed")._build_dag()
    assert (dag.dag_id, _topological(dag.tasks)) == ("serving_loop", ORDER)
    assert {t: sorted(task.upstream) for t, task in dag.tasks.items()} == {
        "plan": [], "prepare_features": ["plan"], "train": ["plan", "prepare_features"],
        "wait_for_training": ["plan", "train"], "publish_model": ["plan", "wait_for_training"],
        "wait_for_publish": ["plan", "publish_model"], "open_serving_change": ["plan", "wait_for_publish"]}


def test_the_dag_is_parametrised_by_team_model_table_and_features(monkeypatch):
    stub_airflow(monkeypatch)
    params = load_dag_module("serving_loop_stubbed")._build_dag().kwargs["params"]
    assert {"team", "model", "table", "feature_sql", "feature_job", "revision", "code_revision"} <= params.keys()


# ------------------------------------------------------------------------------------------------
# Airflow's own loader, where Airflow is installed: in this interpreter, or the one FAB_AIRFLOW_PYTHON names.

AIRFLOW_CHECK = textwrap.dedent('''
    import json, os, sys
    from pathlib import Path
    dags = Path(sys.argv[1])
    from airflow.utils.file import list_py_file_paths
    from airflow.dag_processing.dagbag import DagBag
    found = list_py_file_paths(str(dags))
    bag = DagBag(dag_folder=str(dags), include_examples=False)
    dag = bag.dags.get("serving_loop")
    print(json.dumps({"found": [str(Path(f).relative_to(dags)) for f in found], "errors": {k: str(v) for k, v in bag.import_errors.items()},
                      "order": None if dag is None else [t.task_id for t in dag.topological_sort()],
                      "upstream": None if dag is None else {t.task_id: sorted(t.upstream_task_ids) for t in dag.tasks}}))
''')


def _airflow_python() -> str | None:
    if importlib.util.find_spec("airflow") is not None:
        return sys.executable
    return os.environ.get("FAB_AIRFLOW_PYTHON")


def config_map_volume(root: Path, files: dict[str, str]) -> Path:
    """A directory laid out as the kubelet mounts a ConfigMap: the files in a timestamped directory, `..data` linking
    to it, and each key a link through `..data`."""
    root.mkdir(parents=True)
    stamp = root / "..2026_03_01_10_00_00.000000001"
    stamp.mkdir()
    for name, text in files.items():
        (stamp / name).write_text(text)
    (root / "..data").symlink_to(stamp.name)
    for name in files:
        (root / name).symlink_to(f"..data/{name}")
    return root


@pytest.mark.skipif(_airflow_python() is None, reason="Apache Airflow is not installed here (nor named by FAB_AIRFLOW_PYTHON); "
                    "the stubbed parse test above covers the task graph")
def test_airflows_dagbag_loads_the_dag_from_the_configmap_volume(tmp_path):
    from components.engines.airflow import AIRFLOWIGNORE

    dags = tmp_path / "dags"
    config_map_volume(dags / "platform", {"serving_loop.py": DAG_FILE.read_text(), ".airflowignore": AIRFLOWIGNORE,
                                          "platform.json": "{}"})
    env = {**os.environ, "AIRFLOW_HOME": str(tmp_path / "home"), "AIRFLOW__CORE__LOAD_EXAMPLES": "false"}
    out = subprocess.run([_airflow_python(), "-c", AIRFLOW_CHECK, str(dags)], env=env, capture_output=True, text=True,
                         timeout=300, check=True)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert (result["found"], result["errors"], result["order"]) == (["platform/serving_loop.py"], {}, ORDER)
