"""Every pinned Helm chart, API version and Kubernetes target of the platform, in one table (DESIGN section 4).

Components import from here; no chart version or API version is written anywhere else. Bumping a
version is a one-line change in this file, reviewed in the pull-request preview.
"""

from __future__ import annotations

from dataclasses import dataclass

KUBERNETES_VERSION = "1.34"
"""The Kubernetes minor version the manifests are written and validated for."""


@dataclass(frozen=True)
class HelmChart:
    """A Helm chart pinned to an exact version in a named repository."""

    chart: str
    version: str
    repo: str


CILIUM = HelmChart(chart="cilium", version="1.18.3", repo="https://helm.cilium.io/")

# Custom resource API versions. Only the current, non-deprecated versions are used.
CILIUM_API = "cilium.io/v2"
