"""Validation of rendered Kubernetes objects against real schemas (DESIGN section 5.2).

Built-in kinds: kubernetes-validate for the target Kubernetes version, strict (unknown fields fail).
Custom resources: the upstream CRD's openAPIV3Schema for the served version, adapted for jsonschema
and made strict the way `kubectl --validate=strict` is: a typed object that does not preserve unknown
fields rejects fields it does not declare.
"""

from __future__ import annotations

import json
import re
import tarfile
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import yaml

from components import versions
from components.versions import KUBERNETES_VERSION
from fabctl.helm import ChartPackages, ChartRef, kept, package_digest
from fabctl.helm import _Loader as YamlLoader  # libyaml's safe loader, reading a bare `=` as Go does

_GO_ONLY_PRINTABLE = r"\PC"  # RE2 "not a control character"; Python's re has no \p classes


def _adapt(node: dict[str, Any]) -> dict[str, Any]:
    """Turn one OpenAPI v3 (Kubernetes flavour) schema node into strict JSON Schema, in place."""
    if node.get("nullable") and "type" in node:
        node["type"] = [node["type"], "null"]
    if "pattern" in node:
        pattern = node["pattern"].replace(_GO_ONLY_PRINTABLE, r"[^\x00-\x1f\x7f-\x9f]")
        if "(?i)" in pattern:  # RE2 accepts an inline flag mid-pattern; Python wants it first
            pattern = "(?i)" + pattern.replace("(?i)", "")
        node["pattern"] = pattern
    if node.get("type") == "object" and "properties" in node and not node.get("x-kubernetes-preserve-unknown-fields"):
        node.setdefault("additionalProperties", False)
    children = [*node.get("properties", {}).values(), node.get("items"), node.get("additionalProperties"), node.get("not")]
    children += [*node.get("allOf", []), *node.get("anyOf", []), *node.get("oneOf", [])]
    for child in children:
        if isinstance(child, dict):
            _adapt(child)
    return node


class CrdSchemas:
    """Upstream CRDs, looked up by apiVersion and kind: those of `../shared/crds` and any given as objects.

    `extra` takes CustomResourceDefinition objects, such as the ones a site's Helm charts install, for
    kinds `../shared/crds` does not carry; `../shared/crds` wins where both have a kind.
    """

    def __init__(self, crd_dir: Path, extra: list[dict[str, Any]] = ()):
        self.crd_dir = crd_dir
        self.index: dict[str, str] = json.loads((crd_dir / "index.json").read_text())
        self.index = {k: v for k, v in self.index.items() if k.count("/") == 2}
        self.extra: dict[str, dict[str, Any]] = {
            f"{crd['spec']['group']}/{version['name']}/{crd['spec']['names']['kind']}": version
            for crd in extra
            for version in crd["spec"]["versions"]
            if f"{crd['spec']['group']}/{version['name']}/{crd['spec']['names']['kind']}" not in self.index
        }

    def knows(self, api_version: str, kind: str) -> bool:
        return f"{api_version}/{kind}" in self.index or f"{api_version}/{kind}" in self.extra

    def deprecated(self, api_version: str, kind: str) -> bool:
        return bool(self._version(api_version, kind).get("deprecated"))

    def _version(self, api_version: str, kind: str) -> dict[str, Any]:
        key = f"{api_version}/{kind}"
        if key in self.extra:
            return self.extra[key]
        crd = _load_yaml(self.crd_dir / self.index[key])
        version = api_version.rsplit("/", 1)[1]
        return next(v for v in crd["spec"]["versions"] if v["name"] == version)

    @cache  # noqa: B019 (a few instances per session)
    def validator(self, api_version: str, kind: str) -> jsonschema.Draft4Validator:
        schema = json.loads(json.dumps(self._version(api_version, kind)["schema"]["openAPIV3Schema"]))
        return jsonschema.Draft4Validator(_adapt(schema))

    def errors(self, obj: dict[str, Any]) -> list[str]:
        validator = self.validator(obj["apiVersion"], obj["kind"])
        return sorted(
            f"{'.'.join(map(str, e.absolute_path)) or '<root>'}: {e.message}" for e in validator.iter_errors(obj)
        )


@cache
def _load_yaml(path: Path) -> dict[str, Any]:
    return yaml.load(path.read_text(), Loader=YamlLoader)


def builtin_errors(obj: dict[str, Any]) -> list[str]:
    """kubernetes-validate errors for a built-in kind, strict, for the target Kubernetes version (its first error, as
    `kubernetes_validate.validate` raises it)."""
    error = next(_builtin_validator(obj["apiVersion"], obj["kind"]).iter_errors(obj), None)
    return [] if error is None else [f"{'.'.join(map(str, error.path)) or '<root>'}: {error.message}"]


@cache
def _builtin_validator(api_version: str, kind: str) -> jsonschema.Validator:
    """The validator `kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)` builds for a kind, built once:
    the library reads and parses the kind's schema and the version's 20 MB of definitions again on every call (about 10 ms
    an object, against half a millisecond with the validator kept). Same files, same registry, same validator class;
    raises kubernetes_validate.SchemaNotFoundError for a kind it has no schema of."""
    from kubernetes_validate import utils
    from referencing import Registry, Resource

    version = [v for v in utils.all_versions() if utils.major_minor(v) <= utils.major_minor(KUBERNETES_VERSION)][-1]
    folder = f"kubernetes-json-schema/v{version}-local-strict"
    group = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)
    try:
        schema = utils.schema_contents(f"{folder}/{kind.lower()}-{group}.json", KUBERNETES_VERSION)
    except FileNotFoundError:
        raise kubernetes_validate.SchemaNotFoundError(version=utils.major_minor(KUBERNETES_VERSION), kind=kind,
                                                      api_version=api_version) from None
    registry = Resource.from_contents(_builtin_definitions(folder)) @ (Resource.from_contents(schema) @ Registry())
    return jsonschema.validators.Draft202012Validator(schema, registry=registry)


@cache
def _builtin_definitions(folder: str) -> dict[str, Any]:
    from kubernetes_validate import utils

    return utils.schema_contents(f"{folder}/_definitions.json", KUBERNETES_VERSION)


@cache
def chart_crds(chart_dir: Path) -> tuple[dict[str, Any], ...]:
    """The CRDs the pinned charts install from their packages' `crds/` folders (Helm installs them before the release),
    for `CrdSchemas(extra=...)`: the kinds a chart brings that `../shared/crds` does not carry, such as Envoy Gateway's
    EnvoyExtensionPolicy. Charts without a package here contribute nothing (test_helm_releases lists them). Read once per
    test session (the session's render cache), by the packages' content."""
    packages = ChartPackages(chart_dir)
    pins = sorted({c for c in vars(versions).values() if isinstance(c, versions.HelmChart)}, key=lambda c: (c.chart, c.version))
    found = [package for pin in pins if (package := packages.find(ChartRef(pin.chart, pin.version, pin.repo))) is not None]
    return tuple(kept("chart-crds", [package_digest(p) for p in found], lambda: _crds_of(found)))


def _crds_of(packages: list[Path]) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    for package in packages:
        with tarfile.open(package) as tar:
            for member in tar.getmembers():
                parts = member.name.split("/")
                # A chart's (or subchart's) own crds/ folder, which Helm installs verbatim; not templates/crds.
                if member.isfile() and "crds" in parts and "templates" not in parts and member.name.endswith((".yaml", ".yml")):
                    text = tar.extractfile(member).read().decode()  # type: ignore[union-attr]
                    found += [d for d in yaml.load_all(text, Loader=YamlLoader) if isinstance(d, dict) and d.get("kind") == "CustomResourceDefinition"]
    return found


def has_schema(obj: dict[str, Any], crds: CrdSchemas) -> bool:
    """Whether an object's kind has a schema here: an upstream CRD or a built-in Kubernetes kind."""
    if crds.knows(obj["apiVersion"], obj["kind"]):
        return True
    try:
        builtin_errors(obj)
    except kubernetes_validate.SchemaNotFoundError:
        return False
    return True


def schema_errors(obj: dict[str, Any], crds: CrdSchemas) -> list[str]:
    """Errors of one object: against its upstream CRD when it is a custom resource, else as a built-in kind."""
    if crds.knows(obj["apiVersion"], obj["kind"]):
        return crds.errors(obj)
    try:
        return builtin_errors(obj)
    except kubernetes_validate.SchemaNotFoundError:
        return [f"<root>: no schema for {obj['apiVersion']} {obj['kind']}: neither a Kubernetes {KUBERNETES_VERSION} kind nor an upstream CRD"]
