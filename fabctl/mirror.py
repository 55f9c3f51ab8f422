"""`fabctl mirror`: everything an air-gapped site's registry must hold before `pulumi up` (docs/airgap.md).

Gathered from what the site really runs, not from a hand-kept list: the charts of the plan's Helm releases, every image
reference of the program's objects and of every object those releases render (the operators' run-time images are set
explicitly in them when the site has a registry), the release files ConfigFiles apply and the Maven packages Spark pods
resolve. Each mirror reference names its source (the registry keeps the source registry and path under its prefix), so
the list is source -> mirror. Written as a plain list and as the inputs of standard tools: a `skopeo sync --scoped`
YAML file, `skopeo copy` commands (exact digests where the digest file pins them), `helm pull`/`helm push` commands,
`curl` commands for the files and the Maven coordinates to seed the site's Maven repository with.
"""

from __future__ import annotations

import json
import re
import shlex
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from components.config import SiteConfig
from components.registry import ImageRef, Registry
from components.versions import NODE_OS_TAGS
from fabctl.check.mirror import SPARK_PACKAGES, image_references, object_images
from fabctl.check.picture import Picture
from fabctl.helm import ChartRef, MissingChart, RenderedRelease, releases
from fabctl.render import Plan

DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
PACKAGES_IN_TEXT = re.compile(re.escape(SPARK_PACKAGES) + r"""["'=:\s]+([A-Za-z0-9_.:,-]+)""")
CONFIG_FILE_TYPE = "kubernetes:yaml/v2:ConfigFile"


class DigestFileError(ValueError):
    """A digest file that cannot be read: the path, the entry and what is expected."""


@dataclass(frozen=True)
class MirroredImage:
    source: str
    """The upstream reference, as the registry's copy names it (`docker.io/library/python:3.13.9-slim-bookworm`)."""
    mirror: str
    """The reference pods pull (`<images>/docker.io/library/python:3.13.9-slim-bookworm`)."""
    digest: str | None = None
    """The pinned digest of the source (digest file, or the reference's own), or None: mirrored by tag."""
    pods_pull_by_tag: bool = True
    """Whether the objects pull it by tag alone (a digest-file pin: only an exact copy under the tag keeps the pin), or
    by the digest the reference carries."""

    @property
    def pinned_source(self) -> str:
        """The source as it is copied: by digest where one is pinned."""
        if self.digest is None:
            return self.source
        ref = ImageRef.parse(self.source)
        return f"{ref.registry}/{ref.repository}@{self.digest}"

    @property
    def destination(self) -> str:
        """Where the copy goes: the mirror reference by its tag (a registry stores the digest with it)."""
        ref = ImageRef.parse(self.mirror)
        return f"{ref.registry}/{ref.repository}:{ref.tag}" if ref.tag else self.mirror


@dataclass
class Manifest:
    """What a site's registry must hold, and what the plan names outside it."""

    registry: Registry
    charts: list[ChartRef] = field(default_factory=list)
    images: list[MirroredImage] = field(default_factory=list)
    files: list[tuple[str, str]] = field(default_factory=list)
    """(source URL, mirror URL) of each release file."""
    maven: list[str] = field(default_factory=list)
    """Maven coordinates Spark resolves (`group:artifact:version`)."""
    outside: list[str] = field(default_factory=list)
    """Image references of the plan that are not under the registry (each also a `fabctl check` finding)."""
    needs_node_os: list[str] = field(default_factory=list)
    """Sources whose operator appends the node's OS to the tag (components/versions.NODE_OS_TAGS), listed without it
    because no node OS was given."""
    missing: list[MissingChart] = field(default_factory=list)
    """Releases whose chart could not be rendered: their images are not in the list."""

    @property
    def unpinned(self) -> list[MirroredImage]:
        return [image for image in self.images if image.digest is None]


def read_digests(path: Path) -> dict[str, str]:
    """A digest file: a YAML mapping of source image reference (with its tag, as `fabctl mirror` lists it) -> sha256 digest."""
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except OSError as exc:
        raise DigestFileError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    except yaml.YAMLError as exc:
        raise DigestFileError(f"{path}: not YAML ({exc})") from None
    if not isinstance(data, dict):
        raise DigestFileError(f"{path}: must map each source image to its digest, such as "
                              "'docker.io/library/python:3.13.9-slim-bookworm: sha256:<64 hex digits>'")
    for source, digest in data.items():
        if not isinstance(digest, str) or not DIGEST.fullmatch(digest):
            raise DigestFileError(f"{path}: {source}: {digest!r} is not a digest; write sha256:<64 hex digits>")
    return {str(ImageRef.parse(str(source))): digest for source, digest in data.items()}


def _strings(node: Any) -> list[str]:
    if isinstance(node, str):
        return [node]
    if isinstance(node, dict):
        return [s for value in node.values() for s in _strings(value)]
    if isinstance(node, list):
        return [s for value in node for s in _strings(value)]
    return []


def acceptance_images(site: SiteConfig) -> list[str]:
    """The images of the acceptance jobs `fabctl verify` runs on the site, over every phase (they are in no plan): what
    their containers pull. An image named in a job's arguments is not one of them: phase 03 hands the serving loop the
    team's own training image, which is the team's to provide (as in `training.example_job`), not the registry's to mirror."""
    from fabctl.verify.criteria import PHASES, criteria

    return [reference for phase in PHASES for criterion in criteria(site, phase) for step in criterion.steps
            for obj in step.objects for path, reference in image_references(obj.get("spec") or {}) if path.endswith("image")]


def _node_os_images(image: MirroredImage, node_os: list[str], arch: str) -> list[MirroredImage] | None:
    """The tags an operator really pulls for an operand that carries the node's OS, or None for any other image."""
    ref = ImageRef.parse(image.source)
    pattern = NODE_OS_TAGS.get(f"{ref.registry}/{ref.repository}")
    if pattern is None or not ref.tag:
        return None
    return [MirroredImage(source=f"{ref.registry}/{ref.repository}:{tag}", mirror=f"{image.mirror.rsplit(':', 1)[0]}:{tag}")
            for tag in (pattern.format(tag=ref.tag, os=os, arch=arch) for os in node_os)]


def manifest(plan: Plan, site: SiteConfig, rendered: list[RenderedRelease], missing: list[MissingChart],
             digests: dict[str, str] | None = None, node_os: list[str] | None = None, node_arch: str = "amd64") -> Manifest:
    """What the plan (rendered with the site's registry) needs in that registry; `node_os` (`ubuntu24.04`) names the
    GPU nodes' operating systems, whose driver tags the operators pull."""
    registry = Registry.of(site.registry)
    assert registry.mirror is not None, "manifest() needs a site with a registry"
    picture = Picture(plan, site, rendered, missing)
    found = [(reference, True) for placed in picture.placed for _, reference in object_images(placed)]
    # `fabctl verify`'s acceptance jobs pull from the registry too.
    found += [(reference, True) for reference in acceptance_images(site)]
    # Stack outputs hand templates to teams (Spark RAPIDS): the platform's images there are pulled too. A team's own
    # image in an example (the training job's) is the team's to provide, not the registry's to mirror.
    found += [(reference, False) for _, reference in image_references(plan.outputs)]
    images: dict[str, MirroredImage] = {}
    outside: list[str] = []
    for reference, platform in found:
        source = registry.source_of(reference)
        if source is None:
            if platform:
                outside.append(reference)
        else:
            parsed = ImageRef.parse(source)
            normal = str(parsed)
            pinned = (digests or {}).get(normal)
            # A reference that carries its digest (Cilium's charts pin them) is pinned by it already.
            images.setdefault(reference, MirroredImage(normal, reference, pinned or parsed.digest, pods_pull_by_tag=parsed.digest is None))
    needs_node_os = []
    for reference, image in list(images.items()):
        expanded = _node_os_images(image, node_os or [], node_arch)
        if expanded is not None:
            del images[reference]
            if node_os:
                images.update({i.mirror: i for i in expanded})
            else:
                needs_node_os.append(image.source)
    charts = {(ref.name, ref.version): ref for ref in (ChartRef.of(r) for r in releases(plan))}
    files = []
    for record in plan.resources:
        url = (record.get("inputs") or {}).get("file") if record.get("type") == CONFIG_FILE_TYPE else None
        prefix = f"{registry.mirror.files}/" if registry.mirror.files else None
        if isinstance(url, str) and prefix and url.startswith(prefix):
            files.append((f"https://{url[len(prefix):]}", url))
    texts = [s for placed in picture.placed for s in _strings(placed.obj.get("spec") or placed.obj.get("data") or {})]
    texts += _strings(plan.outputs)
    packages = {coordinate for text in texts for match in PACKAGES_IN_TEXT.finditer(text) for coordinate in match.group(1).split(",") if coordinate}
    return Manifest(
        registry=registry,
        charts=sorted(charts.values(), key=lambda c: (c.name, c.version)),
        images=sorted(images.values(), key=lambda i: i.source),
        files=sorted(set(files)),
        maven=sorted(packages),
        outside=sorted(set(outside)),
        needs_node_os=sorted(needs_node_os),
        missing=missing,
    )


def plain_list(m: Manifest) -> list[str]:
    """One line per item: `chart NAME VERSION SOURCE -> REGISTRY`, `image SOURCE -> MIRROR`, `file`, `maven`."""
    mirror = m.registry.mirror
    assert mirror is not None
    lines = [f"chart {c.name} {c.version} {c.source} -> {mirror.charts}" for c in m.charts]
    lines += [f"image {i.pinned_source} -> {i.mirror}" for i in m.images]
    lines += [f"file {source} -> {target}" for source, target in m.files]
    lines += [f"maven {coordinate} -> {mirror.maven}" for coordinate in m.maven]
    return lines


def skopeo_sync(m: Manifest) -> str:
    """The images as a `skopeo sync --all --src yaml --dest docker --scoped FILE <images>` source file: by tag, and by
    digest too where the reference carries one (so that it finds its digest in the registry). An image the digest file
    pins, which pods pull by tag, is left to `copy-images.sh`: syncing its tag would copy whatever the tag points to."""
    by_registry: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for image in m.images:
        if image.digest is not None and image.pods_pull_by_tag:
            continue
        ref = ImageRef.parse(image.source)
        by_registry[ref.registry][ref.repository] += [v for v in (ref.tag, image.digest) if v]
    document = {host: {"images": {repo: sorted(set(tags)) for repo, tags in sorted(repos.items())}} for host, repos in sorted(by_registry.items())}
    return yaml.safe_dump(document, sort_keys=False)


def copy_commands(m: Manifest) -> list[str]:
    """`skopeo copy` of each image, from its pinned digest where there is one, to its mirror reference."""
    return [f"skopeo copy --all --preserve-digests {shlex.quote('docker://' + i.pinned_source)} {shlex.quote('docker://' + i.destination)}"
            for i in m.images]


def chart_commands(m: Manifest) -> list[str]:
    """`helm pull` of each chart from its upstream repository, then `helm push` into an OCI registry (or the upload to a
    classic repository)."""
    mirror = m.registry.mirror
    assert mirror is not None
    lines = []
    for chart in m.charts:
        if chart.source.startswith("oci://"):
            lines.append(f"helm pull {shlex.quote(chart.source + '/' + chart.name)} --version {shlex.quote(chart.version)}")
        else:
            lines.append(f"helm pull {shlex.quote(chart.name)} --repo {shlex.quote(chart.source)} --version {shlex.quote(chart.version)}")
        package = f"{chart.name}-{chart.version}.tgz"
        if mirror.charts.startswith("oci://"):
            lines.append(f"helm push {package} {shlex.quote(mirror.charts)}")
        else:
            lines.append(f"# upload {package} to {mirror.charts} (ChartMuseum: curl --data-binary @{package} <repository>/api/charts)")
    return lines


def file_commands(m: Manifest) -> list[str]:
    """`curl` of each release file into a tree laid out as the file server serves it (`<host>/<path>`)."""
    return [f"curl -fsSL --create-dirs -o {shlex.quote(source.split('://', 1)[1])} {shlex.quote(source)}" for source, _ in m.files]


def write(m: Manifest, out: Path) -> list[Path]:
    """Write the list and the tools' inputs into `out`; returns the files written."""
    out.mkdir(parents=True, exist_ok=True)
    shell = "#!/bin/sh\nset -eu\n"
    files = {
        "mirror.txt": "\n".join(plain_list(m)) + "\n",
        "skopeo-sync.yaml": skopeo_sync(m),
        "copy-images.sh": shell + "\n".join(copy_commands(m)) + "\n",
        "charts.sh": shell + "\n".join(chart_commands(m)) + "\n",
        "files.sh": shell + "\n".join(file_commands(m)) + "\n",
        "maven.txt": "\n".join(m.maven) + ("\n" if m.maven else ""),
        "mirror.json": json.dumps({
            "charts": [{"name": c.name, "version": c.version, "source": c.source} for c in m.charts],
            "images": [{"source": i.source, "mirror": i.mirror, "digest": i.digest} for i in m.images],
            "files": [{"source": s, "mirror": t} for s, t in m.files],
            "maven": m.maven,
        }, indent=2) + "\n",
    }
    written = []
    for name, text in files.items():
        path = out / name
        path.write_text(text)
        if name.endswith(".sh"):
            path.chmod(0o755)
        written.append(path)
    return written
