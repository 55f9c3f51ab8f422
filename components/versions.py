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

CLOUDNATIVE_PG = HelmChart(chart="cloudnative-pg", version="0.29.0", repo="https://cloudnative-pg.github.io/charts")
"""The CloudNativePG operator chart; 0.29.0 ships operator 1.30.0."""
POLARIS = HelmChart(chart="polaris", version="1.7.0", repo="https://downloads.apache.org/polaris/helm-chart")
AISTOR_OPERATOR = HelmChart(chart="aistor-operator", version="5.10.0", repo="https://helm.min.io/")
AISTOR_OBJECTSTORE = HelmChart(chart="aistor-objectstore", version="1.0.16", repo="https://helm.min.io/")

# Container images the program runs itself (charts pin their own).
POLARIS_ADMIN_TOOL_IMAGE = "apache/polaris-admin-tool:1.7.0"
POLARIS_SERVER_IMAGE = "apache/polaris:1.7.0"
SETUP_IMAGE = "python:3.13.9-slim-bookworm"
"""Runs the idempotent Polaris setup script (standard library only)."""

CNPG_API = "postgresql.cnpg.io/v1"
