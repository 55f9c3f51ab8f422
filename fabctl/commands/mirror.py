"""`fabctl mirror`: everything the site's registry must hold (charts, images, release files, Maven packages), and the
mirroring tools' inputs (docs/airgap.md)."""

from __future__ import annotations

import argparse
import contextlib
from pathlib import Path
from typing import Any

from rich.console import Console

from components.config import parse_site
from fabctl.commands.charts import chart_options, chart_source, render_with_charts
from fabctl.commands.common import EXIT_CHECK, EXIT_USAGE, stack_file_error
from fabctl.diff import set_path
from fabctl.helm import render_releases
from fabctl.mirror import DigestFileError, manifest, plain_list, read_digests
from fabctl.mirror import write as write_mirror
from fabctl.progress import Phases
from fabctl.render import HELM_RELEASE_TYPE
from fabctl.stackfile import SITE_KEY, StackFileError, read_stack_config, stack_file

DIGESTS_FILE = "image-digests.yaml"
"""The project's digest file (source image -> sha256 digest), read by `fabctl mirror` when it exists."""


def cmd_mirror(args: argparse.Namespace, console: Console, err: Console) -> int:
    """List what the stack's registry must hold, and write the mirroring tools' inputs."""
    charts = chart_source(args, err, upstream=True)  # the registry does not hold the charts yet
    if isinstance(charts, int):
        return charts
    if charts.helm is None:
        err.print("error: no Helm found (--helm, FAB_HELM, helm beside this Python, helm on the PATH): the mirror list needs "
                  "every release rendered; install the pinned Helm with `make setup` (venv/bin/helm) or pass --helm PATH",
                  markup=False, highlight=False)
        return EXIT_USAGE
    project = Path(args.project_dir)
    try:
        config = read_stack_config(stack_file(project, args.stack))
        for assignment in args.set or []:
            set_path(config, assignment, SITE_KEY)
        digest_file = Path(args.digests) if args.digests else project / DIGESTS_FILE
        digests = read_digests(digest_file) if args.digests or digest_file.is_file() else {}
    except StackFileError as exc:
        return stack_file_error(exc, err)
    except (ValueError, DigestFileError) as exc:
        err.print(f"error: {exc}", markup=False, highlight=False)
        return EXIT_USAGE
    if not (config.get(SITE_KEY) or {}).get("registry"):
        err.print(f"error: {args.stack} has no registry: add `registry` to its site config (docs/airgap.md), or name one "
                  "here with --set site.registry.charts=oci://HOST/PATH --set site.registry.images=HOST/PATH",
                  markup=False, highlight=False)
        return EXIT_USAGE
    with Phases(err, f"mirror {args.stack}") as phases:
        with phases.phase("render"):
            plan = render_with_charts(args.stack, project, err, charts, config)
        if isinstance(plan, int):
            return plan
        with contextlib.chdir(project):  # the config's file paths are relative to the project
            site = parse_site(config.get(SITE_KEY))
        charts.ready()
        with phases.phase("Helm renders", total=len(plan.of_type(HELM_RELEASE_TYPE))) as advance:
            rendered, missing = render_releases(plan, charts.source, charts.helm, project, advance)
        phases.done()
    found = manifest(plan, site, rendered, missing, digests, args.node_os, args.node_arch)
    if found.needs_node_os:
        err.print(f"error: {', '.join(found.needs_node_os)}: the operator pulls it with the GPU nodes' OS appended to the "
                  "tag (580.105.08-ubuntu24.04), and only those tags exist upstream; name the nodes' OS with --node-os "
                  "(for example --node-os ubuntu24.04, once per OS the GPU nodes run)", markup=False, highlight=False)
        return EXIT_USAGE
    for line in plain_list(found):
        console.print(line, markup=False, highlight=False, soft_wrap=True)
    for gone in missing:
        err.print(f"error: {gone.cluster} {gone.release['name']} was not rendered ({gone.reason}): the images of its "
                  "chart are not in the list; give its package with --charts DIR", markup=False, highlight=False)
    for image in found.unpinned:
        err.print(f"warning: {image.source} is mirrored by tag, not by digest: add its digest to {DIGESTS_FILE}",
                  markup=False, highlight=False)
    for reference in found.outside:
        err.print(f"error: {reference} is not under the registry {site.registry.images if site.registry else ''}; "
                  "`fabctl check` says which object names it", markup=False, highlight=False)
    if args.out:
        for path in write_mirror(found, Path(args.out)):
            console.print(f"wrote {path}", markup=False, highlight=False)
    console.print(
        f"mirror {args.stack}: {len(found.charts)} charts, {len(found.images)} images ({len(found.unpinned)} by tag only), "
        f"{len(found.files)} files, {len(found.maven)} Maven packages; {len(found.outside)} images outside the registry, "
        f"{len(missing)} releases not rendered", markup=False, highlight=False,
    )
    return EXIT_CHECK if found.outside or missing else 0


def add_parser(sub: Any, project_dir: Path) -> None:
    mirror = sub.add_parser("mirror", help="everything the site's registry must hold, and the mirroring tools' inputs")
    mirror.add_argument("--stack", required=True, help="stack name, e.g. site-a")
    mirror.add_argument("--project-dir", default=str(project_dir), help="checkout holding __main__.py and the stack files")
    mirror.add_argument("--set", action="append", metavar="PATH=VALUE",
                        help="change the stack's config first, e.g. site.registry.images=registry.fab.internal/mirror")
    mirror.add_argument("--node-os", action="append", metavar="OS", help="an OS the GPU nodes run, as the NVIDIA operators "
                        "tag their drivers (ubuntu24.04, ubuntu22.04, rhel9.6); once per OS")
    mirror.add_argument("--node-arch", default="amd64", metavar="ARCH", help="the GPU nodes' architecture in the DOCA "
                        "driver's tag (default amd64)")
    mirror.add_argument("--digests", metavar="FILE", help=f"source image -> sha256 digest (YAML); default {DIGESTS_FILE} if present")
    mirror.add_argument("--out", metavar="DIR", help="write mirror.txt, mirror.json, skopeo-sync.yaml, copy-images.sh, charts.sh, "
                        "files.sh and maven.txt there")
    chart_options(mirror, strict=False)  # mirror is always strict: exit 6 when a release is not rendered
    mirror.set_defaults(func=cmd_mirror)
