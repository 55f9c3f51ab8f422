"""Pins: every image has an explicit tag or digest (never `latest`), and every chart an exact version.

An unpinned image or chart is a different deploy on every node pull and every `pulumi up`: what was reviewed is
not what runs. Images are read wherever the picture writes them: containers and init containers of every pod
template, and the image fields of operator resources (`image` with `version`/`tag` beside it, as the GPU and
Network Operators' policies write them).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from fabctl.check.findings import Finding
from fabctl.check.picture import Picture, release_placed

EXACT_VERSION = re.compile(r"^v?\d+\.\d+\.\d+([-+][0-9A-Za-z.+-]+)?$")


def image_problem(reference: str) -> str | None:
    """Why an image reference is not pinned, or None."""
    if "@sha256:" in reference:
        return None
    last = reference.rsplit("/", 1)[-1]
    if ":" not in last:
        return "has no tag (the runtime pulls latest)"
    tag = last.rsplit(":", 1)[1]
    if not tag or tag == "latest":
        return f"is tagged {tag or 'empty'!r}, which moves"
    return None


def images(node: Any, path: str = "") -> Iterator[tuple[str, str, str | None]]:
    """(path, image, separate version) of every image the object names."""
    if isinstance(node, list):
        for i, item in enumerate(node):
            yield from images(item, f"{path}[{i}]")
    elif isinstance(node, dict):
        if isinstance(node.get("image"), str):
            version = node.get("version") or node.get("tag")
            yield f"{path}.image" if path else "image", node["image"], str(version) if version else None
        for key, value in node.items():
            if key != "image":
                yield from images(value, f"{path}.{key}" if path else key)


def image_findings(picture: Picture) -> Iterator[Finding]:
    for placed in picture.placed:
        if placed.kind in ("ConfigMap", "Secret", "CustomResourceDefinition"):
            continue
        for path, image, version in images(placed.obj.get("spec") or {}, "spec"):
            if version is not None:
                problem = None if version != "latest" else "has version 'latest', which moves"
            else:
                problem = image_problem(image)
            if problem:
                yield Finding.of("images.pinned", placed, f"{path} {image!r} {problem}",
                                 "pin a tag or digest (components/versions.py for the program's images, the chart's values for a chart's)")


def chart_findings(picture: Picture) -> Iterator[Finding]:
    for rendered in picture.releases:
        if rendered.error:
            placed = release_placed(picture.plan, rendered.release)
            # Helm's whole message on one line, without its advice to rerun with --debug.
            message = " ".join(line.strip() for line in rendered.error.splitlines() if line.strip() and "--debug" not in line)
            yield Finding.of("charts.render", placed, f"Helm refuses to render it: {message}",
                             "fix the release's values (the chart's values.schema.json and templates say what it accepts)")
    for release in picture.release_records():
        version = str(release["inputs"].get("version") or "")
        if not EXACT_VERSION.fullmatch(version):
            yield Finding.of("charts.pinned", release_placed(picture.plan, release),
                             f"chart {release['inputs'].get('chart')} has version {version!r}, not an exact version",
                             "pin the chart's exact version in components/versions.py")
