"""Process-level settings of the program (DESIGN section 3, `__main__.py`), made in one place.

`benchmarks/floor.py` makes the same call at the same point (after its imports, before its first
registration), so that the SDK floor the render is measured against runs under the same settings.
"""

from __future__ import annotations

import gc

YOUNG_COLLECTION_THRESHOLD = 50_000
"""Allocations (less deallocations) between two collections of the youngest generation; Python's default is 700.

Nearly everything a Pulumi program allocates lives until it ends (the resources, their Outputs, the registrations in
flight), so a young collection almost never frees anything, and every tenth one is followed by an older one that walks
everything built so far again. Measured on site-a (docs/performance.md): with the default the collector took about a
quarter of the render's CPU time; with this threshold it takes a few per cent, for a few MiB more at the peak.
"""


def settle_after_imports() -> None:
    """Called once by a program after its imports and before it registers anything.

    The imports leave tens of thousands of long-lived objects (pydantic's models, the SDKs' core modules;
    the Kubernetes API modules load later, with their first kind); freezing moves them out of the
    collector's sight so that building the stack does not rescan them each time its allocations trigger
    a collection. They live as long as the process anyway.
    The youngest generation is then collected less often (YOUNG_COLLECTION_THRESHOLD); the older
    generations keep Python's thresholds.
    """
    gc.freeze()
    gc.set_threshold(YOUNG_COLLECTION_THRESHOLD)
