"""Property-based tests of SiteConfig: any mutation of a real stack is accepted or fails cleanly."""

from __future__ import annotations

import copy
import ipaddress
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from components.config import ConfigError, parse_site
from helpers import site_raw
from small_site import small_site

SITES = {stack: site_raw(stack) for stack in ("site-a", "site-b")}

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**40), 2**40) | st.text(max_size=20) | st.floats(allow_nan=False),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=8), children, max_size=3),
    max_leaves=6,
)


def _paths(node: Any, prefix: tuple = ()) -> list[tuple]:
    out = [prefix] if prefix else []
    if isinstance(node, dict):
        for key, value in node.items():
            out += _paths(value, (*prefix, key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            out += _paths(value, (*prefix, i))
    return out


@st.composite
def mutated_sites(draw) -> dict[str, Any]:
    raw = copy.deepcopy(SITES[draw(st.sampled_from(sorted(SITES)))])
    for _ in range(draw(st.integers(1, 3))):
        paths = _paths(raw)
        path = draw(st.sampled_from(paths))
        parent = raw
        for part in path[:-1]:
            parent = parent[part]
        action = draw(st.sampled_from(["replace", "delete", "add-key"]))
        if action == "replace":
            parent[path[-1]] = draw(json_values)
        elif action == "delete":
            del parent[path[-1]]
        elif isinstance(parent, dict):
            parent[draw(st.text(min_size=1, max_size=10))] = draw(json_values)
    return raw


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated_sites())
def test_any_mutation_renders_or_fails_with_key_path_lines(raw):
    try:
        assert parse_site(raw).name == raw["name"]
    except ConfigError as exc:
        assert exc.lines
        for line in exc.lines:
            assert line.startswith("fab-platform:site")
            assert "\n" not in line
            assert "Traceback" not in line


private_nets = st.builds(
    lambda addr, prefix: ipaddress.ip_network((addr, prefix), strict=False),
    st.integers(int(ipaddress.ip_address("172.16.0.0")), int(ipaddress.ip_address("172.31.255.255"))),
    st.integers(12, 16),  # a /24 per node of the small site's /24 node ranges
)


@settings(max_examples=200, deadline=None)
@given(private_nets, private_nets)
def test_two_pod_ranges_are_rejected_exactly_when_they_overlap(compute_net, gpu_net):
    raw = small_site()
    raw["clusters"]["compute"]["pod_cidr"] = str(compute_net)
    raw["clusters"]["gpu"]["pod_cidr"] = str(gpu_net)
    if compute_net.overlaps(gpu_net):
        try:
            parse_site(raw)
        except ConfigError as exc:
            assert any("pod_cidr" in line and "overlaps" in line for line in exc.lines)
        else:
            raise AssertionError(f"{compute_net} and {gpu_net} overlap but the site was accepted")
    else:
        parse_site(raw)


@settings(max_examples=100, deadline=None)
@given(st.integers(-5, 300))
def test_cluster_ids_are_accepted_exactly_from_1_to_255(cluster_id):
    raw = small_site()
    raw["clusters"]["gpu"]["cluster_id"] = cluster_id
    accepted = 1 <= cluster_id <= 255 and cluster_id not in (1, 2)  # 1 and 2 belong to storage and compute
    try:
        parse_site(raw)
    except ConfigError:
        assert not accepted
    else:
        assert accepted


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=12), st.dictionaries(st.text(max_size=8), st.dictionaries(st.text(max_size=8), json_values, max_size=2), max_size=2))
def test_any_profile_choice_renders_or_fails_cleanly(active, profiles):
    raw = copy.deepcopy(SITES["site-a"])
    raw["active_profile"] = active
    raw["profiles"].update(profiles)
    try:
        parse_site(raw)
    except ConfigError as exc:
        assert all(line.startswith("fab-platform:site") and "\n" not in line for line in exc.lines)
