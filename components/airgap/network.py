"""Image values of the charts of the network part of the platform (components/airgap)."""

from __future__ import annotations

from typing import Any

VALUES: dict[str, Any] = {
    "cilium": lambda registry: {},  # PLACEHOLDER
}
