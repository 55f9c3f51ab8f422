"""The serving loop's steps as pure functions (the DAG that runs them: components/dags/serving_loop.py; docs/mlops.md):
the serving edits on the YAML of the serving repository (`open_canary`, `promote`), the run's plan from its parameters
and the site's settings (`plan_run`: the team's image and features, the model's prefix), and the SparkApplication and
Jobs each step submits. Tested offline.

Shipped beside the DAG in the ConfigMap `platform-dags` and loaded by it from this file (the dags folder's `platform`
directory is no package Python can import: the standard library's `platform` shadows it); `.airflowignore` keeps
Airflow from parsing it as a DAG file. Like the DAG, it imports nothing of the platform's program.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

import yaml

MODEL_LABEL = "fab.internal/model"
CANARY_LABEL = "fab.internal/canary-of"
REVISION_LABEL = "fab.internal/model-revision"
STABLE_FILES = ("deployment.yaml", "service.yaml", "pdb.yaml", "httproute.yaml")
CANARY_FILES = ("canary.yaml", "canary-service.yaml")
SERVING_PORT = 8000

LABEL_VALUE = r"^[A-Za-z0-9]([A-Za-z0-9._-]{0,61}[A-Za-z0-9])?$"
DNS_LABEL = r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$"
TABLE = r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)+$"


class ServingChangeError(ValueError):
    """The serving manifests cannot take the change as asked (the message says what to do instead)."""


# ------------------------------------------------------------------------------------------------
# Serving changes: pure functions on the YAML text of `<serving_repo.path>/<cluster>/<model>/*.yaml`, the layout
# `fabctl serving render` writes. Each returns the model's directory as it should be; a file it leaves out is removed.


def dump(obj: dict[str, Any]) -> str:
    """A manifest as `fabctl serving render` writes it (keys sorted, so a change shows as the lines it changes)."""
    return yaml.safe_dump(obj, sort_keys=True)


def _stable_name(model: str) -> str:
    return f"vllm-{model}"


def _canary_name(model: str) -> str:
    return f"vllm-{model}-canary"


def _relabel(labels: Mapping[str, str] | None, model: str, to_canary: bool, revision: str | None = None) -> dict[str, str] | None:
    """Labels of the stable objects turned into the canary's (`canary-of` in the place of `model`, so that the stable
    Service and PodDisruptionBudget, which select `fab.internal/model`, never select a canary pod), or back; with
    `revision`, the revision label (where there is one) set to it."""
    if labels is None:
        return None
    before, after = (MODEL_LABEL, CANARY_LABEL) if to_canary else (CANARY_LABEL, MODEL_LABEL)
    out: dict[str, str] = {}
    for key, value in labels.items():
        if key == before:
            out[after] = model
        elif key == REVISION_LABEL and revision is not None:
            out[key] = revision
        elif key != after:
            out[key] = value
    return out


def _replace_segment(value: Any, old: str, new: str) -> Any:
    """Every path segment `old` (between '/' and '/' or the end) in the strings of `value` replaced by `new`: the weights
    path `<source><revision>/` and the cache path `/models/<model>/<revision>`."""
    pattern = re.compile(rf"(?<=/){re.escape(old)}(?=/|$)")
    if isinstance(value, str):
        return pattern.sub(new, value)
    if isinstance(value, list):
        return [_replace_segment(v, old, new) for v in value]
    if isinstance(value, dict):
        return {k: _replace_segment(v, old, new) for k, v in value.items()}
    return value


def _pod_revision(deployment: dict[str, Any]) -> str | None:
    return deployment["spec"]["template"]["metadata"].get("labels", {}).get(REVISION_LABEL)


def _retarget(deployment: dict[str, Any], model: str, name: str, to_canary: bool, revision: str, replicas: int) -> dict[str, Any]:
    """A copy of a vLLM Deployment serving `revision` under `name`, labelled as the canary or as the stable one."""
    old = _pod_revision(deployment)
    if old is None:
        raise ServingChangeError(
            f"Deployment {deployment['metadata']['name']} serves no revision (its pods have no {REVISION_LABEL} label): "
            f"set inference.models.{model}.revision to the revision it serves, render, and start the canary from there")
    out = copy.deepcopy(deployment)
    out["metadata"]["name"] = name
    if "labels" in out["metadata"]:
        out["metadata"]["labels"] = _relabel(out["metadata"]["labels"], model, to_canary, revision)
    out["spec"]["replicas"] = replicas
    out["spec"]["selector"]["matchLabels"] = _relabel(out["spec"]["selector"]["matchLabels"], model, to_canary)
    template = out["spec"]["template"]
    template["metadata"]["labels"] = _relabel(template["metadata"]["labels"], model, to_canary, revision)
    template["spec"] = _replace_segment(template["spec"], old, revision)
    # The NVMe cache volume is labelled like the pods it belongs to.
    for volume in template["spec"].get("volumes", []):
        claim = (volume.get("ephemeral") or {}).get("volumeClaimTemplate") or {}
        if "labels" in (claim.get("metadata") or {}):
            claim["metadata"]["labels"] = dict(template["metadata"]["labels"])
    return out


def _route(route: dict[str, Any], model: str, canary_weight: int | None) -> dict[str, Any]:
    out = copy.deepcopy(route)
    (rule,) = out["spec"]["rules"]
    stable = {"name": _stable_name(model), "port": SERVING_PORT}
    if canary_weight is None:
        rule["backendRefs"] = [stable]
    else:
        rule["backendRefs"] = [{**stable, "weight": 100 - canary_weight},
                               {"name": _canary_name(model), "port": SERVING_PORT, "weight": canary_weight}]
    return out


def _load(files: Mapping[str, str], name: str) -> dict[str, Any]:
    if name not in files:
        raise ServingChangeError(f"the model's directory has no {name} (files: {', '.join(sorted(files))}); render it with "
                                 "fabctl serving render")
    return yaml.safe_load(files[name])


def open_canary(files: Mapping[str, str], model: str, revision: str, weight_percent: int, replicas: int) -> dict[str, str]:
    """The model's directory serving `revision` as a canary: `canary.yaml` (Deployment `vllm-<model>-canary`, `replicas`
    pods sized like the model's, reading `<source><revision>/`), `canary-service.yaml`, and the HTTPRoute sending
    `weight_percent` of the requests to it. Equal to what `fabctl serving render` writes with the model's
    `canary: {revision, weight_percent, replicas}`."""
    if not 1 <= weight_percent <= 50:
        raise ServingChangeError(f"weight_percent {weight_percent} is outside 1-50 (inference.models.<m>.canary.weight_percent)")
    if replicas < 1:
        raise ServingChangeError(f"replicas {replicas} must be at least 1")
    if present := [name for name in CANARY_FILES if name in files]:
        current = _pod_revision(_load(files, "canary.yaml")) if "canary.yaml" in files else "?"
        raise ServingChangeError(f"{_stable_name(model)} already has a canary ({', '.join(present)}, revision {current}): "
                                 "promote it or revert its commit first")
    deployment = _load(files, "deployment.yaml")
    if _pod_revision(deployment) == revision:
        raise ServingChangeError(f"{_stable_name(model)} serves revision {revision} already")
    service = _load(files, "service.yaml")
    canary_service = copy.deepcopy(service)
    canary_service["metadata"]["name"] = _canary_name(model)
    if "labels" in canary_service["metadata"]:
        canary_service["metadata"]["labels"] = _relabel(canary_service["metadata"]["labels"], model, True)
    canary_service["spec"]["selector"] = _relabel(canary_service["spec"]["selector"], model, True)
    out = dict(files)
    out["canary.yaml"] = dump(_retarget(deployment, model, _canary_name(model), True, revision, replicas))
    out["canary-service.yaml"] = dump(canary_service)
    out["httproute.yaml"] = dump(_route(_load(files, "httproute.yaml"), model, weight_percent))
    return out


def promote(files: Mapping[str, str], model: str) -> dict[str, str]:
    """The model's directory serving the canary's revision to every request: the stable Deployment (its replicas kept)
    takes the canary's revision, the canary's objects go, the route has one backend again. Equal to what `fabctl serving
    render` writes with `revision: <the canary's>` and no canary."""
    if "canary.yaml" not in files:
        raise ServingChangeError(f"{_stable_name(model)} has no canary to promote")
    canary = _load(files, "canary.yaml")
    stable = _load(files, "deployment.yaml")
    revision = _pod_revision(canary)
    if revision is None:
        raise ServingChangeError(f"{_canary_name(model)} has no {REVISION_LABEL} label")
    promoted = _retarget(canary, model, _stable_name(model), False, revision, stable["spec"]["replicas"])
    # The stable Deployment's own metadata and selector are kept as they are (a selector is immutable).
    promoted["metadata"] = copy.deepcopy(stable["metadata"])
    if REVISION_LABEL in (promoted["metadata"].get("labels") or {}):
        promoted["metadata"]["labels"][REVISION_LABEL] = revision
    promoted["spec"]["selector"] = copy.deepcopy(stable["spec"]["selector"])
    out = {name: text for name, text in files.items() if name not in CANARY_FILES}
    out["deployment.yaml"] = dump(promoted)
    out["httproute.yaml"] = dump(_route(_load(files, "httproute.yaml"), model, None))
    return out


def serving_revision(files: Mapping[str, str]) -> str | None:
    """The revision the stable Deployment serves."""
    return _pod_revision(_load(files, "deployment.yaml"))


# ------------------------------------------------------------------------------------------------
# The run: what each step submits, as pure functions of the parameters and the site's settings.


def run_slug(run_id: str) -> str:
    """A DAG run id as a label value and Iceberg tag name: lower case, [a-z0-9-], at most 40 characters."""
    slug = re.sub(r"[^a-z0-9]+", "-", run_id.lower()).strip("-")
    return slug[:40].rstrip("-") or "run"


def model_prefix(model_uri: str, models_bucket: str, source: str, revision: str) -> str:
    """`s3://<models bucket>/<source><revision>/`, refused unless it is inside the team's prefix `model_uri`
    (`s3://<models bucket>/<team>/`, MODEL_URI of its `s3-training`), the only prefix its keys may write."""
    if not source.endswith("/") or source.startswith("/") or ".." in source.split("/"):
        raise ValueError(f"source {source!r} must be a relative path ending in '/', such as <team>/<model>/")
    prefix = f"s3://{models_bucket}/{source}{revision}/"
    if not prefix.startswith(model_uri):
        raise ValueError(f"source {source!r} is outside the team's prefix {model_uri}: a team publishes only under "
                         f"{model_uri.removeprefix(f's3://{models_bucket}/')} (inference.models.<m>.source)")
    return prefix


PLATFORM_CHOSEN = ("spark_image", "spark_version", "feature_job", "feature_sql", "table")
"""What a run of the loop used to choose and no longer may: the feature step runs as the Spark engine, so its image, job,
SQL and table are the platform's and the stack's (`teams.<team>.serving_loop.features`), never a run's."""


def dag_id(team: str) -> str:
    """The team's own serving loop: `serving_loop_<team>` (dashes as underscores)."""
    return "serving_loop_" + team.replace("-", "_")


def access_control(role: str) -> dict[str, dict[str, set[str]]]:
    """The team's DAG is the team's Airflow role's alone: it reads the DAG and its runs, and triggers it (`can_edit` on
    the DAG and `can_create` on its runs, what the FAB auth manager asks for a new run). The role has no permission on
    `DAGs` as a whole (components/airflow_webserver_config.py), so no other team's DAG is visible to it."""
    return {role: {"DAGs": {"can_read", "can_edit"}, "DAG Runs": {"can_read", "can_create"}}}


TAG = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")
DIGEST = re.compile(r"sha256:[0-9a-f]{64}")


def image_repository(image: str) -> tuple[str, bool]:
    """(repository, pinned) of an image reference: pinned is `<repository>:<tag>`, `<repository>@sha256:<digest>` or both."""
    name, at, digest = image.partition("@")
    head, slash, last = name.rpartition("/")
    repository, colon, tag = last.partition(":")
    tagged, digested = bool(colon and TAG.fullmatch(tag)), bool(at and DIGEST.fullmatch(digest))
    well_formed = (tagged or not colon) and (digested or not at)
    return f"{head}{slash}{repository}", well_formed and (tagged or digested)


def training_image(image: str, team: str, repositories: Sequence[str]) -> str:
    """`image`, refused unless it is a pinned image (a tag or a digest) of one of the team's training image repositories
    (`teams.<team>.serving_loop.training_images`): a run does not choose what runs with the team's keys."""
    repository, pinned = image_repository(image)
    if not pinned or repository not in repositories:
        raise ValueError(f"training_image {image!r} is not an image of team {team}'s training repositories "
                         f"({', '.join(repositories) or 'none'}; teams.{team}.serving_loop.training_images): name one of them "
                         "with a tag or a digest")
    return image


def plan_run(team: str, params: Mapping[str, Any], run_id: str, platform: Mapping[str, Any],
             submission: Mapping[str, Any]) -> dict[str, Any]:
    """Everything the steps use, resolved once: the team's submission, its image and features, the Iceberg tag, the
    paths of the run. `team` is the DAG's own, fixed when the DAG is defined: a run's parameters never choose it, nor
    the feature step's image, job, SQL or table (it runs as the Spark engine), nor an image outside the team's list."""
    named = params.get("team")
    if named not in (None, "", team):
        raise ValueError(f"{dag_id(team)} runs for team {team} only: a run may not name team {named!r} (its members "
                         f"trigger {dag_id(str(named))})")
    if chosen := sorted(key for key in PLATFORM_CHOSEN if params.get(key) not in (None, "")):
        raise ValueError(f"a run may not choose {', '.join(chosen)}: the feature step runs the platform's Spark image and "
                         f"feature job as the Spark engine, with the features of teams.{team}.serving_loop.features "
                         "(name one as `features`)")
    loop = (platform.get("serving_loop") or {}).get(team)
    if loop is None:
        raise ValueError(f"team {team} has no serving loop on this site (teams.{team}.serving_loop)")
    features = loop["features"]
    if params.get("features") not in features:
        raise ValueError(f"features {params.get('features')!r} is not one of team {team}'s feature sets: "
                         f"{', '.join(sorted(features))} (teams.{team}.serving_loop.features)")
    chosen_features = features[params["features"]]
    image = training_image(params["training_image"], team, loop["training_images"])
    teams = submission.get("teams", {})
    if team not in teams:
        raise ValueError(f"team {team!r} has no training submission on this site; teams: {', '.join(sorted(teams)) or 'none'}")
    target = teams[team]
    if target.get("connection") is None:
        raise ValueError(f"team {team} submits to {target['cluster']}, which Airflow has no submitter for")
    slug = run_slug(run_id)
    revision = params.get("revision") or slug
    if not re.match(LABEL_VALUE, revision):
        raise ValueError(f"revision {revision!r} is not a label value ([A-Za-z0-9._-], at most 63 characters)")
    models_bucket, checkpoints_bucket = platform["models_bucket"], platform["checkpoints_bucket"]
    source = params.get("source") or f"{team}/{params['model']}/"
    team_models = f"s3://{models_bucket}/{team}/"
    run_prefix = f"{team}/runs/{slug}/"
    return {
        "team": team,
        "model": params["model"],
        "namespace": target["namespace"],
        "local_queue": target["local_queue"],
        "cluster": target["cluster"],
        "connection": target["connection"],
        "run": slug,
        "features": params["features"],
        "table": chosen_features["table"],
        "sql": chosen_features["sql"],
        "training_image": image,
        "tag": f"fab-{slug}",
        "revision": revision,
        "source": source,
        "model_prefix": model_prefix(team_models, models_bucket, source, revision),
        "output_uri": f"s3://{checkpoints_bucket}/{run_prefix}",
        "output_path": f"{checkpoints_bucket}/{run_prefix}",
        "code_revision": params["code_revision"],
    }


def feature_application(template: Mapping[str, Any], platform: Mapping[str, Any], arguments: list[str]) -> dict[str, Any]:
    """The SparkApplication of step (a): the platform's template (batch pool, YuniKorn queue, the catalog in `sparkConf`,
    Spark's credentials) plus the platform's job: its feature job (`feature_job.py`, which runs the SQL, mounted on the
    driver from its ConfigMap) in the platform's pinned Spark image with Iceberg's packages (`platform.json` `spark`).
    Nothing of it comes from a run: it runs as the Spark engine."""
    app = copy.deepcopy(dict(template))
    spec = app.setdefault("spec", {})
    spark = platform["spark"]
    job = spark["feature_job"]
    spec.update({"type": "Python", "pythonVersion": "3", "image": spark["image"], "sparkVersion": spark["spark_version"],
                 "mainApplicationFile": platform_feature_job(platform), "arguments": arguments,
                 "deps": {"packages": list(spark["packages"])}})
    # Beside the template's own (the site's Maven settings, on a site with a registry).
    spec["volumes"] = [*spec.get("volumes", []), {"name": job["config_map"], "configMap": {"name": job["config_map"]}}]
    driver = spec.setdefault("driver", {})
    driver["volumeMounts"] = [*driver.get("volumeMounts", []),
                              {"name": job["config_map"], "mountPath": job["mount_path"], "readOnly": True}]
    return app


def platform_feature_job(platform: Mapping[str, Any]) -> str:
    """The platform's feature job as the driver sees it (`local://<mount path>/<file>`)."""
    job = platform.get("spark", {}).get("feature_job")
    return f"local://{job['mount_path']}/{job['file']}" if job else ""


def _restricted_pod() -> dict[str, Any]:
    return {"runAsNonRoot": True, "runAsUser": 1000, "runAsGroup": 1000, "fsGroup": 1000,
            "seccompProfile": {"type": "RuntimeDefault"}}


def _restricted(name: str, image: str, **fields: Any) -> dict[str, Any]:
    return {"name": name, "image": image, **fields, "securityContext": {
        "allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True, "runAsNonRoot": True,
        "capabilities": {"drop": ["ALL"]}}}


def _job(contract: Mapping[str, Any], plan: Mapping[str, Any], step: str, pod: dict[str, Any],
         pull_secrets: Sequence[Mapping[str, str]] = ()) -> dict[str, Any]:
    """A Job of the submission contract: suspended for Kueue, labelled for the team's LocalQueue, at the training
    PriorityClass, in the team's namespace (whose Secrets hold that team's keys only), naming the site registry's pull
    Secret where the site has one (`platform.json` `image_pull_secrets`)."""
    labels = {contract["queue_label"]: plan["local_queue"], contract["priority_label"]: contract["workload_priority"],
              "fab.internal/run": plan["run"], "fab.internal/step": step}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"generateName": f"{step}-", "namespace": plan["namespace"], "labels": labels},
        "spec": {
            "suspend": True,
            "backoffLimit": 0,
            "ttlSecondsAfterFinished": 7 * 24 * 3600,
            "template": {"metadata": {"labels": {"fab.internal/run": plan["run"], "fab.internal/step": step}},
                         "spec": {"restartPolicy": "Never", "priorityClassName": contract["priority_class"],
                                  "securityContext": _restricted_pod(), **pod,
                                  **({"imagePullSecrets": [dict(s) for s in pull_secrets]} if pull_secrets else {})}},
        },
    }


def _env_from(contract: Mapping[str, Any], config_maps: bool = True) -> list[dict[str, Any]]:
    return [*({"secretRef": {"name": s}} for s in contract["secrets"]),
            *({"configMapRef": {"name": c}} for c in (contract["config_maps"] if config_maps else []))]


def training_job(contract: Mapping[str, Any], plan: Mapping[str, Any], image: str, gpus: int, cpu: str, memory: str,
                 pull_secrets: Sequence[Mapping[str, str]] = ()) -> dict[str, Any]:
    """Step (b): the team's training image, given the data by reference (table and tag) and where to write the model
    (`OUTPUT_URI`: `model/` and `metrics.json`, under the team's checkpoint prefix)."""
    resources = {"cpu": cpu, "memory": memory, "nvidia.com/gpu": str(gpus)}
    container = _restricted(
        "train", image,
        env=[{"name": "ICEBERG_TABLE", "value": plan["table"]}, {"name": "ICEBERG_REF", "value": plan["tag"]},
             {"name": "OUTPUT_URI", "value": plan["output_uri"]}, {"name": "CODE_REVISION", "value": plan["code_revision"]},
             {"name": "FAB_RUN", "value": plan["run"]}],
        envFrom=_env_from(contract),
        resources={"requests": resources, "limits": resources},
        volumeMounts=[{"name": "scratch", "mountPath": "/tmp"}],
    )
    return _job(contract, plan, "train", {"containers": [container], "volumes": [{"name": "scratch", "emptyDir": {}}]},
                pull_secrets)


METADATA_SCRIPT = r'''
import json, os, sys, urllib.parse, urllib.request
env = os.environ
def call(url, data=None, headers=None):
    with urllib.request.urlopen(urllib.request.Request(url, data=data, headers=headers or {}), timeout=60) as r:
        return json.load(r)
uri = env["POLARIS_URI"].rstrip("/")
form = urllib.parse.urlencode({"grant_type": "client_credentials", "client_id": env["POLARIS_CLIENT_ID"],
                               "client_secret": env["POLARIS_CLIENT_SECRET"], "scope": env["POLARIS_SCOPE"]}).encode()
auth = {"Authorization": "Bearer " + call(uri + "/v1/oauth/tokens", form)["access_token"]}
*namespace, table = env["ICEBERG_TABLE"].split(".")
path = "/v1/%s/namespaces/%s/tables/%s" % (urllib.parse.quote(env["POLARIS_WAREHOUSE"], safe=""),
                                           urllib.parse.quote("\x1f".join(namespace), safe=""), urllib.parse.quote(table, safe=""))
refs = call(uri + path, headers=auth)["metadata"].get("refs", {})
if env["ICEBERG_REF"] not in refs:
    sys.exit("table %s has no tag %s" % (env["ICEBERG_TABLE"], env["ICEBERG_REF"]))
with open("/work/metrics.json") as f:
    metrics = json.load(f)
metadata = json.loads(env["FAB_METADATA"])
metadata["snapshot_id"] = refs[env["ICEBERG_REF"]]["snapshot-id"]
metadata["metrics"] = metrics
with open("/work/metadata.json", "w") as f:
    json.dump(metadata, f, indent=2, sort_keys=True)
'''
"""Run in the publish Job with the team's Polaris principal: the tag's snapshot id and the run's metrics into
`metadata.json` (standard library only)."""


def metadata(plan: Mapping[str, Any], created: str) -> dict[str, Any]:
    """`metadata.json` of a published model, but for what the publish Job adds (`snapshot_id`, `metrics`)."""
    return {"model": plan["model"], "team": plan["team"], "revision": plan["revision"], "table": plan["table"],
            "iceberg_ref": plan["tag"], "code_revision": plan["code_revision"], "run": plan["run"],
            "trained_from": plan["output_uri"], "created": created}


def publish_job(contract: Mapping[str, Any], plan: Mapping[str, Any], platform: Mapping[str, Any], created: str) -> dict[str, Any]:
    """Step (c): copy `<run>/model/` to `<source><revision>/` in the models bucket (server-side), then write
    `metadata.json` there last, so a revision with its metadata is complete. The team's own keys and principal."""
    images = platform["images"]
    mc_env = [{"name": "MC_CONFIG_DIR", "value": "/work/mc"}]
    work = {"name": "work", "mountPath": "/work"}
    small = {"requests": {"cpu": "250m", "memory": "256Mi"}, "limits": {"cpu": "1", "memory": "512Mi"}}
    destination = "s3/" + plan["model_prefix"].removeprefix("s3://")
    source = f"s3/{plan['output_path']}"

    def mc(name: str, *args: str) -> dict[str, Any]:
        return _restricted(name, images["s3"], args=list(args), env=mc_env, envFrom=_env_from(contract, False),
                           resources=small, volumeMounts=[work])

    init = [
        mc("alias", "alias", "set", "s3", "$(AWS_ENDPOINT_URL_S3)", "$(AWS_ACCESS_KEY_ID)", "$(AWS_SECRET_ACCESS_KEY)"),
        mc("metrics", "cp", f"{source}metrics.json", "/work/metrics.json"),
        _restricted("metadata", images["python"], command=["python", "-c", METADATA_SCRIPT],
                    env=[{"name": "ICEBERG_TABLE", "value": plan["table"]}, {"name": "ICEBERG_REF", "value": plan["tag"]},
                         {"name": "FAB_METADATA", "value": json.dumps(metadata(plan, created), sort_keys=True)}],
                    envFrom=_env_from(contract, False), resources=small, volumeMounts=[work]),
        mc("model", "cp", "--recursive", f"{source}model/", destination),
    ]
    main = mc("publish", "cp", "/work/metadata.json", f"{destination}metadata.json")
    return _job(contract, plan, "publish", {"initContainers": init, "containers": [main],
                                            "volumes": [{"name": "work", "emptyDir": {}}]},
                platform.get("image_pull_secrets") or ())


def job_state(job: Mapping[str, Any]) -> str:
    """`complete`, `failed` or `running`, from a Job's status conditions."""
    for condition in (job.get("status") or {}).get("conditions") or []:
        if condition.get("status") == "True" and condition.get("type") in ("Complete", "Failed"):
            return condition["type"].lower()
    return "running"


def stack_file_change(plan: Mapping[str, Any], weight_percent: int, replicas: int) -> str:
    """With `inference.delivery: pulumi`: the change of the stack file that serves the revision as a canary."""
    return (f"inference:\n  models:\n    {plan['model']}:\n      source: {plan['source']}\n"
            f"      canary: {{revision: {plan['revision']}, weight_percent: {weight_percent}, replicas: {replicas}}}\n")


def pull_request(server: str, repo_url: str, head: str, base: str, title: str, body: str) -> tuple[str, dict[str, Any]]:
    """The API call that opens a pull (merge) request on the serving repository's Git server: (URL, JSON body)."""
    parts = urllib_parse(repo_url)
    owner_repo = parts["path"].strip("/").removesuffix(".git")
    if server == "github":
        api = "https://api.github.com" if parts["host"] == "github.com" else f"{parts['base']}/api/v3"
        return f"{api}/repos/{owner_repo}/pulls", {"title": title, "head": head, "base": base, "body": body}
    if server == "gitea":
        return f"{parts['base']}/api/v1/repos/{owner_repo}/pulls", {"title": title, "head": head, "base": base, "body": body}
    if server == "gitlab":
        project = owner_repo.replace("/", "%2F")
        return (f"{parts['base']}/api/v4/projects/{project}/merge_requests",
                {"title": title, "source_branch": head, "target_branch": base, "description": body})
    raise ValueError(f"git server {server!r} is not one of github, gitea, gitlab")


def urllib_parse(url: str) -> dict[str, str]:
    from urllib.parse import urlsplit

    split = urlsplit(url)
    return {"host": split.hostname or "", "base": f"{split.scheme}://{split.netloc}", "path": split.path}


def git_command(basic: str, ca_file: str | None) -> list[str]:
    """git with the push token's Basic authorization and the loop's identity; with `ca_file` (a serving repository under
    the site's domain, whose certificate the site's CA issued), git's TLS verifies the server against that file (the
    site CA's Secret, mounted in every Airflow pod) instead of the image's CAs."""
    return ["git", "-c", f"http.extraHeader=Authorization: Basic {basic}", *(["-c", f"http.sslCAInfo={ca_file}"] if ca_file else []),
            "-c", "user.name=fab-platform serving loop", "-c", "user.email=serving-loop@fab-platform.invalid"]

