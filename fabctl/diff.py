"""What a config change does to a site, from two renders: added, removed, changed and replaced resources.

A change is a replacement when it touches an input the provider cannot update in place: a Kubernetes
object's kind, apiVersion, name or namespace, a Job's pod template, a bucket's name, a Keycloak realm or
client id, a MinIO user or policy name. Replacing or deleting a protected resource is what `fabctl
diff` exists to catch.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import yaml

from fabctl.render import Plan
from fabctl.stackfile import SITE_KEY

REPLACE_KEYS = {
    "minio:index/s3Bucket:S3Bucket": ("bucket",),
    "minio:index/iamUser:IamUser": ("name",),
    "minio:index/iamPolicy:IamPolicy": ("name",),
    "keycloak:index/realm:Realm": ("realm",),
    "keycloak:openid/client:Client": ("clientId",),
}


def replacement_inputs(record: dict[str, Any]) -> tuple:
    """The inputs whose change makes the provider replace the resource rather than update it."""
    inputs = record["inputs"]
    if record["type"].startswith("kubernetes:") and "metadata" in inputs and "kind" in inputs:
        meta = inputs["metadata"] or {}
        key: tuple = (inputs.get("apiVersion"), inputs.get("kind"), meta.get("name"), meta.get("namespace"))
        if inputs.get("kind") == "Job":  # a Job's pod template is immutable
            key += (json.dumps((inputs.get("spec") or {}).get("template"), sort_keys=True),)
        return key
    return tuple(inputs.get(k) for k in REPLACE_KEYS.get(record["type"], ()))


def changed_paths(before: Any, after: Any, path: str = "") -> list[str]:
    if isinstance(before, dict) and isinstance(after, dict):
        out = []
        for key in sorted(set(before) | set(after)):
            if key == "__provider":  # a dynamic provider's serialized code, not an input
                continue
            out += changed_paths(before.get(key), after.get(key), f"{path}.{key}" if path else key)
        return out
    if isinstance(before, list) and isinstance(after, list) and len(before) == len(after):
        return [p for i, (a, b) in enumerate(zip(before, after)) for p in changed_paths(a, b, f"{path}[{i}]")]
    return [] if before == after else [path or "."]


@dataclass
class Change:
    urn: str
    type: str
    protected: bool
    paths: list[str] = field(default_factory=list)


@dataclass
class Diff:
    added: list[Change] = field(default_factory=list)
    removed: list[Change] = field(default_factory=list)
    changed: list[Change] = field(default_factory=list)
    replaced: list[Change] = field(default_factory=list)
    handed_over: list[Change] = field(default_factory=list)
    """Serving objects the stack lets go of because Argo CD applies them now (`inference.delivery: argocd`)."""

    @property
    def dangerous(self) -> list[Change]:
        """Protected resources that would be deleted or replaced."""
        return [c for c in (*self.removed, *self.replaced) if c.protected]


def aliased_urns(record: dict[str, Any]) -> list[str]:
    """The URNs a resource was known by before, from its aliases (name and parent), as the engine builds them."""
    prefix = record["urn"].split("::")[0:2]
    out = []
    for alias in record.get("aliases") or []:
        spec = alias.get("spec") or {}
        if "name" in spec and "parentUrn" in spec:
            parent_type = spec["parentUrn"].split("::")[2].split("$")[-1]
            out.append("::".join([*prefix, f"{parent_type}${record['type']}", spec["name"]]))
    return out


INFERENCE_POOL_TYPE = "fab:inference:InferencePool"
SERVING_KINDS = {"Deployment", "Service", "PodDisruptionBudget", "HTTPRoute"}


def delivery(plan: Plan) -> str | None:
    """The plan's `inference.delivery` (pulumi by default), or None when its config is unknown or it serves nothing."""
    raw = plan.config.get(SITE_KEY)
    try:
        inference = json.loads(raw).get("inference") if raw else None
    except (json.JSONDecodeError, AttributeError):
        return None
    return inference.get("delivery", "pulumi") if isinstance(inference, dict) else None


def _is_serving_object(record: dict[str, Any]) -> bool:
    parent = record.get("parent") or ""
    return parent.split("::")[2].split("$")[-1] == INFERENCE_POOL_TYPE if parent.count("::") >= 3 else False


def diff(before: Plan, after: Plan) -> Diff:
    old = {r["urn"]: r for r in before.resources}
    new = {r["urn"]: r for r in after.resources}
    for record in after.resources:  # a resource moved with an alias is the same resource
        for previous in aliased_urns(record):
            if previous in old and record["urn"] not in old:
                old[record["urn"]] = old.pop(previous)
    result = Diff()
    for urn, record in new.items():
        if urn not in old:
            result.added.append(Change(urn, record["type"], record["protect"]))
    for urn, record in old.items():
        protected = record["protect"] or record["retain_on_delete"]
        if urn not in new:
            handed_over = (delivery(after) == "argocd" and _is_serving_object(record)
                           and (record["inputs"] or {}).get("kind") in SERVING_KINDS)
            (result.handed_over if handed_over else result.removed).append(Change(urn, record["type"], protected))
            continue
        paths = changed_paths(record["inputs"], new[urn]["inputs"])
        if replacement_inputs(record) != replacement_inputs(new[urn]) or record["type"] != new[urn]["type"]:
            result.replaced.append(Change(urn, record["type"], protected, paths))
        elif paths:
            result.changed.append(Change(urn, record["type"], protected, paths))
    return result


def set_path(config: dict[str, Any], assignment: str, site_key: str) -> None:
    """Apply `site.a.b=VALUE` (VALUE read as YAML) to a stack's config mapping."""
    path, sep, raw = assignment.partition("=")
    if not sep or not path:
        raise ValueError(f"--set {assignment!r}: write PATH=VALUE, for example site.teams.litho={{}}")
    parts = path.split(".")
    if parts[0] == "site":
        parts[0] = site_key
    node: Any = config
    for part in parts[:-1]:
        if not isinstance(node, dict):
            raise ValueError(f"--set {assignment!r}: {part!r} is inside a value that is not a mapping")
        node = node.setdefault(part, {})
    if not isinstance(node, dict):
        raise ValueError(f"--set {assignment!r}: the parent of {parts[-1]!r} is not a mapping")
    node[parts[-1]] = yaml.safe_load(raw)


def unset_path(config: dict[str, Any], path: str, site_key: str) -> None:
    """Remove `site.a.b` from a stack's config mapping."""
    parts = path.split(".")
    if parts[0] == "site":
        parts[0] = site_key
    node: Any = config
    for part in parts[:-1]:
        node = node.get(part) if isinstance(node, dict) else None
    if not isinstance(node, dict) or parts[-1] not in node:
        raise ValueError(f"--unset {path!r}: no such key in the stack's config")
    del node[parts[-1]]
