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
in files the platform mounts next to it (`platform.json`) and at TRAINING_SUBMISSION (the submission contract). The
serving edits are pure functions of the rendered manifests (`open_canary`, `promote`), tested offline.
"""

from __future__ import annotations

import copy
import json
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

PLATFORM_FILE = Path(__file__).with_name("platform.json")
"""The site's settings for this DAG, written by the platform (components/engines/airflow.py) beside this file."""

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
        "model": Param(type="string", pattern=DNS_LABEL, description="Key of the served model (inference.models.<model>)."),
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
        dag_id=dag_id(team),
        description=f"Team {team}: features (Spark) -> training (GPU, method B) -> models bucket -> serving canary (docs/mlops.md)",
        schedule=None,
        catchup=False,
        max_active_runs=1,
        params=params,
        access_control=access_control(loop["role"]),
        tags=["fab-platform", "mlops", f"team-{team}"],
        doc_md=__doc__,
    ) as dag:

        @task
        def plan(**context: Any) -> dict[str, Any]:
            return plan_run(team, context["params"], context["run_id"], PLATFORM, _submission())

        planned = plan()

        planned_value = "{{{{ ti.xcom_pull(task_ids='plan')['{}'] }}}}".format
        prepare_features = SparkKubernetesOperator(
            task_id="prepare_features",
            namespace=SPARK.get("namespace", "spark"),
            template_spec=feature_application(
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
            state = job_state(job)
            if state == "failed":
                raise AirflowFailException(f"Job {plan['namespace']}/{name} on {plan['cluster']} failed")
            return PokeReturnValue(is_done=state == "complete", xcom_value=name)

        @task
        def train(plan: dict[str, Any], **context: Any) -> str:
            p = context["params"]
            return submit(training_job(_submission()["job"], plan, plan["training_image"], p["gpus"], p["cpu"], p["memory"],
                                       PLATFORM.get("image_pull_secrets") or ()), plan["connection"])

        @task.sensor(poke_interval=60, timeout=3 * 24 * 3600, mode="reschedule")
        def wait_for_training(plan: dict[str, Any], name: str) -> Any:
            return wait(plan, name)

        @task
        def publish_model(plan: dict[str, Any], trained: str, **context: Any) -> str:
            created = context["dag_run"].start_date.isoformat()
            return submit(publish_job(_submission()["job"], plan, PLATFORM, created), plan["connection"])

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
    return {dag_id(team): _build_dag(team) for team in sorted(PLATFORM.get("serving_loop") or {})}


def git_command(basic: str, ca_file: str | None) -> list[str]:
    """git with the push token's Basic authorization and the loop's identity; with `ca_file` (a serving repository under
    the site's domain, whose certificate the site's CA issued), git's TLS verifies the server against that file (the
    site CA's Secret, mounted in every Airflow pod) instead of the image's CAs."""
    return ["git", "-c", f"http.extraHeader=Authorization: Basic {basic}", *(["-c", f"http.sslCAInfo={ca_file}"] if ca_file else []),
            "-c", "user.name=fab-platform serving loop", "-c", "user.email=serving-loop@fab-platform.invalid"]


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
        change = stack_file_change(plan, weight_percent, replicas)
        print(f"No serving repository on this site (compute.argocd): change the stack file, then pulumi up:\n{change}")
        return change
    if not repo.get("connection"):
        change = stack_file_change(plan, weight_percent, replicas)
        print("This site gives Airflow no token that may push to the serving repository (servingRepoWriteToken): change "
              f"the stack file, render it with fabctl serving render and commit the result:\n{change}")
        return change
    from airflow.sdk import BaseHook

    connection = BaseHook.get_connection(repo["connection"])  # the token that may push (servingRepoWriteToken)
    basic = base64.b64encode(f"{connection.login}:{connection.password}".encode()).decode()
    git = git_command(basic, repo.get("ca_file"))
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([*git, "clone", "--depth", "1", "--branch", repo["revision"], repo["url"], tmp], check=True)
        site = Path(tmp) / repo["path"]
        found = sorted(site.glob(f"*/{plan['model']}/deployment.yaml"))
        if len(found) != 1:
            raise ServingChangeError(f"{repo['path']} holds {len(found)} directories of model {plan['model']}; expected one "
                                     "(<cluster>/<model>/, written by fabctl serving render)")
        directory = found[0].parent
        files = {f.name: f.read_text() for f in sorted(directory.glob("*.yaml"))}
        if f"{PLATFORM['models_bucket']}/{plan['source']}" not in files["deployment.yaml"]:
            raise ServingChangeError(f"{plan['model']} does not read its weights from {PLATFORM['models_bucket']}/{plan['source']}, "
                                     "where this run published; check inference.models.<model>.source")
        changed = open_canary(files, plan["model"], plan["revision"], weight_percent, replicas)
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
    url, payload = pull_request(git_server, repo["url"], branch, repo["revision"], title, body)
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
