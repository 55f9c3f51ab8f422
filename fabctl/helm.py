"""What each Helm release of a plan installs: `helm template` with the release's values, namespace and post-renderer.

A `kubernetes:helm.sh/v3:Release` is opaque to the render: Pulumi hands its values to Helm on the
cluster. To see (and validate) the objects a release really creates, its chart package is rendered
with a real Helm exactly as `helm install` would: same release name, namespace, values (the chart's
values.schema.json included), CRDs, hooks, and the release's post-renderer applied to the output.
Chart packages come from a local folder (a mirror: what `helm pull` writes, `<name>-<version>.tgz`, or
the layout of `../shared/charts`, whose `index.json` also names each package's source repository), or
are pulled from the repository each release names into a cache.
"""

from __future__ import annotations

import base64
import contextlib
import copy
import hashlib
import json
import marshal
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

from components.versions import KUBERNETES_VERSION, upstream_chart
from fabctl import helm_install
from fabctl.render import HELM_RELEASE_TYPE, Plan
from fabctl.runs import tag_cache_folder, write_whole


class _Loader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """libyaml's safe loader (charts with large CRDs, Gateway API and Kueue, are megabytes of YAML) that reads a plain `=`
    as the string it is: YAML 1.1 makes it the `value` tag, which no safe loader constructs, and the Prometheus operator's
    CRDs list it unquoted among their match operators."""


_Loader.add_constructor("tag:yaml.org,2002:value", lambda loader, node: loader.construct_scalar(node))

KUBE_VERSION = f"{KUBERNETES_VERSION}.0"


class HelmError(Exception):
    """A release that Helm refuses to render (bad values, schema violation, template error)."""


@dataclass(frozen=True)
class ChartRef:
    """A chart as a release names it: chart name, exact version, repository (`oci://...` included)."""

    name: str
    version: str
    repo: str
    source: str = field(default="", compare=False)
    """The chart's upstream repository (components/versions.py), where `repo` is a site registry's copy of it."""

    @classmethod
    def of(cls, release: dict[str, Any]) -> ChartRef:
        inputs = release["inputs"]
        chart = str(inputs["chart"])
        if chart.startswith("oci://"):
            repo, name = chart.rsplit("/", 1)
        else:
            repo, name = (inputs.get("repositoryOpts") or {}).get("repo", ""), chart
        pinned = upstream_chart(name, str(inputs["version"]))
        return cls(name=name, version=str(inputs["version"]), repo=repo, source=pinned.repo if pinned else repo)

    def __str__(self) -> str:
        where = self.repo if self.source in ("", self.repo) else f"{self.source}, from {self.repo}"
        return f"{self.name} {self.version} ({where})"

    def pull_command(self, destination: Path) -> str:
        """The `helm pull` that writes this chart's package into `destination`."""
        folder = shlex.quote(str(destination))
        if self.repo.startswith("oci://"):
            return f"helm pull {self.repo}/{self.name} --version {self.version} -d {folder}"
        return f"helm pull {self.name} --repo {self.repo} --version {self.version} -d {folder}"


HELM_VARIABLE = "FAB_HELM"
NO_HELM = "no Helm to render it"
"""Why a release is not rendered when no Helm was found (`find_helm`)."""


class NoSuchHelm(Exception):
    """`--helm` or FAB_HELM names a path that is no file: a mistake to say, not a Helm to look for elsewhere."""


def find_helm(option: str | None, environ: Mapping[str, str] | None = None) -> Path | None:
    """The Helm binary to run: `--helm`, else FAB_HELM, else `helm` beside the running Python (the virtualenv's, which
    `make setup` installs: `fabctl.helm_install`), else `helm` on the PATH; None when there is none."""
    environ = os.environ if environ is None else environ
    for named, where in ((option, "--helm"), (environ.get(HELM_VARIABLE), HELM_VARIABLE)):
        if named:
            if not Path(named).is_file():
                raise NoSuchHelm(f"{where} names {named}, which is not a file: give the path of a Helm binary (3.8 or later)")
            return Path(named)
    beside = helm_install.default_target()
    if beside.is_file():
        return beside
    on_path = shutil.which("helm", path=environ.get("PATH", os.defpath))
    return Path(on_path) if on_path else None


class ChartPackages:
    """A local folder of chart packages: `<name>-<version>.tgz` as `helm pull` writes them, or an `index.json`
    naming each package's file and source repository (the layout of `../shared/charts`)."""

    def __init__(self, folder: Path):
        self.folder = folder
        index = folder / "index.json"
        self._index = {(c["name"], c["version"]): c for c in json.loads(index.read_text())["charts"]} if index.is_file() else None

    def find(self, chart: ChartRef) -> Path | None:
        """The package of exactly this chart and version (from the same repository, where the index says), if the folder has it."""
        if self._index is None:
            path = self.folder / f"{chart.name}-{chart.version}.tgz"
            return path if path.is_file() else None
        entry = self._index.get((chart.name, chart.version))
        if entry is None or entry["repository"].rstrip("/") not in (chart.repo.rstrip("/"), chart.source.rstrip("/")):
            return None
        return self.folder / entry["file"]

    def why_missing(self, chart: ChartRef) -> str:
        return f"no package of {chart} in {self.folder}"

    def local(self, chart: ChartRef) -> Path | None:
        return self.find(chart)


PULL_TIMEOUT_SEC = 30
"""A pull that has not finished by then gives up, and its host is not asked again in the run (Helm itself waits 120 s
for a repository that does not answer)."""
_UNREACHABLE = ("dial tcp", "no such host", "proxyconnect", "Client.Timeout", "deadline exceeded", "i/o timeout",
                "network is unreachable", "no route to host", "TLS handshake timeout")
"""What Helm says when it cannot reach a repository's host at all (as opposed to a chart or version the repository
lacks)."""


class ChartRepositories:
    """Charts kept in a cache folder (`<name>-<version>.tgz`: what earlier pulls left there), else pulled with `helm pull`
    from the repository each release names into it; with `upstream`, from the chart's upstream repository instead
    (`fabctl mirror` reads the charts before the site registry has them). A pull gives up after `timeout_sec`, and a
    host that could not be reached is not asked again in the same run: without a network, every chart fails at once."""

    def __init__(self, helm: Path, cache: Path, upstream: bool = False, timeout_sec: float = PULL_TIMEOUT_SEC, pull: bool = True):
        self.helm, self.cache, self.upstream, self.timeout_sec, self.pull = helm, cache, upstream, timeout_sec, pull
        self._failures: dict[ChartRef, str] = {}
        self._unreachable: dict[str, str] = {}

    def repository(self, chart: ChartRef) -> str:
        return chart.source if self.upstream and chart.source else chart.repo

    def find(self, chart: ChartRef) -> Path | None:
        path = self.cache / f"{chart.name}-{chart.version}.tgz"
        if path.is_file():
            return path
        if chart in self._failures:
            return None
        if not self.pull:
            self._failures[chart] = f"not in the chart cache {self.cache}, and not pulled (--no-pull)"
            return None
        repo = self.repository(chart)
        host = _host(repo)
        if host in self._unreachable:
            self._failures[chart] = f"not pulled: {host} could not be reached ({self._unreachable[host]})"
            return None
        try:
            self.cache.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            self._failures[chart] = f"not pulled: the chart cache {self.cache} cannot be used ({exc.strerror or exc})"
            return None
        source = [f"{repo}/{chart.name}"] if repo.startswith("oci://") else [chart.name, "--repo", repo]
        with tempfile.TemporaryDirectory(prefix="fab-helm-") as tmp:
            home = {"HELM_CACHE_HOME": tmp, "HELM_CONFIG_HOME": tmp, "HELM_DATA_HOME": tmp}
            try:
                done = subprocess.run(
                    [str(self.helm), "pull", *source, "--version", chart.version, "--destination", tmp],
                    capture_output=True, text=True, env={**os.environ, **home}, check=False, timeout=self.timeout_sec,
                )
            except subprocess.TimeoutExpired:
                reason = f"no answer within {self.timeout_sec:g} s"
                self._unreachable[host] = reason
                self._failures[chart] = f"cannot pull {chart}: {reason}"
                return None
            pulled = Path(tmp) / path.name
            if done.returncode != 0 or not pulled.is_file():
                reason = (done.stderr.strip().splitlines() or [f"helm exited {done.returncode}"])[-1]
                if any(sign in reason for sign in _UNREACHABLE):
                    self._unreachable[host] = reason
                self._failures[chart] = f"cannot pull {chart}: {reason}"
                return None
            try:
                partial = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.partial")
                shutil.copyfile(pulled, partial)
                partial.replace(path)  # the cache never holds half a package, whoever reads it meanwhile
            except OSError as exc:
                self._failures[chart] = f"pulled, but the chart cache {self.cache} cannot keep it ({exc.strerror or exc})"
                return None
        return path

    def why_missing(self, chart: ChartRef) -> str:
        return self._failures.get(chart, f"{chart} was not pulled")

    def local(self, chart: ChartRef) -> Path | None:
        """The package if the cache holds it (nothing is pulled)."""
        path = self.cache / f"{chart.name}-{chart.version}.tgz"
        return path if path.is_file() else None


def _host(repo: str) -> str:
    return urlsplit(repo.replace("oci://", "https://", 1)).netloc or repo


class ChartSources:
    """Chart packages from several places, in order: the first that has a chart gives it; why none had it says each
    one's reason."""

    def __init__(self, sources: list[ChartPackages | ChartRepositories]):
        self.sources = sources

    def find(self, chart: ChartRef) -> Path | None:
        for source in self.sources:
            found = source.find(chart)
            if found is not None:
                return found
        return None

    def why_missing(self, chart: ChartRef) -> str:
        return "; ".join(source.why_missing(chart) for source in self.sources)

    def local(self, chart: ChartRef) -> Path | None:
        """The package if one of the sources has it at hand (nothing is pulled)."""
        return next((found for source in self.sources if (found := source.local(chart)) is not None), None)


ChartSource = ChartPackages | ChartRepositories | ChartSources


@dataclass(frozen=True)
class MissingChart:
    """A release whose chart package could not be found or fetched: its objects are not in the picture."""

    release: dict[str, Any]
    cluster: str
    chart: ChartRef
    reason: str


@dataclass
class RenderedRelease:
    """The objects one release installs (CRDs, templates and hooks) in Helm's output order, or why Helm refused it."""

    release: dict[str, Any]
    cluster: str
    chart: ChartRef
    objects: list[dict[str, Any]]
    error: str | None = None
    package: Path | None = None
    """The chart package it was rendered from."""

    def installs_first(self, obj: dict[str, Any]) -> bool:
        """Whether Helm creates the object before the release's other objects: a CRD of the chart's `crds/` folder
        (or a subchart's). CRDs among the templates are created with everything else, after Helm has mapped every
        kind of the manifest, so a custom resource of the same release cannot use them."""
        return (obj.get("kind") == "CustomResourceDefinition" and self.package is not None
                and (obj.get("metadata") or {}).get("name") in crd_folder_names(self.package))


def _in_crds_folder(parts: list[str]) -> bool:
    """Whether an archive path is inside a chart's `crds/` folder: `<chart>/crds/...` or `.../charts/<sub>/crds/...`, not
    inside a subchart that is itself named crds (kube-prometheus-stack's `charts/crds/templates/`)."""
    return any(part == "crds" and (i == 1 or (i >= 3 and parts[i - 2] == "charts")) for i, part in enumerate(parts[:-1]))


def crd_folder_names(package: Path) -> frozenset[str]:
    """Names of the CRDs in a chart package's `crds/` folders (the chart's and its subcharts'), once per package content
    in a process; within `render_cache(...)` read back for the same package content."""
    digest = package_digest(package)
    if digest not in _CRD_NAMES:
        _CRD_NAMES[digest] = frozenset(kept("crds", [digest], lambda: sorted(_crd_folder_names(package))))
    return _CRD_NAMES[digest]


_CRD_NAMES: dict[str, frozenset[str]] = {}


def _crd_folder_names(package: Path) -> set[str]:
    import tarfile

    names = set()
    with tarfile.open(package) as archive:
        for member in archive.getmembers():
            parts = member.name.split("/")
            if member.isfile() and _in_crds_folder(parts) and parts[-1].endswith((".yaml", ".yml")):
                handle = archive.extractfile(member)
                # The same documents as in the release's render (`--include-crds`): parsed once for both.
                for doc in parse_manifest(handle.read().decode() if handle else ""):
                    if doc.get("kind") == "CustomResourceDefinition":
                        names.add((doc.get("metadata") or {}).get("name"))
    return names


def releases(plan: Plan) -> list[dict[str, Any]]:
    """The plan's releases in a stable order: Pulumi registers resources concurrently, so the plan's own order varies
    from run to run, and what is reported about releases must not."""
    return sorted(plan.of_type(HELM_RELEASE_TYPE), key=lambda release: (plan.cluster(release) or "", release["name"]))


@cache
def _stand_in_ca() -> dict[str, str]:
    """A throwaway CA, base64 PEM as charts take it, standing in for a CA whose key the render redacts."""
    with tempfile.TemporaryDirectory(prefix="fab-ca-") as tmp:
        key, cert = Path(tmp) / "ca.key", Path(tmp) / "ca.crt"
        subprocess.run(
            ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=fab-helm-stand-in",
             "-addext", "basicConstraints=critical,CA:TRUE", "-keyout", str(key), "-out", str(cert)],
            capture_output=True, check=True,
        )
        return {"cert": base64.b64encode(cert.read_bytes()).decode(), "key": base64.b64encode(key.read_bytes()).decode()}


STAND_INS = {("cilium", ("tls", "ca", "cert")): "cert", ("cilium", ("tls", "ca", "key")): "key"}
"""Values a chart parses (a CA pair it signs certificates with) that the render holds only as mock or redacted secrets."""


def _values(chart: ChartRef, values: Any, path: tuple[str, ...] = ()) -> Any:
    """The release's values with stand-ins where a chart needs real material in place of a redacted secret."""
    if isinstance(values, dict):
        return {k: _values(chart, v, (*path, k)) for k, v in values.items()}
    part = STAND_INS.get((chart.name, path))
    return _stand_in_ca()[part] if part else values


def template(release: dict[str, Any], package: Path, helm: Path, project_dir: Path, cached: bool = True) -> list[dict[str, Any]]:
    """`helm template` of one release, post-rendered as the release says; raises HelmError with Helm's message.
    Within `render_cache(...)`, a release rendered before from the same package with the same Helm, inputs and
    post-renderer is read back instead (`cached=False` renders anyway: what varies from render to render)."""
    key = render_key(release, package, helm, project_dir) if cached and _RENDER_CACHE is not None else None
    if key is not None:
        known = _RENDER_CACHE.get("template", key)
        if known is not None:
            if "error" in known:
                raise HelmError(known["error"])
            return known["objects"]
    try:
        objects = fresh(parse_manifest(manifest(release, package, helm, project_dir)))
    except HelmError as exc:
        if key is not None:
            _RENDER_CACHE.put("template", key, {"error": str(exc)})
        raise
    if key is not None:
        _RENDER_CACHE.put("template", key, {"objects": objects})
    return objects


def manifest(release: dict[str, Any], package: Path, helm: Path, project_dir: Path, values: Any = None) -> str:
    """What `helm template` of the release prints (with `values` in place of the release's, where given), post-rendered
    as the release says; raises HelmError with Helm's message."""
    inputs = release["inputs"]
    with tempfile.TemporaryDirectory(prefix="fab-helm-") as tmp:
        path = Path(tmp) / "values.json"
        path.write_text(json.dumps(_values(ChartRef.of(release), inputs.get("values") or {} if values is None else values)))
        command = [
            str(helm), "template", str(inputs.get("name") or release["name"]), str(package),
            "--namespace", str(inputs.get("namespace") or "default"),
            "--kube-version", KUBE_VERSION, "--include-crds", "--skip-tests", "--values", str(path),
        ]
        done = subprocess.run(command, capture_output=True, text=True, env={**os.environ, "HELM_CACHE_HOME": tmp}, check=False)
        if done.returncode != 0:
            raise HelmError(done.stderr.strip() or f"helm exited {done.returncode}")
        text = done.stdout
    postrender = inputs.get("postrender")
    if postrender:
        # Helm 3 (which Pulumi embeds) runs the post-renderer as a program from the working directory.
        script = project_dir / str(postrender)
        done = subprocess.run([sys.executable, str(script)], input=text, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise HelmError(f"post-renderer {postrender} failed: {done.stderr.strip()}")
        text = done.stdout
    return text


_SEPARATOR = re.compile(r"^---[ \t]*$", re.MULTILINE)
_UNUSUAL = re.compile(r"^(?:---[ \t]*[^ \t\n]|\.\.\.|%)", re.MULTILINE)
"""A document marker with content after it, a document end or a directive: text not split at `---` lines, parsed whole."""
_PARSED: dict[str, list[dict[str, Any]]] = {}
_PARSED_LIMIT = 256 * 2**20
"""Characters of YAML whose parse `_PARSED` keeps before it starts again (a test session renders many releases)."""
_parsed_size = 0
_parsed_lock = threading.Lock()


def documents(text: str) -> list[str]:
    """The YAML documents of Helm's output (or of a chart file) as texts, each without its leading comments (Helm's
    `# Source:` lines) and blank lines: the same document gives the same text wherever it comes from."""
    if _UNUSUAL.search(text):
        return [text]
    out = []
    for part in _SEPARATOR.split(text):
        lines = part.strip().splitlines()
        while lines and (not lines[0].strip() or lines[0].lstrip().startswith("#")):
            lines.pop(0)
        if lines:
            out.append("\n".join(lines))
    return out


def parse_document(text: str) -> list[dict[str, Any]]:
    """The Kubernetes objects of one document of `documents()`, parsed once per process: a chart's CRDs are megabytes
    of YAML that every release of the chart, and every chart-value trial, prints again. What it returns is shared:
    never change it (`fresh` makes a copy to change)."""
    global _parsed_size
    found = _PARSED.get(text)
    if found is None:
        found = [doc for doc in yaml.load_all(text, Loader=_Loader) if isinstance(doc, dict) and doc.get("kind")]
        with _parsed_lock:
            if _parsed_size + len(text) > _PARSED_LIMIT:
                _PARSED.clear()
                _parsed_size = 0
            _PARSED[text] = found
            _parsed_size += len(text)
    return found


def parse_manifest(text: str) -> list[dict[str, Any]]:
    """The Kubernetes objects of a manifest, in order, shared as `parse_document` shares them: never change them."""
    return [obj for document in documents(text) for obj in parse_document(document)]


def fresh(objects: Any) -> Any:
    """A copy of parsed objects that may be changed (several times faster than `copy.deepcopy` for plain data)."""
    try:
        return marshal.loads(marshal.dumps(objects))
    except ValueError:  # a timestamp YAML parsed as a date: not plain data
        return copy.deepcopy(objects)


class RenderCache:
    """Helm's renders and the chart-value trials (`fabctl.check.values`) kept in a folder, each under a key of all it
    depends on: the chart package's content, Helm's version, the release's name, namespace, values and post-renderer,
    and the Kubernetes version (`render_key`). What an unchanged release gives is read back in milliseconds."""

    FORMAT = 1
    """Part of every key: raised when what is stored changes."""

    def __init__(self, folder: Path):
        self.folder = folder
        self._warned = False

    def get(self, kind: str, key: str) -> Any:
        path = self.folder / kind / f"{key}.json"
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None

    def put(self, kind: str, key: str, value: Any) -> None:
        """Keep a value, whole or not at all for the processes and threads sharing the folder; a folder that cannot be
        written keeps nothing, and says so once."""
        path = self.folder / kind / f"{key}.json"
        try:
            tag_cache_folder(self.folder)
            path.parent.mkdir(parents=True, exist_ok=True)
            write_whole(path, json.dumps(value))
        except OSError as exc:
            if not self._warned:
                self._warned = True
                reason = "not a folder" if self.folder.exists() and not self.folder.is_dir() else exc.strerror or exc
                print(f"warning: Helm's renders are not kept: the render cache {self.folder} cannot be used "
                      f"({reason}); name another with --render-cache DIR or FAB_CACHE_DIR", file=sys.stderr)


_RENDER_CACHE: RenderCache | None = None


@contextlib.contextmanager
def render_cache(folder: Path | None) -> Iterator[None]:
    """Within the block, Helm's renders and the chart-value trials are kept in `folder` (None: not kept)."""
    global _RENDER_CACHE
    outer, _RENDER_CACHE = _RENDER_CACHE, RenderCache(folder) if folder is not None else None
    try:
        yield
    finally:
        _RENDER_CACHE = outer


def active_render_cache() -> RenderCache | None:
    return _RENDER_CACHE


def kept(kind: str, key: list[Any], compute: Callable[[], Any]) -> Any:
    """`compute()` (JSON data), or what it gave for the same key before, within `render_cache(...)`: for what is
    derived from chart packages alone, keyed by their digests (`package_digest`)."""
    if _RENDER_CACHE is None:
        return compute()
    digest = hashlib.sha256(json.dumps([RenderCache.FORMAT, *key], sort_keys=True, default=str).encode()).hexdigest()
    known = _RENDER_CACHE.get(kind, digest)
    if known is None:
        known = compute()
        _RENDER_CACHE.put(kind, digest, known)
    return known


def render_key(release: dict[str, Any], package: Path, helm: Path, project_dir: Path) -> str:
    """What a release's render depends on, as one digest (see RenderCache)."""
    inputs = release["inputs"]
    postrender = inputs.get("postrender")
    script = project_dir / str(postrender) if postrender else None
    parts = [RenderCache.FORMAT, KUBE_VERSION, package_digest(package), helm_version(helm), inputs.get("name") or release["name"],
             inputs.get("namespace"), inputs.get("values"), postrender,
             hashlib.sha256(script.read_bytes()).hexdigest() if script is not None and script.is_file() else None]
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()


def package_digest(package: Path) -> str:
    stat = package.stat()
    return _file_digest(str(package.resolve()), stat.st_size, stat.st_mtime_ns)


@cache
def _file_digest(path: str, size: int, mtime_ns: int) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


@cache
def helm_version(helm: Path) -> str:
    """What `helm version --short` says (v3.19.0+g...); a Helm that does not answer is named by its path."""
    try:
        done = subprocess.run([str(helm), "version", "--short"], capture_output=True, text=True, check=False, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return f"unknown helm at {helm}"
    return done.stdout.strip() if done.returncode == 0 and done.stdout.strip() else f"unknown helm at {helm}"


RENDER_WORKERS = 2 * (os.cpu_count() or 2)
"""Helm renders at once: Helm runs as a process of its own, so more renders than cores keep the cores busy while this
process parses what the others printed."""
PULL_WORKERS = 16
"""Chart pulls at once: each waits on the network, and a host that cannot be reached should cost one timeout, not one
per chart in turn."""


def render_releases(plan: Plan, packages: ChartSource | None, helm: Path | None, project_dir: Path,
                    advance: Callable[[str], None] | None = None) -> tuple[list[RenderedRelease], list[MissingChart]]:
    """Every release of the plan rendered (or Helm's refusal), and the releases whose chart the source lacks
    (never skipped silently); without Helm (None), every release is missing. `advance` is told of each render done."""
    found = [(release, ChartRef.of(release)) for release in releases(plan)]
    if helm is None or packages is None:
        return [], [MissingChart(r, plan.cluster(r) or "", c, NO_HELM) for r, c in found]
    charts = list(dict.fromkeys(chart for _, chart in found))  # each chart once: releases share charts
    with ThreadPoolExecutor(max_workers=PULL_WORKERS) as pool:
        paths = dict(zip(charts, pool.map(packages.find, charts)))
    missing = [MissingChart(r, plan.cluster(r) or "", c, packages.why_missing(c)) for r, c in found if paths[c] is None]

    def key(release: dict[str, Any]) -> str:
        """What Helm's output depends on: releases installed alike on several clusters are rendered once."""
        inputs = release["inputs"]
        return json.dumps([str(paths[ChartRef.of(release)]), inputs.get("name") or release["name"], inputs.get("namespace"),
                           inputs.get("values"), inputs.get("postrender")], sort_keys=True, default=str)

    def one(release: dict[str, Any]) -> tuple[list[dict[str, Any]], str | None]:
        try:
            return template(release, paths[ChartRef.of(release)], helm, project_dir), None
        except HelmError as exc:
            return [], str(exc)
        finally:
            for _ in range(sharing[key(release)] if advance is not None else 0):
                advance(f"{plan.cluster(release) or ''} {release['name']}")

    renderable = [(r, c) for r, c in found if paths[c] is not None]
    sharing = Counter(key(r) for r, _ in renderable)
    unique = {key(r): r for r, _ in renderable}
    for gone in missing if advance is not None else []:
        advance(f"{gone.cluster} {gone.release['name']}")
    with ThreadPoolExecutor(max_workers=RENDER_WORKERS) as pool:
        outputs = dict(zip(unique, pool.map(one, unique.values())))
    done, handed = [], set()
    for release, chart in renderable:
        objects, error = outputs[key(release)]
        if key(release) in handed:  # releases installed alike on several clusters: each gets objects of its own
            objects = fresh(objects)
        handed.add(key(release))
        done.append(RenderedRelease(release, plan.cluster(release) or "", chart, objects, error, paths[chart]))
    return done, missing
