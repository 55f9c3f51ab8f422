"""Where a chart's or custom resource's pods get their node selector, tolerations and PriorityClass (DESIGN section 2,
compute row): the value paths each engine declares with its charts and kinds (components/engines) and the policy pack
reads (policies/rules/compute.py, fab-compute-pool-placement).

A ground-floor module: it imports nothing from the project, so the engines and the pack both import it without pulling
each other in.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Pods:
    """Where one group of a chart's or custom resource's pods gets its node selector, tolerations and PriorityClass.

    Each is a list of value paths in the order the chart reads them: the first one set decides (Helm's `or`). No
    priority paths where the chart or CRD has none.
    """

    group: str
    node_selector: tuple[str, ...]
    tolerations: tuple[str, ...]
    priority: tuple[str, ...] = ()
    only_with: str | None = None
    """A path that must be set for these pods to exist (a StarRocksCluster's component), if any."""


def same(group: str, prefix: str = "") -> Pods:
    return Pods(group, (f"{prefix}nodeSelector",), (f"{prefix}tolerations",), (f"{prefix}priorityClassName",))
