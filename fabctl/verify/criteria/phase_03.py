"""Phase 03, training pipeline: `fabctl verify` triggers the team's serving-loop DAG through Airflow's API as a member of
the team and follows the run across the clusters: the DAG run and its tasks, Kueue's admission of its training Job,
the published model pinned to its Iceberg tag, the canary synced by Argo CD, and an answer through the gateway."""

from __future__ import annotations

import json
from collections.abc import Mapping

from components.config import names
from components.config.views import argocd_delivers
from components.constants import ARGOCD_NAMESPACE, polaris_secret, s3_secret
from components.dags import serving_loop_steps
from components.data_access import TRAINING
from components.engines import airflow, spark
from components.kueue import LOCAL_QUEUE, team_namespace
from fabctl.verify.criteria.blocks import (
    Site,
    _account,
    _dns,
    _job,
    _kubectl_pod,
    _no_training_nodes,
    _probe_step,
    _ran,
    _training_placement,
)
from fabctl.verify.criteria.phase_02 import _client_env, _needs_client, served_name
from fabctl.verify.model import Criterion, Judgement, Step
from fabctl.verify.runner import figure

AIRFLOW_USERNAME_KEY = "username"
AIRFLOW_PASSWORD_KEY = "password"
TASKS = ("plan", "prepare_features", "train", "wait_for_training", "publish_model", "wait_for_publish", "open_serving_change")
"""The tasks of `serving_loop_<team>` (components/dags/serving_loop.py), in the order they run; each must succeed."""
SERVING_CHANGE = {"serving_change": "commit", "git_server": "none"}
"""How the check's run serves its revision: committed to the serving repository's followed branch (no pull request to
merge), so that Argo CD syncs the canary within the run's check."""
RUN, REVISION = figure(0, "run"), figure(0, "revision")
"""The run's name and revision, as the trigger (step 0) reports them: the later steps follow that run."""


def airflow_member_secret(team: str) -> str:
    """The Secret, in the acceptance namespace on compute, with the Keycloak account (a member of the team's group) the
    check signs in to Airflow as."""
    return f"airflow-{names.TEAM_GROUP(team)}"


def phase_03(site: Site) -> list[Criterion | tuple[str, str]]:
    return [serving_loop(site)]


def serving_loop(site: Site) -> Criterion | tuple[str, str]:
    run = site.acceptance.serving_loop
    cid = f"03-serving-loop-{run.team}" if run is not None else "03-serving-loop"
    config = site.config
    if config.inference is None:
        return (cid, "the site serves no model (no `inference` section)")
    if run is None:
        return (cid, "acceptance.serving_loop names no team and model whose serving-loop DAG the check triggers "
                     "(docs/acceptance.md, phase 03)")
    loop = config.teams[run.team].serving_loop
    if loop is None:
        return (cid, f"team {run.team} has no serving loop (teams.{run.team}.serving_loop): its DAG serving_loop_{run.team} "
                     "is not in Airflow")
    if not (airflow.ENGINE.config(config.compute).enabled and spark.ENGINE.config(config.compute).enabled):
        return (cid, "the serving loop needs Airflow and Spark on compute (compute.airflow, compute.spark)")
    try:  # the DAG's own rule (its plan refuses the run otherwise): the config cannot import the DAG's module
        serving_loop_steps.training_image(run.training_image, run.team, loop.training_images)
    except ValueError as exc:
        return (cid, f"acceptance.serving_loop: {exc}")
    inference = config.inference
    if skipped := _no_training_nodes(site, inference.cluster, cid):
        return skipped
    team, model = run.team, run.model
    dag = serving_loop_steps.dag_id(team)
    compute, submission = site.compute(), site.submission_cluster()
    assert airflow.ENGINE.ui is not None
    airflow_url = f"https://{airflow.ENGINE.ui.hostname(config.domain)}"
    conf = {"model": model, "features": run.features, "training_image": run.training_image,
            "code_revision": run.code_revision, **({"revision": run.revision} if run.revision else {}), **SERVING_CHANGE}
    secret = airflow_member_secret(team)
    member_env = [{"name": env, "valueFrom": {"secretKeyRef": {"name": secret, "key": key}}}
                  for env, key in (("AIRFLOW_USERNAME", AIRFLOW_USERNAME_KEY), ("AIRFLOW_PASSWORD", AIRFLOW_PASSWORD_KEY))]
    trigger = _probe_step(site, compute, cid, "serving-loop-run",
                          ["airflow-run", airflow_url, dag, str(run.timeout_sec), json.dumps(conf, sort_keys=True)],
                          timeout_sec=run.timeout_sec + site.acceptance.timeout_sec, env=member_env)
    source = inference.models[model].source
    uri = f"s3://{site.bucket('models')}/{source}{REVISION}/metadata.json"
    table = loop.features[run.features].table
    pin = _probe_step(site, inference.cluster, cid, "serving-loop-pin", ["model-pin", uri, table, f"fab-{RUN}"],
                      namespace=team_namespace(team), queued=True,
                      env_from=[{"secretRef": {"name": s3_secret(TRAINING)}}, {"secretRef": {"name": polaris_secret(TRAINING)}}],
                      **_training_placement())
    steps = [trigger, _admission_step(site, cid, submission, team), pin]
    synced = argocd_delivers(config)
    if synced:
        steps.append(_sync_step(site, cid, inference.cluster, model))
    url = site.gateway_url(model)
    steps.append(_probe_step(site, compute, cid, "serving-loop-answer", ["chat", url, served_name(site, model)],
                             env=_client_env(site, site.team())))
    application = names.SERVING_APPLICATION(inference.cluster)
    canary = f"vllm-{model}-canary"

    def judge(results: Mapping[str, str]) -> Judgement:
        signin = results.get("0.signin")
        if signin is None:
            return False, _ran(results, 0, "the Airflow run probe")
        if signin != "ok":
            return False, (f"signing in to {airflow_url} through Keycloak with the account of Secret {secret} failed "
                           f"({signin})")
        if results.get("0.paused") == "true":
            return False, (f"{dag} is paused in Airflow: a trigger would queue a run that never starts; unpause it "
                           f"(`airflow dags unpause {dag}`, or the toggle in Airflow's UI) and run the check again")
        status, run_id = results.get("0.trigger_status"), results.get("0.run_id", "?")
        if status == "409":
            return False, f"{dag} has a run {run_id} already (409): run the check again"
        if status in ("401", "403"):
            return False, (f"Airflow refused to trigger {dag} as the account of Secret {secret} ({status}): it must be a "
                           f"member of the Keycloak group {names.TEAM_GROUP(team)}, whose role alone may trigger it")
        if status != "200":
            return False, f"triggering {dag} answered {status}: {results.get('0.trigger_detail', '')}"
        state = results.get("0.state", "none")
        if state != "success":
            tasks = ", ".join(f"{t} {results.get(f'0.task_{t}', 'none')}" for t in TASKS
                              if results.get(f"0.task_{t}") != "success")
            return False, f"run {run_id} of {dag} ended {state} (tasks not succeeded: {tasks or 'none'})"
        if failed := [t for t in TASKS if results.get(f"0.task_{t}") != "success"]:
            return False, f"run {run_id} of {dag} succeeded without {', '.join(failed)} succeeding"
        slug, revision = results.get("0.run", "?"), results.get("0.revision", "?")
        queue = results.get("1.cluster_queue")
        if queue is None:
            return False, _ran(results, 1, "the admission check")
        if results.get("1.job") != "found":
            return False, f"no training Job of run {slug} (label fab.internal/run={slug}) in {team_namespace(team)} on {submission}"
        cleared = not queue and results.get("1.finished") == "Succeeded" and results.get("1.queue_name") == LOCAL_QUEUE
        if not cleared and (queue != team_namespace(team) or results.get("1.admitted") != "true"):
            return False, (f"the training Job of run {slug} was admitted by ClusterQueue {queue or 'none'} (admitted "
                           f"{results.get('1.admitted')}); {team_namespace(team)}'s quota expected")
        published = results.get("2.get_status")
        if published is None:
            return False, _ran(results, 2, "the published-model probe")
        where = f"s3://{site.bucket('models')}/{source}{revision}/metadata.json"
        if published != "200":
            return False, f"{where} answered {published} to team {team}'s keys: the run did not publish"
        snapshot, ref = results.get("2.snapshot_id", ""), results.get("2.iceberg_ref", "")
        if not snapshot.isdigit() or results.get("2.has_metrics") != "true" or ref != f"fab-{slug}":
            return False, (f"{where} names snapshot {snapshot or 'none'}, Iceberg ref {ref or 'none'} and metrics "
                           f"{results.get('2.has_metrics')}: fab-{slug}, its snapshot and the metrics expected")
        if results.get("2.tag_snapshot_id") != snapshot:
            return False, (f"{table}'s tag fab-{slug} in Polaris points to snapshot {results.get('2.tag_snapshot_id') or 'none'} "
                           f"(table {results.get('2.table_status')}); the model was trained from {snapshot}")
        if synced:
            sync = results.get("3.sync")
            if sync is None:
                return False, _ran(results, 3, "the Argo CD check")
            if (sync, results.get("3.health"), results.get("3.canary")) != ("Synced", "Healthy", "Healthy"):
                return False, (f"Argo CD Application {application} is {sync} and {results.get('3.health')}, Deployment "
                               f"{canary} {results.get('3.canary') or 'absent'}; Synced, Healthy and a Healthy canary expected")
        last = len(steps) - 1
        token, chat = results.get(f"{last}.token_status"), results.get(f"{last}.chat_status")
        if token is None:
            return False, _ran(results, last, "the inference probe")
        if token != "200" or chat != "200":
            return False, f"the gateway call to {model} at {url}: token {token}, chat {chat}; 200 expected for both"
        served = f"served as a canary by {application}" if synced else "to be served by the stack-file change the run printed"
        return True, (f"run {run_id} of {dag}, triggered as team {team}, trained in {team_namespace(team)} (admitted by "
                      f"{queue}) from {table} at fab-{slug} (snapshot {snapshot}), published {model} {revision}, "
                      f"{served}; {model} answered at {url}")

    needs = [f"the Secret {secret} in {site.namespace} on {compute} with keys {AIRFLOW_USERNAME_KEY} and "
             f"{AIRFLOW_PASSWORD_KEY}: a Keycloak account (realm {config.identity.realm}) in the group "
             f"{names.TEAM_GROUP(team)}, without a second factor, that signs in to Airflow",
             f"the image {run.training_image} and team {team}'s training quota free on {submission}",
             _needs_client(site, site.team())]
    if synced:
        needs.append(f"no canary of {model} in the serving repository (the run commits one: promote or revert it after the check)")
    return Criterion(3, cid, f"team {team}'s serving loop, triggered through Airflow, trains, publishes and serves {model}",
                     tuple(steps), judge, needs=tuple(needs))


def _admission_step(site: Site, cid: str, cluster: str, team: str) -> Step:
    """On the submission cluster: the run's training Job (labelled `fab.internal/run`, `fab.internal/step=train` by the
    DAG) and the ClusterQueue that admitted its Workload, read as an account that may list those two kinds there only."""
    namespace, account = team_namespace(team), _dns("fab-verify", "serving-loop")
    selector = f"fab.internal/run={RUN},fab.internal/step=train"
    script = "\n".join([
        "set -eu",
        f"uid=$(kubectl -n {namespace} get jobs -l '{selector}' -o jsonpath='{{.items[0].metadata.uid}}' 2>/dev/null || true)",
        "echo \"FAB-RESULT job=$([ -n \"$uid\" ] && echo found || echo none)\"",
        # The Workload Kueue made for the Job (owned by it), by the Job's uid: the ClusterQueue that admitted it.
        ("workload() { kubectl -n " + namespace + " get workloads -o jsonpath=\"{range .items[?(@.metadata.ownerReferences[0].uid"
         "==\\\"$uid\\\")]}$1{end}\"; }"),
        "echo \"FAB-RESULT cluster_queue=$(workload '{.status.admission.clusterQueue}')\"",
        "echo \"FAB-RESULT admitted=$(workload '{.status.conditions[?(@.type==\"Admitted\")].status}' | tr 'A-Z' 'a-z')\"",
        # Kueue clears a finished Workload's admission (kubernetes-sigs/kueue#8188): then its Finished condition's reason
        # and the LocalQueue it was queued in stand for it (a Job only runs once admitted; the LocalQueue's ClusterQueue is
        # the team's).
        "echo \"FAB-RESULT finished=$(workload '{.status.conditions[?(@.type==\"Finished\")].reason}')\"",
        "echo \"FAB-RESULT queue_name=$(workload '{.spec.queueName}')\"",
    ])
    rbac = _account(site, account, cid, [
        (namespace, [{"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["list"]},
                     {"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads"], "verbs": ["list"]}]),
    ])
    timeout = site.acceptance.timeout_sec
    checker = _job("serving-loop-admission", site.namespace, cid, _kubectl_pod(site, account, script), timeout)
    return Step(cluster, (*rbac, checker), ("Job", "serving-loop-admission"), timeout)


def _sync_step(site: Site, cid: str, cluster: str, model: str) -> Step:
    """On compute: Argo CD's Application of the serving cluster until it is Synced and Healthy with the canary's Deployment
    Healthy (the run committed it), as an account that may get that one Application."""
    application, account = names.SERVING_APPLICATION(cluster), _dns("fab-verify", "serving-sync")
    timeout = site.acceptance.timeout_sec
    get = f"kubectl -n {ARGOCD_NAMESPACE} get applications.argoproj.io {application} -o jsonpath"
    script = "\n".join([
        "set -u",
        "sync=; health=; canary=",
        f"for i in $(seq 1 {max(1, (timeout - 60) // 10)}); do",
        f"  sync=$({get}='{{.status.sync.status}}')",
        f"  health=$({get}='{{.status.health.status}}')",
        (f"  canary=$({get}='{{range .status.resources[*]}}{{.kind}}/{{.name}}={{.health.status}}{{\"\\n\"}}{{end}}' "
         f"| sed -n 's|^Deployment/vllm-{model}-canary=||p')"),
        "  [ \"$sync\" = Synced ] && [ \"$health\" = Healthy ] && [ \"$canary\" = Healthy ] && break",
        "  sleep 10",
        "done",
        "echo \"FAB-RESULT sync=${sync:-none}\"",
        "echo \"FAB-RESULT health=${health:-none}\"",
        "echo \"FAB-RESULT canary=${canary}\"",
    ])
    rbac = _account(site, account, cid, [
        (ARGOCD_NAMESPACE, [{"apiGroups": ["argoproj.io"], "resources": ["applications"], "verbs": ["get"],
                             "resourceNames": [application]}]),
    ])
    checker = _job("serving-loop-sync", site.namespace, cid, _kubectl_pod(site, account, script), timeout)
    return Step(site.compute(), (*rbac, checker), ("Job", "serving-loop-sync"), timeout)
