"""Chart values: every value a release sets is read by its chart.

Helm ignores a value key its chart does not read, so a misspelt or outdated key silently leaves the chart's
default in place (a worker count that stays at zero, a taint that is never applied), and a release then waits
forever or runs unsafely. A key the chart's default values (and its subcharts') already hold is read; a key
outside them is tried: the release is rendered again with that key set to a marker, and then without it. The
key is read if the marker shows in the output (Secret data decoded) or leaving it out changes the output beyond
what varies from render to render (generated passwords and certificates). Otherwise it is a finding.
"""

from __future__ import annotations

import base64
import copy
import json
import os
import tarfile
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from fabctl.check.findings import Finding
from fabctl.check.picture import Picture, release_placed
from fabctl.helm import HelmError, RenderedRelease, _Loader, active_render_cache, documents, manifest, parse_document, render_key

MARKER = "fab-check-marker-7f3a"


def _merge(defaults: dict[str, Any], sub: str, values: Any) -> None:
    if isinstance(values, dict):
        own = defaults.get(sub)
        defaults[sub] = {**values, **own} if isinstance(own, dict) else values


def _chart_defaults(files: dict[str, bytes], root: str) -> dict[str, Any]:
    """The default values of the chart at `root` inside a package, its subcharts' under their names (or aliases)."""
    defaults = yaml.load(files.get(f"{root}/values.yaml", b"") or b"{}", Loader=_Loader) or {}
    chart = yaml.load(files.get(f"{root}/Chart.yaml", b"") or b"{}", Loader=_Loader) or {}
    aliases = {d.get("name"): d.get("alias") or d.get("name") for d in chart.get("dependencies") or []}
    prefix = f"{root}/charts/"
    for name in sorted(files):
        if not name.startswith(prefix):
            continue
        rest = name[len(prefix):]
        if rest.count("/") == 1 and rest.endswith("/Chart.yaml"):
            sub = rest.split("/", 1)[0]
            sub_name = (yaml.load(files[name], Loader=_Loader) or {}).get("name", sub)
            _merge(defaults, aliases.get(sub_name, sub_name), _chart_defaults(files, f"{root}/charts/{sub}"))
        elif "/" not in rest and rest.endswith(".tgz"):
            with tarfile.open(fileobj=__import__("io").BytesIO(files[name])) as nested:
                inner = _files(nested)
            inner_root = sorted(inner)[0].split("/", 1)[0]
            sub_name = (yaml.load(inner.get(f"{inner_root}/Chart.yaml", b"") or b"{}", Loader=_Loader) or {}).get("name", inner_root)
            _merge(defaults, aliases.get(sub_name, sub_name), _chart_defaults(inner, inner_root))
    return defaults


def _files(archive: tarfile.TarFile) -> dict[str, bytes]:
    out = {}
    for member in archive.getmembers():
        if member.isfile() and (member.name.endswith(("values.yaml", "Chart.yaml", ".tgz"))):
            handle = archive.extractfile(member)
            if handle is not None:
                out[member.name] = handle.read()
    return out


@cache
def chart_defaults(package: Path) -> dict[str, Any]:
    with tarfile.open(package) as archive:
        files = _files(archive)
    root = sorted(files)[0].split("/", 1)[0]
    return _chart_defaults(files, root)


def candidates(values: Any, defaults: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    """Key paths the release sets that the chart's defaults do not hold (maps the chart passes through, whose
    default is empty, are not descended)."""
    if not isinstance(values, dict) or not isinstance(defaults, dict):
        return
    for key, value in values.items():
        here = (*path, key)
        if not path and key == "global":
            continue  # every chart accepts global values for its subcharts
        if key not in defaults:
            yield here
        elif isinstance(value, dict) and isinstance(defaults[key], dict) and defaults[key]:
            yield from candidates(value, defaults[key], here)


def _with(values: dict[str, Any], path: tuple[str, ...], value: Any = None, remove: bool = False) -> dict[str, Any]:
    return _with_all(values, {path: value}, remove)


def _with_all(values: dict[str, Any], changes: dict[tuple[str, ...], Any], remove: bool = False) -> dict[str, Any]:
    """The values with each key path set to its value, or removed (no path of `changes` lies within another)."""
    changed = copy.deepcopy(values)
    for path, value in changes.items():
        node = changed
        for key in path[:-1]:
            node = node[key]
        if remove:
            del node[path[-1]]
        else:
            node[path[-1]] = value
    return changed


def _text(objects: list[dict[str, Any]]) -> str:
    """The output as text, with Secret data decoded so that a value written into a Secret can be found."""
    decoded = []
    for obj in objects:
        if obj.get("kind") == "Secret" and isinstance(obj.get("data"), dict):
            obj = {**obj, "data": {k: _decode(v) for k, v in obj["data"].items()}}
        decoded.append(obj)
    return json.dumps(decoded, sort_keys=True)


def _decode(value: Any) -> Any:
    try:
        return base64.b64decode(str(value)).decode()
    except (ValueError, UnicodeDecodeError):
        return value


def _leaves(node: Any, path: str = "") -> dict[str, Any]:
    if isinstance(node, dict):
        return {k: v for key, value in node.items() for k, v in _leaves(value, f"{path}/{key}").items()}
    if isinstance(node, list):
        return {k: v for i, value in enumerate(node) for k, v in _leaves(value, f"{path}/{i}").items()}
    return {path: node}


def _changed(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> set[str]:
    """The leaf paths (`/<object index>/<key>/...`) where two outputs differ: object by object, where objects that are
    equal (most of them, and the largest: CRDs) are skipped at once."""
    if len(a) != len(b):
        left, right = _leaves(a), _leaves(b)
        return {k for k in set(left) | set(right) if left.get(k) != right.get(k)}
    out: set[str] = set()
    for i, (x, y) in enumerate(zip(a, b)):
        if x is y or x == y:
            continue
        left, right = _leaves(x, f"/{i}"), _leaves(y, f"/{i}")
        out.update(k for k in set(left) | set(right) if left.get(k) != right.get(k))
    return out


def _differs(a: list[dict[str, Any]], b: list[dict[str, Any]], varying: set[str]) -> bool:
    return bool(_changed(a, b) - varying)


class ValuesCheck:
    """Renders a release again as often as its keys outside the chart's defaults need."""

    def __init__(self, helm: Path, project_dir: Path):
        self.helm, self.project_dir = helm, project_dir

    def unread(self, rendered: RenderedRelease) -> list[tuple[str, ...]]:
        """The key paths the release sets that its chart does not read; within `fabctl.helm.render_cache`, a release's
        trials are run once for the same package, Helm, inputs and post-renderer."""
        cache = active_render_cache()
        if cache is None or rendered.package is None:
            return self._unread(rendered)
        key = render_key(rendered.release, rendered.package, self.helm, self.project_dir)
        known = cache.get("values", key)
        if known is None:
            known = [list(path) for path in self._unread(rendered)]
            cache.put("values", key, known)
        return [tuple(path) for path in known]

    def _unread(self, rendered: RenderedRelease) -> list[tuple[str, ...]]:
        values = rendered.release["inputs"].get("values") or {}
        paths = list(candidates(values, chart_defaults(rendered.package)))
        if not paths:
            return []
        unread: list[tuple[str, ...]] = []
        _Trials(self, rendered, values, paths).classify(paths, unread)
        return [path for path in paths if path in unread]


class _Trials:
    """The chart-value trials of one release, several keys per render where the output can say which key did what.

    A group of keys is rendered with a marker of its own in each key: a key whose marker shows is read. The keys left are
    rendered again with only theirs marked (the shown keys changed the output), and if none of their markers shows,
    once more without them: if neither render changes the output (beyond what varies between two renders), none of
    them is read. Where either does, or Helm refuses the group, the group is split in two and each half tried alike,
    down to a single key, whose trial is the one-key rule of the module's doc. A release whose keys are all read by
    their markers (the usual case) costs one render instead of one or two per key."""

    def __init__(self, check: ValuesCheck, rendered: RenderedRelease, values: dict[str, Any], paths: list[tuple[str, ...]]):
        self.check, self.rendered, self.values = check, rendered, values
        self.markers = {path: f"{MARKER}-{i}-" for i, path in enumerate(paths)}
        self._varying: set[str] | None = None

    def render(self, values: dict[str, Any]) -> list[dict[str, Any]] | None:
        """The release's objects with these values, shared (never changed), or None where Helm refuses them."""
        found = self.render_documents(values)
        return None if found is None else [obj for _, objects in found for obj in objects]

    def render_documents(self, values: dict[str, Any]) -> list[tuple[str, list[dict[str, Any]]]] | None:
        """Each document of the output as text, with its objects (shared: never changed); None where Helm refuses."""
        rendered = self.rendered
        try:
            text = manifest(rendered.release, rendered.package, self.check.helm, self.check.project_dir, values)
        except HelmError:
            return None  # a value whose absence (or marker) Helm refuses is read
        return [(document, parse_document(document)) for document in documents(text)]

    def varying(self) -> set[str]:
        """What differs between two renders of the same values (generated passwords and certificates)."""
        if self._varying is None:
            self._varying = _changed(self.render(self.values) or [], self.rendered.objects)
        return self._varying

    def changes(self, objects: list[dict[str, Any]]) -> bool:
        return _differs(objects, self.rendered.objects, self.varying())

    def classify(self, group: list[tuple[str, ...]], unread: list[tuple[str, ...]]) -> None:
        """Add to `unread` the keys of `group` that the chart does not read."""
        found = self.render_documents(_with_all(self.values, {path: self.markers[path] for path in group}))
        if found is None:
            self.split(group, unread)
            return
        marked = [obj for _, objects in found for obj in objects]
        # Markers show in the text of their documents, or base64-encoded in a Secret's data.
        text = _text([obj for document, objects in found for obj in objects if MARKER in document or obj.get("kind") == "Secret"])
        rest = [path for path in group if self.markers[path] not in text]
        if len(rest) < len(group):
            if rest:
                self.classify(rest, unread)
            return
        # Read if the marker or the key's absence changes the output (a flag set to the chart's implicit
        # default changes nothing when removed, but a marker in its place does).
        if self.changes(marked):
            self.split(group, unread)
            return
        without = self.render(_with_all(self.values, dict.fromkeys(group), remove=True))
        if without is None or self.changes(without):
            self.split(group, unread)
            return
        unread.extend(group)

    def split(self, group: list[tuple[str, ...]], unread: list[tuple[str, ...]]) -> None:
        """A group whose trial cannot say which key did it: each half alone; a single key is read."""
        if len(group) > 1:
            half = len(group) // 2
            self.classify(group[:half], unread)
            self.classify(group[half:], unread)


def values_findings(picture: Picture, check: ValuesCheck, advance: Callable[[str], None] | None = None) -> Iterator[Finding]:
    """`charts.values` findings of every rendered release, releases tried side by side (`advance` is told of each one
    done)."""
    rendered = [r for r in picture.releases if not r.error and r.package is not None]
    # A release installed alike on several clusters (same package, name, namespace, values) is tried once.
    keys = [render_key(r.release, r.package, check.helm, check.project_dir) for r in rendered]
    first: dict[str, RenderedRelease] = {}
    for key, release in zip(keys, rendered):
        first.setdefault(key, release)

    def unread(release: RenderedRelease) -> list[tuple[str, ...]]:
        found = check.unread(release)
        if advance is not None:
            advance(f"{release.cluster} {release.release['name']}")
        return found

    # Helm runs as a process of its own: more trials at once than cores keeps the cores busy while Python parses.
    with ThreadPoolExecutor(max_workers=TRIAL_WORKERS) as pool:
        tried = dict(zip(first, pool.map(unread, first.values())))
    if advance is not None:
        for release in (r for key, r in zip(keys, rendered) if first[key] is not r):
            advance(f"{release.cluster} {release.release['name']}")
    for release, paths in zip(rendered, (tried[key] for key in keys)):
        subject = release_placed(picture.plan, release.release)
        for path in paths:
            yield Finding.of("charts.values", subject, f"chart {release.chart.name} {release.chart.version} does not read the value "
                             f"{'.'.join(path)} (setting or removing it changes nothing it installs)",
                             "use the key the chart's values.yaml defines for this setting, or remove it")


TRIAL_WORKERS = 2 * (os.cpu_count() or 2)
