"""Image values of the charts of the storage part of the platform (components/airgap)."""

from __future__ import annotations

from typing import Any

VALUES: dict[str, Any] = {
    "cloudnative-pg": lambda registry: {},  # PLACEHOLDER
    "polaris": lambda registry: {},  # PLACEHOLDER
    "aistor-operator": lambda registry: {},  # PLACEHOLDER
    "aistor-objectstore": lambda registry: {},  # PLACEHOLDER
}
