"""Image values of the charts of the observability part of the platform (components/airgap)."""

from __future__ import annotations

from typing import Any

VALUES: dict[str, Any] = {
    "kube-prometheus-stack": lambda registry: {},  # PLACEHOLDER
    "gateway-helm": lambda registry: {},  # PLACEHOLDER
}
