"""Process-level settings of the program (DESIGN section 3, `__main__.py`), made in one place.

`benchmarks/floor.py` makes the same call at the same point (after its imports, before its first
registration), so that the SDK floor the render is measured against runs under the same settings.
"""

from __future__ import annotations

import gc


def settle_after_imports() -> None:
    """Called once by a program after its imports and before it registers anything.

    The SDKs' imports leave a few hundred thousand long-lived objects (type stubs of every Kubernetes
    kind); freezing moves them out of the collector's sight so that building the stack does not rescan
    them each time its allocations trigger a collection. They live as long as the process anyway.
    """
    gc.freeze()
