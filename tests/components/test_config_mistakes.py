"""Property test of the config model against an operator's realistic mistakes (tests/mistakes.py): one mistake of any
class is accepted, or refused with exactly one line naming a key path; never a traceback."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mistakes import CLASSES, outcome


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.sampled_from(sorted(CLASSES)).flatmap(lambda name: CLASSES[name].map(lambda mistake: (name, mistake))))
def test_one_mistake_is_accepted_or_refused_with_one_key_path_line(case):
    kind, mistake = case
    _, lines = outcome(mistake)
    if lines is None:
        return
    assert all(line.startswith("fab-platform:site") and "\n" not in line and "Traceback" not in line for line in lines), lines
    if kind == "names":  # a renamed key also leaves each reference to it dangling: one line per reference
        paths = [line.split(": ", 1)[0] for line in lines]
        assert len(set(paths)) == len(paths), lines
    else:
        assert len(lines) == 1, lines
