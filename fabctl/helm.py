"""What each Helm release of a plan installs: `helm template` with the release's values, namespace and post-renderer.

A `kubernetes:helm.sh/v3:Release` is opaque to the render: Pulumi hands its values to Helm on the
cluster. To see (and validate) the objects a release really creates, its chart package is rendered
with a real Helm exactly as `helm install` would: same release name, namespace, values (the chart's
values.schema.json included), CRDs, hooks, and the release's post-renderer applied to the output.
Chart packages come from a local folder laid out as `../shared/charts` (an `index.json` listing
name, version, file and source repository of each package).
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from components.versions import KUBERNETES_VERSION
from fabctl.render import HELM_RELEASE_TYPE, Plan

KUBE_VERSION = f"{KUBERNETES_VERSION}.0"


class HelmError(Exception):
    """A release that Helm refuses to render (bad values, schema violation, template error)."""


@dataclass(frozen=True)
class ChartRef:
    """A chart as a release names it: chart name, exact version, repository (`oci://...` included)."""

    name: str
    version: str
    repo: str

    @classmethod
    def of(cls, release: dict[str, Any]) -> ChartRef:
        inputs = release["inputs"]
        chart = str(inputs["chart"])
        if chart.startswith("oci://"):
            repo, name = chart.rsplit("/", 1)
        else:
            repo, name = (inputs.get("repositoryOpts") or {}).get("repo", ""), chart
        return cls(name=name, version=str(inputs["version"]), repo=repo)

    def __str__(self) -> str:
        return f"{self.name} {self.version} ({self.repo})"


class ChartPackages:
    """A folder of chart packages with an `index.json` (the layout of `../shared/charts`)."""

    def __init__(self, folder: Path):
        self.folder = folder
        index = json.loads((folder / "index.json").read_text())
        self._files = {(c["name"], c["version"]): c for c in index["charts"]}

    def find(self, chart: ChartRef) -> Path | None:
        """The package of exactly this chart and version from the same repository, if the folder has it."""
        entry = self._files.get((chart.name, chart.version))
        if entry is None or entry["repository"].rstrip("/") != chart.repo.rstrip("/"):
            return None
        return self.folder / entry["file"]


@dataclass
class RenderedRelease:
    """The objects one release installs (CRDs, templates and hooks) in Helm's output order, or why Helm refused it."""

    release: dict[str, Any]
    cluster: str
    chart: ChartRef
    objects: list[dict[str, Any]]
    error: str | None = None


def releases(plan: Plan) -> list[dict[str, Any]]:
    return plan.of_type(HELM_RELEASE_TYPE)


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


def template(release: dict[str, Any], package: Path, helm: Path, project_dir: Path) -> list[dict[str, Any]]:
    """`helm template` of one release, post-rendered as the release says; raises HelmError with Helm's message."""
    inputs = release["inputs"]
    with tempfile.TemporaryDirectory(prefix="fab-helm-") as tmp:
        values = Path(tmp) / "values.json"
        values.write_text(json.dumps(_values(ChartRef.of(release), inputs.get("values") or {})))
        command = [
            str(helm), "template", str(inputs.get("name") or release["name"]), str(package),
            "--namespace", str(inputs.get("namespace") or "default"),
            "--kube-version", KUBE_VERSION, "--include-crds", "--skip-tests", "--values", str(values),
        ]
        done = subprocess.run(command, capture_output=True, text=True, env={**os.environ, "HELM_CACHE_HOME": tmp}, check=False)
        if done.returncode != 0:
            raise HelmError(done.stderr.strip() or f"helm exited {done.returncode}")
        manifest = done.stdout
    postrender = inputs.get("postrender")
    if postrender:
        # Helm 3 (which Pulumi embeds) runs the post-renderer as a program from the working directory.
        script = project_dir / str(postrender)
        done = subprocess.run([sys.executable, str(script)], input=manifest, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise HelmError(f"post-renderer {postrender} failed: {done.stderr.strip()}")
        manifest = done.stdout
    return [doc for doc in yaml.safe_load_all(manifest) if isinstance(doc, dict) and doc.get("kind")]


def render_releases(plan: Plan, packages: ChartPackages, helm: Path, project_dir: Path) -> tuple[list[RenderedRelease], list[ChartRef]]:
    """Every release of the plan rendered (or Helm's refusal), and the charts the folder lacks (never skipped silently)."""
    found = [(release, ChartRef.of(release)) for release in releases(plan)]
    missing = [chart for _, chart in found if packages.find(chart) is None]

    def one(release: dict[str, Any], chart: ChartRef) -> RenderedRelease:
        try:
            objects, error = template(release, packages.find(chart), helm, project_dir), None
        except HelmError as exc:
            objects, error = [], str(exc)
        return RenderedRelease(release, plan.cluster(release) or "", chart, objects, error)

    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        done = list(pool.map(lambda pair: one(*pair), [(r, c) for r, c in found if c not in missing]))
    return done, missing
