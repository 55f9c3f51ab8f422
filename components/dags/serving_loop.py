"""The train -> store -> serve loop (roadmap phase 03; docs/mlops.md), shipped by the platform into Airflow.

One run, for one team and one served model:

(a) `prepare_features`: a Spark job on compute writes the feature table in Polaris and tags the snapshot it wrote with
    the run's Iceberg tag: the data is pinned, and only its reference (table and tag) travels on.
(b) `train` / `wait_for_training`: a Kubernetes Job in the team's namespace of its submission cluster (method B),
    labelled for the team's LocalQueue, running as the team's own principal (its `s3-training` and `polaris-training`);
    it reads the table at the tag and writes the model and `metrics.json` under the run's checkpoint prefix.
(c) `publish_model` / `wait_for_publish`: a small Job of the same team copies the model to the versioned models bucket,
    `<source><revision>/` (inside the team's prefix, the only place its keys may write) and writes `metadata.json` last
    (snapshot id, metrics, code revision, time).
(d) `open_serving_change`: with the serving repository (compute.argocd), a branch and pull request (or a commit) that
    serves the new revision as a canary beside the current one; without it, the stack-file change to make.

This file is loaded by Airflow alone: it imports nothing of the platform's program. What it needs from the site comes
in files the platform mounts next to it (`platform.json`) and at TRAINING_SUBMISSION (the submission contract). What
the steps do is pure functions in serving_loop_steps.py, shipped and loaded beside it: the serving edits of the rendered
manifests (`open_canary`, `promote`), the run's plan and the Jobs it submits, tested offline.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import sys
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

import yaml

PLATFORM_FILE = Path(__file__).with_name("platform.json")
"""The site's settings for this DAG, written by the platform (components/engines/airflow.py) beside this file."""


def _sibling(name: str) -> ModuleType:
    """The module `name` shipped beside this file (components/dags/<name>.py). Airflow puts its dags folder on sys.path,
    not this directory, whose name there, `platform`, is the standard library's: the module is loaded from its file,
    under this module's name (which Airflow makes unique per DAG file) and its own, registered in sys.modules as an
    import would register it."""
    unique = f"{__name__}_{name}"
    spec = importlib.util.spec_from_file_location(unique, Path(__file__).with_name(f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    sys.modules[unique] = module
    spec.loader.exec_module(module)
    return module


steps = _sibling("serving_loop_steps")
"""The steps' pure functions (serving_loop_steps.py): the serving edits, the run's plan, what each step submits."""


def load_platform(path: Path = PLATFORM_FILE) -> dict[str, Any]:
    """The site's settings; empty where the file is not mounted (a parse outside the platform's Airflow)."""
    return json.loads(path.read_text()) if path.is_file() else {}


# ------------------------------------------------------------------------------------------------
# The DAG.

PLATFORM = load_platform()
SPARK = PLATFORM.get("spark") or {}


def _spark_template() -> dict[str, Any]:
    path = SPARK.get("template")
    return yaml.safe_load(Path(path).read_text()) if path and Path(path).is_file() else {}


def _submission() -> dict[str, Any]:
    path = PLATFORM.get("training_submission")
    if not path or not Path(path).is_file():
        raise FileNotFoundError("the training submission contract is not mounted (training-submission ConfigMap)")
    return json.loads(Path(path).read_text())


def _build_dag(team: str) -> Any:
    """The serving loop of `team` (`serving_loop_<team>`): its team fixed here, never a parameter, and visible to the
    team's Airflow role alone (`access_control`)."""
    from airflow.providers.cncf.kubernetes.operators.spark_kubernetes import SparkKubernetesOperator
    from airflow.sdk import DAG, Param, task

    loop = PLATFORM["serving_loop"][team]
    images = "|".join(re.escape(r) for r in loop["training_images"])
    params = {
        "model": Param(type="string", pattern=steps.DNS_LABEL, description="Key of the served model (inference.models.<model>)."),
        "source": Param("", type="string", description="Path of the model's weights in the models bucket, under the team's "
                        "prefix (inference.models.<model>.source). Defaults to <team>/<model>/."),
        "features": Param(type="string", enum=sorted(loop["features"]), description="The feature set: its table and SELECT "
                          f"are the stack's (teams.{team}.serving_loop.features), run by the platform's feature job."),
        "training_image": Param(type="string", pattern=f"^({images})(:[A-Za-z0-9_][A-Za-z0-9_.-]{{0,127}})?(@sha256:[0-9a-f]{{64}})?$",
                                description="The training image (pinned tag or digest), from the team's repositories: "
                                f"{', '.join(loop['training_images'])}."),
        "code_revision": Param(type="string", description="Git revision of the training code, recorded in metadata.json."),
        "gpus": Param(1, type="integer", minimum=1, maximum=64),
        "cpu": Param("16", type="string"),
        "memory": Param("128Gi", type="string"),
        "revision": Param("", type="string", description="Revision of the published model. Defaults to the run's name."),
        "canary_weight_percent": Param(10, type="integer", minimum=1, maximum=50),
        "canary_replicas": Param(1, type="integer", minimum=1, maximum=64),
        "serving_change": Param("pull-request", enum=["pull-request", "commit"],
                                description="Open a pull request on the serving repository, or commit to its branch."),
        "git_server": Param("none", enum=["none", "github", "gitea", "gitlab"],
                            description="API to open the pull request with; none pushes the branch only."),
    }

    with DAG(
        dag_id=steps.dag_id(team),
        description=f"Team {team}: features (Spark) -> training (GPU, method B) -> models bucket -> serving canary (docs/mlops.md)",
        schedule=None,
        catchup=False,
        # Airflow pauses a new DAG unless told (core.dags_are_paused_at_creation): a paused DAG queues the team's triggered
        # runs and never starts them. It has no schedule, so unpaused it runs only when triggered.
        is_paused_upon_creation=False,
        max_active_runs=1,
        params=params,
        access_control=steps.access_control(loop["role"]),
        tags=["fab-platform", "mlops", f"team-{team}"],
        doc_md=__doc__,
    ) as dag:

        @task
        def plan(**context: Any) -> dict[str, Any]:
            return steps.plan_run(team, context["params"], context["run_id"], PLATFORM, _submission())

        planned = plan()

        planned_value = "{{{{ ti.xcom_pull(task_ids='plan')['{}'] }}}}".format
        prepare_features = SparkKubernetesOperator(
            task_id="prepare_features",
            namespace=SPARK.get("namespace", "spark"),
            template_spec=steps.feature_application(
                _spark_template(), PLATFORM,
                ["--table", planned_value("table"), "--tag", planned_value("tag"), "--sql", planned_value("sql")],
            ),
            get_logs=True,
            delete_on_termination=True,
        )

        def submit(body: dict[str, Any], connection: str) -> str:
            from airflow.providers.cncf.kubernetes.hooks.kubernetes import KubernetesHook

            client = KubernetesHook(conn_id=connection).batch_v1_client
            created = client.create_namespaced_job(body["metadata"]["namespace"], body)
            return created.metadata.name

        def wait(plan: dict[str, Any], name: str) -> Any:
            from airflow.providers.cncf.kubernetes.hooks.kubernetes import KubernetesHook
            from airflow.sdk import PokeReturnValue
            from airflow.sdk.exceptions import AirflowFailException

            client = KubernetesHook(conn_id=plan["connection"]).batch_v1_client
            # The submitter may read Jobs, not their pods: the Job's own conditions decide.
            job = client.api_client.sanitize_for_serialization(client.read_namespaced_job(name, plan["namespace"]))
            state = steps.job_state(job)
            if state == "failed":
                raise AirflowFailException(f"Job {plan['namespace']}/{name} on {plan['cluster']} failed")
            return PokeReturnValue(is_done=state == "complete", xcom_value=name)

        @task
        def train(plan: dict[str, Any], **context: Any) -> str:
            p = context["params"]
            return submit(steps.training_job(_submission()["job"], plan, plan["training_image"], p["gpus"], p["cpu"], p["memory"],
                                             PLATFORM.get("image_pull_secrets") or ()), plan["connection"])

        @task.sensor(poke_interval=60, timeout=3 * 24 * 3600, mode="reschedule")
        def wait_for_training(plan: dict[str, Any], name: str) -> Any:
            return wait(plan, name)

        @task
        def publish_model(plan: dict[str, Any], trained: str, **context: Any) -> str:
            created = context["dag_run"].start_date.isoformat()
            return submit(steps.publish_job(_submission()["job"], plan, PLATFORM, created), plan["connection"])

        @task.sensor(poke_interval=30, timeout=6 * 3600, mode="reschedule")
        def wait_for_publish(plan: dict[str, Any], name: str) -> Any:
            return wait(plan, name)

        @task
        def open_serving_change(plan: dict[str, Any], published: str, **context: Any) -> str:
            p = context["params"]
            return serving_change(plan, p["canary_weight_percent"], p["canary_replicas"], p["serving_change"], p["git_server"])

        trained = train(planned)
        done = wait_for_training(planned, trained)
        published = publish_model(planned, done)
        stored = wait_for_publish(planned, published)
        planned >> prepare_features >> trained
        open_serving_change(planned, stored)
    return dag


def _build_dags() -> dict[str, Any]:
    """One DAG per team with a serving loop on this site (`platform.json` `serving_loop`, from the stack's
    `teams.<team>.serving_loop`), by DAG id; none where Spark is off (the feature step needs it)."""
    if not SPARK:
        return {}
    return {steps.dag_id(team): _build_dag(team) for team in sorted(PLATFORM.get("serving_loop") or {})}


def serving_change(plan: Mapping[str, Any], weight_percent: int, replicas: int, how: str, git_server: str) -> str:
    """Step (d): the canary on the serving repository (a branch and pull request, or a commit), or the stack-file change
    when the site has no serving repository (`inference.delivery: pulumi`)."""
    import base64
    import ssl
    import subprocess
    import tempfile
    import urllib.request

    repo = PLATFORM.get("serving_repo")
    if not repo:
        change = steps.stack_file_change(plan, weight_percent, replicas)
        print(f"No serving repository on this site (compute.argocd): change the stack file, then pulumi up:\n{change}")
        return change
    if not repo.get("connection"):
        change = steps.stack_file_change(plan, weight_percent, replicas)
        print("This site gives Airflow no token that may push to the serving repository (servingRepoWriteToken): change "
              f"the stack file, render it with fabctl serving render and commit the result:\n{change}")
        return change
    from airflow.sdk import BaseHook

    connection = BaseHook.get_connection(repo["connection"])  # the token that may push (servingRepoWriteToken)
    basic = base64.b64encode(f"{connection.login}:{connection.password}".encode()).decode()
    git = steps.git_command(basic, repo.get("ca_file"))
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([*git, "clone", "--depth", "1", "--branch", repo["revision"], repo["url"], tmp], check=True)
        site = Path(tmp) / repo["path"]
        found = sorted(site.glob(f"*/{plan['model']}/deployment.yaml"))
        if len(found) != 1:
            raise steps.ServingChangeError(f"{repo['path']} holds {len(found)} directories of model {plan['model']}; "
                                           "expected one (<cluster>/<model>/, written by fabctl serving render)")
        directory = found[0].parent
        files = {f.name: f.read_text() for f in sorted(directory.glob("*.yaml"))}
        if f"{PLATFORM['models_bucket']}/{plan['source']}" not in files["deployment.yaml"]:
            raise steps.ServingChangeError(f"{plan['model']} does not read its weights from "
                                           f"{PLATFORM['models_bucket']}/{plan['source']}, where this run published; "
                                           "check inference.models.<model>.source")
        changed = steps.open_canary(files, plan["model"], plan["revision"], weight_percent, replicas)
        for name in files.keys() - changed.keys():
            (directory / name).unlink()
        for name, text in changed.items():
            (directory / name).write_text(text)
        branch = repo["revision"] if how == "commit" else f"fab/{plan['model']}-{plan['revision']}"
        title = f"Serve {plan['model']} {plan['revision']} as a {weight_percent}% canary"
        body = (f"Trained by serving_loop run {plan['run']} for team {plan['team']} from {plan['table']} at tag {plan['tag']}; "
                f"weights and metadata.json at {plan['model_prefix']}. Merge to start the canary; promote or revert it as "
                "docs/mlops.md describes.")
        def run(*args: str) -> None:
            subprocess.run([*git, "-C", tmp, *args], check=True)

        if how != "commit":
            run("checkout", "-b", branch)
        run("add", "--all", repo["path"])
        run("commit", "-m", title, "-m", body)
        run("push", "origin", f"HEAD:refs/heads/{branch}")
    if how == "commit" or git_server == "none":
        return branch
    url, payload = steps.pull_request(git_server, repo["url"], branch, repo["revision"], title, body)
    auth = {"github": f"Bearer {connection.password}", "gitea": f"token {connection.password}"}.get(git_server)
    headers = {"Content-Type": "application/json", **({"Authorization": auth} if auth else {"PRIVATE-TOKEN": connection.password})}
    request = urllib.request.Request(url, data=json.dumps(payload).encode(), headers=headers, method="POST")
    context = ssl.create_default_context(cafile=repo["ca_file"]) if repo.get("ca_file") else None
    with urllib.request.urlopen(request, timeout=60, context=context) as response:
        opened = json.load(response)
    return opened.get("html_url") or opened.get("web_url") or branch


if os.environ.get("FAB_SERVING_LOOP_NO_DAG") != "1":
    # Module-level names, as Airflow's DAG discovery finds them.
    globals().update(_build_dags())
