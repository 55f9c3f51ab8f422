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
import tarfile
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from fabctl.check.findings import Finding
from fabctl.check.picture import Picture, release_placed
from fabctl.helm import HelmError, RenderedRelease, active_render_cache, render_key, template

MARKER = "fab-check-marker-7f3a"


def _merge(defaults: dict[str, Any], sub: str, values: Any) -> None:
    if isinstance(values, dict):
        own = defaults.get(sub)
        defaults[sub] = {**values, **own} if isinstance(own, dict) else values


def _chart_defaults(files: dict[str, bytes], root: str) -> dict[str, Any]:
    """The default values of the chart at `root` inside a package, its subcharts' under their names (or aliases)."""
    defaults = yaml.safe_load(files.get(f"{root}/values.yaml", b"") or b"{}") or {}
    chart = yaml.safe_load(files.get(f"{root}/Chart.yaml", b"") or b"{}") or {}
    aliases = {d.get("name"): d.get("alias") or d.get("name") for d in chart.get("dependencies") or []}
    prefix = f"{root}/charts/"
    for name in sorted(files):
        if not name.startswith(prefix):
            continue
        rest = name[len(prefix):]
        if rest.count("/") == 1 and rest.endswith("/Chart.yaml"):
            sub = rest.split("/", 1)[0]
            sub_name = (yaml.safe_load(files[name]) or {}).get("name", sub)
            _merge(defaults, aliases.get(sub_name, sub_name), _chart_defaults(files, f"{root}/charts/{sub}"))
        elif "/" not in rest and rest.endswith(".tgz"):
            with tarfile.open(fileobj=__import__("io").BytesIO(files[name])) as nested:
                inner = _files(nested)
            inner_root = sorted(inner)[0].split("/", 1)[0]
            sub_name = (yaml.safe_load(inner.get(f"{inner_root}/Chart.yaml", b"") or b"{}") or {}).get("name", inner_root)
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
    changed = copy.deepcopy(values)
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


def _differs(a: list[dict[str, Any]], b: list[dict[str, Any]], varying: set[str]) -> bool:
    left, right = _leaves(a), _leaves(b)
    return any(left.get(k) != right.get(k) for k in set(left) | set(right) if k not in varying)


class ValuesCheck:
    """Renders a release again as often as its keys outside the chart's defaults need."""

    def __init__(self, helm: Path, project_dir: Path):
        self.helm, self.project_dir = helm, project_dir

    def _render(self, rendered: RenderedRelease, values: dict[str, Any]) -> list[dict[str, Any]] | None:
        release = {**rendered.release, "inputs": {**rendered.release["inputs"], "values": values}}
        try:
            # Never read back: a trial compares renders, and what varies between two of them must really vary.
            return template(release, rendered.package, self.helm, self.project_dir, cached=False)
        except HelmError:
            return None  # a value whose absence Helm refuses is read

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
        varying: set[str] | None = None
        out = []
        for path in paths:
            marked = self._render(rendered, _with(values, path, MARKER))
            if marked is None or MARKER in _text(marked):
                continue
            without = self._render(rendered, _with(values, path, remove=True))
            if without is None:
                continue
            if varying is None:  # what differs between two renders of the same values
                again, baseline = _leaves(self._render(rendered, values) or []), _leaves(rendered.objects)
                varying = {k for k in set(again) | set(baseline) if again.get(k) != baseline.get(k)}
            # Read if the marker or the key's absence changes the output (a flag set to the chart's implicit
            # default changes nothing when removed, but a marker in its place does).
            if not _differs(without, rendered.objects, varying) and not _differs(marked, rendered.objects, varying):
                out.append(path)
        return out


def values_findings(picture: Picture, check: ValuesCheck) -> Iterator[Finding]:
    from concurrent.futures import ThreadPoolExecutor

    rendered = [r for r in picture.releases if not r.error and r.package is not None]
    with ThreadPoolExecutor(max_workers=2) as pool:
        unread = list(pool.map(check.unread, rendered))
    for release, paths in zip(rendered, unread):
        subject = release_placed(picture.plan, release.release)
        for path in paths:
            yield Finding.of("charts.values", subject, f"chart {release.chart.name} {release.chart.version} does not read the value "
                             f"{'.'.join(path)} (setting or removing it changes nothing it installs)",
                             "use the key the chart's values.yaml defines for this setting, or remove it")
