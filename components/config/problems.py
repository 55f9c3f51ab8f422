"""How a problem with a site is named: its key path in the stack file, and the error that carries the
cross-field problems (DESIGN section 4: a bad value fails with the key path, the value and what is allowed).
"""

from __future__ import annotations

import re

from components.config.fields import CONFIG_KEY, PROJECT

Problem = tuple[tuple[str | int, ...], str]
"""(key path, message): the message names the value and the fix."""


class SiteRuleError(ValueError):
    """Raised by the model when cross-field checks fail; carries every problem with its key path."""

    def __init__(self, problems: list[Problem]):
        super().__init__("; ".join(msg for _, msg in problems))
        self.problems = problems


_PLAIN_KEY = re.compile(r"^[A-Za-z0-9_-]+$")


def format_path(loc: tuple[str | int, ...]) -> str:
    """`clusters.gpu.lb_pools.internal.cidrs[0]`; keys that are not plain words are quoted: `to_labels['a.b/c']`."""
    out = ""
    for part in loc:
        if isinstance(part, int) or not _PLAIN_KEY.fullmatch(part):
            out += f"[{part!r}]" if isinstance(part, str) else f"[{part}]"
        else:
            out += f".{part}" if out else part
    return out


def key_location(loc: tuple[str | int, ...]) -> str:
    """Where a problem is, as the error line starts: `fab-platform:site.clusters.gpu.pod_cidr`."""
    path = format_path(loc)
    return f"{PROJECT}:{CONFIG_KEY}" + ("" if not path else path if path.startswith("[") else f".{path}")
