"""Image values of the charts of the gpu part of the platform (components/airgap)."""

from __future__ import annotations

from typing import Any

VALUES: dict[str, Any] = {
    "gpu-operator": lambda registry: {},  # PLACEHOLDER
    "network-operator": lambda registry: {},  # PLACEHOLDER
    "kueue": lambda registry: {},  # PLACEHOLDER
    "kubeflow-trainer": lambda registry: {},  # PLACEHOLDER
    "kuberay-operator": lambda registry: {},  # PLACEHOLDER
}
