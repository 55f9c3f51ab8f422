"""What the air-gap tests share (docs/airgap.md): the site registry they add to a site or a stack file, the secret
config of its pull Secret, the deploy check's rules that hold a site to it, and the views of rendered objects they
judge (a pinned chart's release rendered by a real Helm, its images, its pod specs)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from components.config import RegistryConfig
from components.registry import Registry
from components.versions import HelmChart
from fabctl.check.mirror import image_references, pod_specs
from fabctl.helm import ChartPackages, ChartRef, template
from fabctl.render import PROJECT_DIR

MIRROR = "registry.fab.internal/mirror"
"""The registry path every image is mirrored under (`registry.images`)."""
CHART_REPOSITORY = "oci://registry.fab.internal/charts"
MAVEN = "https://maven.fab.internal/repository/central"
FILES = "https://files.fab.internal"
PULL_SECRET = "site-registry"
REGISTRY = {"charts": CHART_REPOSITORY, "images": MIRROR, "maven": MAVEN, "pull_secret": PULL_SECRET}
"""The smallest site's registry (Spark Connect resolves its packages from `maven`); a test adds `files` or a CA bundle."""
SECRETS = {"fab-platform:registryPullSecret": {"secure": "v1:eyJhdXRocyI6IHt9fQ=="}}
"""The secret config holding the pull Secret's Docker config.json."""
MIRROR_RULES = ("images.mirrored", "images.pull-secret", "charts.mirrored", "downloads.mirrored")
"""The deploy check's rules (fabctl/check/mirror.py) that hold a site with a registry to it."""


def registry_config(**changes: Any) -> dict[str, Any]:
    """The config section `registry`: REGISTRY with `changes` (a change to None leaves the key out)."""
    return {key: value for key, value in {**REGISTRY, **changes}.items() if value is not None}


def with_registry(site: dict[str, Any], **changes: Any) -> dict[str, Any]:
    """`site` (a raw site object, changed in place) with the registry of `registry_config(**changes)`."""
    site["registry"] = registry_config(**changes)
    return site


def site_registry(**changes: Any) -> Registry:
    """The program's Registry of `registry_config(**changes)`."""
    return Registry.of(RegistryConfig(**registry_config(**changes)))


def pinned_release(name: str, pinned: HelmChart, namespace: str, values: dict[str, Any],
                   postrender: str | None = None) -> dict[str, Any]:
    """A release of the pinned chart as the plan holds it, with `values`."""
    return {"name": name, "inputs": {
        "name": name, "chart": pinned.chart, "version": pinned.version, "namespace": namespace,
        "repositoryOpts": {"repo": pinned.repo}, "values": values, **({"postrender": postrender} if postrender else {}),
    }}


def rendered(release: dict[str, Any], chart_dir: Path, helm: Path) -> list[dict[str, Any]]:
    """The objects the release installs, from the pinned package (CRDs left out: their text is documentation)."""
    package = ChartPackages(chart_dir).find(ChartRef.of(release))
    assert package is not None, f"no package of {ChartRef.of(release)}"
    return [o for o in template(release, package, helm, PROJECT_DIR) if o["kind"] != "CustomResourceDefinition"]


def images(objects: list[dict[str, Any]]) -> set[str]:
    """Every image the objects name outside their metadata (none of a CRD's)."""
    return {ref for obj in objects if obj["kind"] != "CustomResourceDefinition"
            for _, ref in image_references({k: v for k, v in obj.items() if k not in ("metadata", "apiVersion", "kind")})}


def not_mirrored(references: Iterable[str]) -> list[str]:
    """The references that are not under the mirror, sorted."""
    return sorted(ref for ref in references if not ref.startswith(f"{MIRROR}/"))


def pods(objects: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """`Kind/name` -> pod spec of every pod template of the objects."""
    return {f"{o['kind']}/{o['metadata']['name']}": spec for o in objects for _, spec in pod_specs(o.get("spec") or {})}
