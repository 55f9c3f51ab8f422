"""`fabctl serving`: the serving repository Argo CD applies (`inference.delivery: argocd`), and the hand-over to it.

`render` writes each model's objects exactly as `inference.delivery: pulumi` registers them: the stack is rendered
with delivery set to pulumi and the objects are taken from that plan, so the two deliveries cannot differ (same
sizing, same pod template, same route). Layout: `<out>/<cluster>/<model>/<file>` (components/serving.py,
`repository_files`); the Application of each serving cluster reads `<serving_repo.path>/<cluster>/`.

`handover` lists the `pulumi state delete` commands that take the live objects out of the stack without deleting
them, so that Argo CD adopts them in place and no replica restarts (docs/operations.md, "Serving through Argo CD").
"""

from __future__ import annotations

import copy
import shutil
from pathlib import Path
from typing import Any

import yaml

from components.config import names
from components.gpu import INFERENCE_NAMESPACE
from components.serving import repository_files
from fabctl.render import Plan
from fabctl.stackfile import SITE_KEY

HANDOVER_ORDER = ("httproute.yaml", "canary-service.yaml", "service.yaml", "pdb.yaml", "canary.yaml", "deployment.yaml")
"""The order a stack lets go of a model's objects: each before what it depends on (`pulumi state delete` refuses to
drop a resource that another one still depends on)."""


class ServingError(Exception):
    """The stack cannot be rendered as a serving repository: the message says why and what to do."""


def _inference(config: dict[str, Any]) -> dict[str, Any]:
    site = config.get(SITE_KEY)
    inference = site.get("inference") if isinstance(site, dict) else None
    if not isinstance(inference, dict):
        raise ServingError(f"{SITE_KEY}.inference: the stack serves no models (no inference section), so it has no serving repository")
    return inference


def delivered_by_pulumi(config: dict[str, Any]) -> dict[str, Any]:
    """The stack config with `inference.delivery: pulumi`: what the stack would register itself."""
    config = copy.deepcopy(config)
    _inference(config)["delivery"] = "pulumi"
    return config


def serving_tree(plan: Plan, config: dict[str, Any]) -> dict[str, tuple[dict[str, Any], dict[str, Any]]]:
    """`<cluster>/<model>/<file>` -> (object, plan resource), from a plan rendered with delivery pulumi."""
    inference = _inference(config)
    cluster, models = inference["cluster"], sorted(inference.get("models") or {})
    provider = names.CLUSTER_NAME(cluster, config[SITE_KEY]["name"])
    wanted = {key: f"{cluster}/{model}/{file}" for model in models for key, file in repository_files(model).items()}
    tree: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {}
    for on, obj, resource in plan.manifests():
        meta = obj.get("metadata") or {}
        if on == provider and meta.get("namespace") == INFERENCE_NAMESPACE and (obj["kind"], meta.get("name")) in wanted:
            tree[wanted[obj["kind"], meta["name"]]] = (obj, resource)
    for model in models:
        if f"{cluster}/{model}/deployment.yaml" not in tree:
            raise ServingError(f"model {model}: the plan has no Deployment {names.VLLM(model)} in {INFERENCE_NAMESPACE} on {provider}")
    return dict(sorted(tree.items()))


def manifest_text(obj: dict[str, Any]) -> str:
    """An object as the serving repository holds it: keys sorted, so that a re-render or a change by the serving-loop DAG
    shows in Git as the lines it changes."""
    return yaml.safe_dump(obj, sort_keys=True)


def drift(tree: dict[str, tuple[dict[str, Any], dict[str, Any]]], out: Path) -> list[str]:
    """How the serving repository's directory differs from the render, one line per file: what `render` would write,
    change or remove (an empty list: the repository is the stack's)."""
    lines = []
    clusters = sorted({path.split("/")[0] for path in tree})
    present = {p.relative_to(out).as_posix() for cluster in clusters if (out / cluster).is_dir()
               for p in (out / cluster).rglob("*") if p.is_file()}
    for path, (obj, _) in tree.items():
        if path not in present:
            lines.append(f"{path}: missing")
        elif (out / path).read_text() != manifest_text(obj):
            lines.append(f"{path}: differs from the stack's render")
    lines += [f"{path}: not in the stack's render" for path in sorted(present - set(tree))]
    return lines


def write_tree(tree: dict[str, tuple[dict[str, Any], dict[str, Any]]], out: Path) -> list[Path]:
    """Write the objects under `out`, replacing each cluster's directory whole: a model that left the config leaves the
    repository, and Argo CD prunes it."""
    for cluster in sorted({path.split("/")[0] for path in tree}):
        shutil.rmtree(out / cluster, ignore_errors=True)
    written = []
    for path, (obj, _) in tree.items():
        target = out / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(manifest_text(obj))
        written.append(target)
    return written


def handover_commands(tree: dict[str, tuple[dict[str, Any], dict[str, Any]]], stack: str) -> list[str]:
    """`pulumi state delete` of every serving object, dependents first (HANDOVER_ORDER)."""
    rank = {file: i for i, file in enumerate(HANDOVER_ORDER)}
    ordered = sorted(tree.items(), key=lambda item: (item[0].rsplit("/", 1)[0], rank[item[0].rsplit("/", 1)[1]]))
    return [f"pulumi state delete --stack {stack} --yes '{resource['urn']}'" for _, (_, resource) in ordered]
