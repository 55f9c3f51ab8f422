"""Air gap: with a site registry (config `registry`), nothing the site runs comes from outside it (docs/airgap.md).

Every image reference of the picture (the program's objects and every object its Helm releases install) must be under
the registry's image prefix, every release's chart must come from its chart repository, every pod must name the pull
Secret when the site has one, every release file a ConfigFile applies must be served inside the site, and a
Spark pod that resolves Maven packages must resolve them from the site's Maven repository. Images are read
wherever an object writes them: `image` fields (with `repository` beside them, as the GPU and Network Operators'
policies split them), CloudNativePG's `imageName`, environment variables named `*IMAGE*`, and image references inside
any other text (an operator's `--config-reloader-image=...` argument, a configuration file in a ConfigMap).
"""

from __future__ import annotations

import base64
import binascii
import functools
import json
import re
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import yaml

from components.config import SiteConfig
from fabctl.check.findings import Finding
from fabctl.check.picture import Picture, release_placed
from fabctl.check.placed import Placed
from fabctl.helm import _Loader

IMAGE_IN_TEXT = re.compile(
    r"(?<![\w./:-])((?:[a-z0-9-]+\.)+[a-z0-9-]+(?::[0-9]+)?/[a-z0-9._/-]*[a-z0-9](?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?"
    r"(?:@sha256:[0-9a-f]{64})?)(?![\w/])"
)
"""An image reference inside free text: a registry host with a dot, a path, and a tag or digest."""
_TAGGED = re.compile(r"(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}|@sha256:[0-9a-f]{64})$")
SPARK_PACKAGES = "spark.jars.packages"
"""Spark's setting of the Maven packages a driver resolves at start (from Maven Central unless told otherwise)."""
SPARK_IVY_SETTINGS = "spark.jars.ivySettings"
"""Spark's setting of the Ivy settings file it resolves packages with instead of its own chain, which asks Maven Central
first whatever `spark.jars.repositories` adds (Spark 3.5.7 SparkSubmitUtils.buildIvySettings; components/engines/
_spark_packages.py)."""
SKIPPED_KINDS = frozenset({"CustomResourceDefinition"})
"""Kinds whose text is documentation (a CRD's field descriptions name upstream images and URLs as examples)."""
INTERNAL_SUFFIXES = (".svc", ".cluster.local", ".local", ".internal", ".localdomain")
"""Host suffixes that name something inside the site: Kubernetes services and the site's private DNS zones."""


def _text_images(text: str) -> Iterator[str]:
    for match in IMAGE_IN_TEXT.finditer(text):
        candidate = match.group(1)
        if _TAGGED.search(candidate):
            yield candidate


def image_references(node: Any, path: str = "", embedded: bool = False) -> Iterator[tuple[str, str]]:
    """(path, reference) of every image an object names, structured or inside text. In a configuration document
    carried inside an object (`embedded`: a chart's values in a Secret), an image may also be written as `name` and
    `tag` (JupyterHub's `singleuser.image`, which the hub hands to every user server)."""
    if isinstance(node, list):
        for i, item in enumerate(node):
            yield from image_references(item, f"{path}[{i}]", embedded)
        return
    if isinstance(node, str):
        for found in _text_images(node):
            yield path, found
        return
    if not isinstance(node, dict):
        return
    image, named = node.get("image"), set()
    name, tag = node.get("name"), node.get("tag")
    if embedded and isinstance(name, str) and isinstance(tag, (str, int, float)) and "/" in name and not _TAGGED.search(name):
        yield f"{path}.name", f"{name}:{tag}"
        named.update(("name", "tag"))
    if isinstance(image, str) and image:
        repository, version = node.get("repository"), node.get("version") or node.get("tag")
        reference = f"{repository}/{image}" if isinstance(repository, str) and repository and "/" not in image.split(":")[0] else image
        if version and not _TAGGED.search(reference):
            reference = f"{reference}{'@' if str(version).startswith('sha256:') else ':'}{version}"
        yield f"{path}.image" if path else "image", reference
        named.add("image")
    if isinstance(node.get("imageName"), str):
        yield f"{path}.imageName" if path else "imageName", node["imageName"]
        named.add("imageName")
    if isinstance(node.get("name"), str) and "IMAGE" in node["name"].upper() and isinstance(node.get("value"), str) and node["value"]:
        yield f"{path}.value", node["value"]
        named.add("value")
    for key, value in node.items():
        if key in named or key in ("description", "annotations"):
            continue
        yield from image_references(value, f"{path}.{key}" if path else key, embedded)


@functools.lru_cache(maxsize=8192)
def _document(text: str) -> Any:
    """A configuration file's content as data (YAML, JSON), or None if it is neither; parsed once per text and shared
    by the rules that read it (mirror, settings, trust): never change it."""
    try:
        return yaml.load(text, Loader=_Loader)
    except yaml.YAMLError:
        return None


def _embedded_images(obj: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """Images inside the files a ConfigMap or Secret carries (Secret `data` decoded from base64)."""
    for field in ("data", "stringData"):
        for key, value in (obj.get(field) or {}).items():
            if not isinstance(value, str):
                continue
            text = value
            if obj.get("kind") == "Secret" and field == "data":
                try:
                    text = base64.b64decode(value, validate=True).decode()
                except (binascii.Error, UnicodeDecodeError):
                    continue
            document = _document(text)
            if isinstance(document, (dict, list)):
                yield from image_references(document, f"{field}.{key}", embedded=True)
            else:
                yield from image_references(text, f"{field}.{key}")


def object_images(placed: Placed) -> Iterator[tuple[str, str]]:
    """The image references of one placed object, each once (none for a CRD, whose text is documentation)."""
    if placed.kind in SKIPPED_KINDS:
        return
    obj = placed.obj
    found = _embedded_images(obj) if placed.kind in ("ConfigMap", "Secret") else \
        image_references({k: v for k, v in obj.items() if k not in ("metadata", "apiVersion", "kind")})
    seen = set()
    for path, reference in found:
        if reference not in seen:
            seen.add(reference)
            yield path, reference


def pod_specs(node: Any, path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    """(path, pod spec) of every pod template an object holds (a dict with `containers`)."""
    if isinstance(node, list):
        for i, item in enumerate(node):
            yield from pod_specs(item, f"{path}[{i}]")
    elif isinstance(node, dict):
        if isinstance(node.get("containers"), list) and node["containers"] and all(isinstance(c, dict) for c in node["containers"]):
            yield path, node
            return
        for key, value in node.items():
            yield from pod_specs(value, f"{path}.{key}" if path else key)


def internal_hosts(site: SiteConfig) -> set[str]:
    """Hosts the site's objects may download from: the registry's and the site's own endpoints."""
    registry = site.registry
    assert registry is not None
    urls = [registry.charts, f"https://{registry.images}", registry.files, registry.maven, site.keycloak.url]
    return {h for h in (urlsplit(u).hostname for u in urls if u) if h} | {site.minio.server.split(":")[0]}


def _is_internal(host: str, site: SiteConfig, hosts: set[str]) -> bool:
    host = host.lower().rstrip(".")
    if host in hosts or "." not in host or re.fullmatch(r"[0-9.]+", host):
        return True
    return host == site.domain or host.endswith((f".{site.domain}", *INTERNAL_SUFFIXES))


def mirror_findings(picture: Picture) -> Iterator[Finding]:
    site = picture.site
    registry = site.registry
    if registry is None:
        return
    prefix = f"{registry.images}/"
    hosts = internal_hosts(site)
    for placed in picture.placed:
        for path, reference in dict.fromkeys(object_images(placed)):
            if not reference.startswith(prefix):
                yield Finding.of("images.mirrored", placed, f"{path} {reference!r} is not under the site registry {registry.images}",
                                 "move it to the registry: components/registry.py for the program's images, the chart's "
                                 "entry in components/airgap for a chart's")
        if registry.pull_secret is not None and placed.kind != "PodTemplate":
            for path, spec in pod_specs(placed.obj.get("spec") or {}, "spec"):
                names = [s.get("name") for s in spec.get("imagePullSecrets") or [] if isinstance(s, dict)]
                if registry.pull_secret not in names:
                    yield Finding.of("images.pull-secret", placed, f"{path} does not name the pull Secret {registry.pull_secret!r}",
                                     "add it to the pod's imagePullSecrets (the chart's pull-secret values in components/airgap)")
        text = json.dumps(placed.obj.get("spec") or placed.obj.get("data") or {})
        if SPARK_PACKAGES in text and (registry.maven is None or SPARK_IVY_SETTINGS not in text):
            yield Finding.of("downloads.mirrored", placed, f"it names {SPARK_PACKAGES}, resolved from Maven Central, and not only "
                             f"from the site's Maven repository {registry.maven}",
                             f"set {SPARK_IVY_SETTINGS} to an ivysettings.xml whose one resolver is registry.maven "
                             "(components/engines/_spark_packages.py)")
    for release in picture.release_records():
        inputs = release["inputs"]
        chart = str(inputs.get("chart") or "")
        repo = chart.rsplit("/", 1)[0] if chart.startswith("oci://") else str((inputs.get("repositoryOpts") or {}).get("repo") or "")
        if repo.rstrip("/") != registry.charts:
            yield Finding.of("charts.mirrored", release_placed(picture.plan, release),
                             f"chart {chart} {inputs.get('version')} comes from {repo!r}, not the site registry {registry.charts}",
                             "install it through helm_release (components/kube.py), which takes the chart from the registry")
    for record in picture.plan.resources:
        url = (record.get("inputs") or {}).get("file") if record.get("type") == "kubernetes:yaml/v2:ConfigFile" else None
        if isinstance(url, str) and "://" in url and not _is_internal(urlsplit(url).hostname or "", site, hosts):
            yield Finding(
                "downloads.mirrored", picture.plan.cluster(record) or "", f"ConfigFile {record['name']}", str(record["name"]),
                f"applies {url!r}, outside the site", "serve it from the site registry's files (registry.files)",
            )
