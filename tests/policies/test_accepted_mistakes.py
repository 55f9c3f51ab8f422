"""What the config model lets through, the program must deploy safely: a realistic mistake the model accepts renders
and passes every mandatory policy (issue 16). The mistakes are those of tests/mistakes.py."""

from __future__ import annotations

from helpers import render_config
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from mistakes import CLASSES, outcome

from fabctl.policy import analyze_in_process
from fabctl.stackfile import SITE_KEY


# Each example renders the site (a few seconds): a handful per run, different ones each run, is what this affords.
@settings(max_examples=6, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.sampled_from(sorted(CLASSES)).flatmap(lambda name: CLASSES[name]))
def test_a_mistake_the_model_accepts_renders_and_passes_the_mandatory_policies(mistake):
    site, lines = outcome(mistake)
    assume(lines is None)
    plan = render_config("site-t", {SITE_KEY: site})
    assert [(v.policy, v.message) for v in analyze_in_process(plan) if v.mandatory] == []
