"""An operator's realistic mistakes in a stack file, class by class (issue 16), as hypothesis strategies.

Each strategy makes one mistake of its class in the full small site (every optional part once: small_site.py), the
way a careful operator makes them: an address of another host, the edge of a range, a range without its mask, a
flow port that drifted, a name one character too long, a list entry written twice, a boolean for a number, a label
key with a space, a URL where a host is expected. The model either accepts the site or refuses it with exactly one
line naming a key path; never a traceback, never a second line for one mistake
(tests/components/test_config_mistakes.py). What it accepts renders and passes the policies
(tests/policies/test_accepted_mistakes.py).
"""

from __future__ import annotations

import copy
import ipaddress
import string
from collections.abc import Callable
from typing import Any

from hypothesis import strategies as st

from components.config import ConfigError, parse_site
from small_site import full_site

BASE = full_site()
Mistake = Callable[[dict[str, Any]], None]


def _get(node: Any, path: tuple) -> Any:
    for part in path:
        node = node[part]
    return node


def _set(path: tuple, value: Any) -> Mistake:
    def apply(site: dict[str, Any]) -> None:
        node = site
        for part in path[:-1]:
            node = node.setdefault(part, {}) if isinstance(node, dict) else node[part]
        node[path[-1]] = value
    return apply


def _leaves(node: Any, prefix: tuple = ()) -> list[tuple[tuple, Any]]:
    if isinstance(node, dict):
        return [leaf for key, value in node.items() for leaf in _leaves(value, (*prefix, key))]
    if isinstance(node, list):
        return [leaf for i, value in enumerate(node) for leaf in _leaves(value, (*prefix, i))]
    return [(prefix, node)]


def _is_address(value: Any) -> bool:
    try:
        ipaddress.IPv4Address(value)
    except ValueError:
        return False
    return isinstance(value, str)


def _is_range(value: Any) -> bool:
    return isinstance(value, str) and "/" in value and _is_address(value.split("/")[0])


LEAVES = _leaves(BASE)
ADDRESS_PATHS = sorted(path for path, value in LEAVES if _is_address(value))
RANGE_PATHS = sorted(path for path, value in LEAVES if _is_range(value))
ADDRESSES = sorted({value for _, value in LEAVES if _is_address(value)})
RANGES = [ipaddress.IPv4Network(value) for _, value in LEAVES if _is_range(value)]
NUMBER_PATHS = sorted(path for path, value in LEAVES if isinstance(value, int | float) and not isinstance(value, bool))
LIST_PATHS = sorted({path[:-1] for path, _ in LEAVES if path and isinstance(path[-1], int)})
SPECIAL = ["0.0.0.0", "127.0.0.1", "169.254.10.1", "224.0.0.5", "240.0.0.1", "255.255.255.255"]


@st.composite
def address_mistakes(draw) -> Mistake:
    """Another host's address, a range's edge or inside, a special address, or a mask where none belongs."""
    net = draw(st.sampled_from(RANGES))
    value = draw(st.one_of(
        st.sampled_from(ADDRESSES),
        st.sampled_from([str(net.network_address), str(net.broadcast_address), str(net[min(1, net.num_addresses - 1)])]),
        st.sampled_from(SPECIAL),
        st.sampled_from([f"{a}/32" for a in ADDRESSES] + [f"{a}/24" for a in ADDRESSES]),
        st.integers(0, 2**32 - 1).map(lambda n: str(ipaddress.IPv4Address(n))),
    ))
    return _set(draw(st.sampled_from(ADDRESS_PATHS)), value)


@st.composite
def range_mistakes(draw) -> Mistake:
    """A range without its mask, with host bits, of another size, another range of the site, or special space."""
    net = draw(st.sampled_from(RANGES))
    prefix = draw(st.integers(8, 32))
    value = draw(st.one_of(
        st.just(str(net.network_address)),
        st.just(f"{net.network_address + 1}/{net.prefixlen}"),
        st.just(str(ipaddress.IPv4Network((int(net.network_address), prefix), strict=False))),
        st.sampled_from([str(r) for r in RANGES]),
        st.sampled_from(["0.0.0.0/8", "127.0.0.0/16", "169.254.0.0/24", "224.0.0.0/24", "240.0.0.0/8", "10.0.0.0/8"]),
    ))
    return _set(draw(st.sampled_from(RANGE_PATHS)), value)


FLOW_KEYS = {
    "port": st.sampled_from([443, 6443, 8181, 8182, 9000, 9001, 10443]),
    "target_port": st.sampled_from([443, 8181, 9000, 9443, 10443]),
    "to_namespace": st.sampled_from(["aistor", "polaris", "envoy-gateway-system", "minio", "kueue-system"]),
    "protocol": st.sampled_from(["TCP", "UDP"]),
    "target": st.sampled_from(["pods", "kube-apiserver"]),
    "to": st.lists(st.sampled_from(sorted(BASE["clusters"])), min_size=1, max_size=2, unique=True),
    "from": st.lists(st.sampled_from([*sorted(BASE["clusters"]), "world"]), min_size=1, max_size=4, unique=True),
}


@st.composite
def flow_mistakes(draw) -> Mistake:
    """A flow of the design's table whose port, namespace, protocol, kind or clusters drifted."""
    key = draw(st.sampled_from(sorted(FLOW_KEYS)))
    return _set(("flows", draw(st.sampled_from(sorted(BASE["flows"]))), key), draw(FLOW_KEYS[key]))


def _renamed(section: tuple, old: str, new: str) -> Mistake:
    def apply(site: dict[str, Any]) -> None:
        mapping = _get(site, section)
        mapping[new] = mapping.pop(old)
    return apply


@st.composite
def name_mistakes(draw) -> Mistake:
    """A site, team, model, bucket or peer site name too long or not a name at all."""
    name = draw(st.one_of(
        st.integers(1, 80).map(lambda n: ("a" * n)),
        st.text(string.ascii_lowercase + string.digits + "-", min_size=1, max_size=70),
        st.text(string.printable, max_size=12),
    ))
    where = draw(st.sampled_from(["site", "team", "model", "bucket", "domain"]))
    if where == "site":
        return _set(("name",), name)
    if where == "domain":
        return _set(("domain",), f"{name}.fab.internal")
    section = {"team": ("teams",), "model": ("inference", "models"), "bucket": ("storage", "buckets")}[where]
    return _renamed(section, draw(st.sampled_from(sorted(_get(BASE, section)))), name)


@st.composite
def duplicate_mistakes(draw) -> Mistake:
    """An entry of a list written twice."""
    path = draw(st.sampled_from(LIST_PATHS))

    def apply(site: dict[str, Any]) -> None:
        items = _get(site, path)
        items.append(items[draw(st.integers(0, len(items) - 1))])
    return apply


@st.composite
def number_mistakes(draw) -> Mistake:
    """A boolean, a string, a negative, zero or a huge number where a number is expected."""
    value = draw(st.one_of(st.booleans(), st.sampled_from([0, -1, 10**9, 2**63, 0.5, "8"])))
    return _set(draw(st.sampled_from(NUMBER_PATHS)), value)


label_text = st.text(string.ascii_letters + string.digits + "-_./ ", max_size=70)


@st.composite
def syntax_mistakes(draw) -> Mistake:
    """A label key or value that Kubernetes would refuse, where the config passes it through."""
    text = draw(label_text)
    return draw(st.sampled_from([
        _set(("training", "topology_levels"), ["fab.internal/block", text]),
        _set(("storage", "object_store", "pod_labels"), {text or "x": "aistor"}),
        _set(("storage", "object_store", "pod_labels"), {"app": text}),
        _set(("flows", "inference", "to_labels"), {text or "x": "envoy"}),
        _set(("gpu_types",), {"b200": {"memory_mib": 183359, "product": text or "x"}}),
    ]))


@st.composite
def role_mistakes(draw) -> Mistake:
    """A MultiKueue manager or worker that is not where the design puts it, gold replicated without gold."""
    clusters = sorted(BASE["clusters"])
    return draw(st.sampled_from([
        _set(("training", "multikueue", "manager"), draw(st.sampled_from([*clusters, "compute-2"]))),
        _set(("training", "multikueue", "workers", draw(st.integers(0, 1))), draw(st.sampled_from(clusters))),
        _set(("federation",), {"consumers": {"site-x": {"replicate_gold": draw(st.booleans())}},
                               "ranges": {"site-x": ["10.200.0.0/16"]}}),
    ]))


@st.composite
def endpoint_text(draw) -> str:
    scheme = draw(st.sampled_from(["", "http://", "https://", "s3://", "https:/"]))
    host = draw(st.sampled_from(["keycloak.site-t.fab.internal", "Keycloak.site-t.fab.internal", "key cloak", "10.30.1.50",
                                 "", "user:pw@host.fab.internal", "host_1.fab.internal"]))
    port = draw(st.sampled_from(["", ":443", ":0", ":99999", ":abc", ":"]))
    path = draw(st.sampled_from(["", "/", "/auth", "/auth/", "?realm=fab", "#x", " "]))
    return scheme + host + port + path


@st.composite
def endpoint_mistakes(draw) -> Mistake:
    """A URL where a host is expected, a host where a URL is, spaces, bad ports."""
    text = draw(endpoint_text())
    return draw(st.sampled_from([
        _set(("minio", "server"), text),
        _set(("keycloak", "url"), text),
        _set(("inference", "models", "qwen3-8b", "source"), text),
    ]))


CLASSES = {
    "addresses": address_mistakes(),
    "ranges": range_mistakes(),
    "flows": flow_mistakes(),
    "names": name_mistakes(),
    "duplicates": duplicate_mistakes(),
    "numbers": number_mistakes(),
    "syntax": syntax_mistakes(),
    "roles": role_mistakes(),
    "endpoints": endpoint_mistakes(),
}


def outcome(mistake: Mistake) -> tuple[dict[str, Any], list[str] | None]:
    """The mistaken site, and its error lines (None when the model accepts it)."""
    site = copy.deepcopy(BASE)
    mistake(site)
    try:
        parse_site(site)
    except ConfigError as exc:
        return site, exc.lines
    return site, None
