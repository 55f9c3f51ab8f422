"""YAML text the program writes into objects (ConfigMap files, Helm values strings, Job templates), in one way.

PyYAML's pure-Python emitter costs about 30 ms for a Job template; the render writes dozens of them. The
libyaml emitter (`CSafeDumper`, built into PyYAML's wheels) costs a fraction of that. For the data the program
dumps (mappings and lists of short scalars and plain multi-line strings) it writes the same text: both stacks'
renders were compared byte for byte. The two emitters differ on a long double-quoted string (one with escaped or
control characters, or a space before a line break), which they fold at different places with the same meaning,
and on a lone top-level scalar (libyaml writes no `...` end marker). Without libyaml the pure-Python `SafeDumper`
writes the text.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import yaml

_SafeDumper: type[yaml.SafeDumper] = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


class _PlainDumper(_SafeDumper):  # type: ignore[valid-type,misc]
    """Writes repeated values out in full: a file a person reads and edits has no YAML anchors."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def dump(data: Any, *, sort_keys: bool = False, aliases: bool = True) -> str:
    """`data` as one YAML document, keys in insertion order unless `sort_keys`; `aliases=False` writes no anchors."""
    return yaml.dump(data, Dumper=_SafeDumper if aliases else _PlainDumper, sort_keys=sort_keys)


def dump_all(documents: Iterable[Any], *, sort_keys: bool = False) -> str:
    """Several YAML documents in one text, separated by `---`."""
    return yaml.dump_all(documents, Dumper=_SafeDumper, sort_keys=sort_keys)
