"""Image values of the charts of the compute part of the platform (components/airgap)."""

from __future__ import annotations

from typing import Any

VALUES: dict[str, Any] = {
    "spark-operator": lambda registry: {},  # PLACEHOLDER
    "yunikorn": lambda registry: {},  # PLACEHOLDER
    "airflow": lambda registry: {},  # PLACEHOLDER
    "trino": lambda registry: {},  # PLACEHOLDER
    "operator": lambda registry: {},  # PLACEHOLDER
    "superset": lambda registry: {},  # PLACEHOLDER
    "jupyterhub": lambda registry: {},  # PLACEHOLDER
    "argo-cd": lambda registry: {},  # PLACEHOLDER
}
