"""Value types and constants shared by every part of the site schema (DESIGN section 4, "Config first").

A field type refuses a bad value with what is allowed: DNS labels and names, Kubernetes label keys and values
(Kubernetes' own rules), ports, ASNs, IPv4 ranges written with their mask, host addresses that can be a host's,
and lists without duplicates.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable
from ipaddress import IPv4Address, IPv4Network
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field

PROJECT = "fab-platform"
CONFIG_KEY = "site"
"""The stack config key, `fab-platform:site`, that holds the whole site object."""

Role = Literal["storage", "compute", "gpu", "gpu-train"]
GPU_ROLES: frozenset[str] = frozenset({"gpu", "gpu-train"})
WORLD = "world"
"""A flow source meaning "outside every cluster of the site" (users, instruments, vendors)."""

RFC1918 = tuple(ipaddress.ip_network(n) for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"))
CILIUM_CLUSTER_NAME_MAX = 32
"""Cilium refuses cluster names longer than this (ClusterMesh identity and etcd key limits)."""
CILIUM_POD_MASK = 24
"""The prefix length of each node's share of a pod range: Cilium's cluster-pool `clusterPoolIPv4MaskSize`, which the
program leaves at the chart's default."""

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
DNS_LABEL_MAX = 63
DNS_NAME_MAX = 253
_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
"""The name part of a label key, and a label value when not empty (apimachinery's qualifiedNameFmt)."""


def _text(value: Any) -> Any:
    """Addresses and ranges must be written as text: YAML `1` or `true` is not a network."""
    if not isinstance(value, str):
        raise ValueError(f"must be written as a string such as '10.0.0.0/16' or '10.0.0.1', not a {type(value).__name__}")
    return value


def matching(pattern: re.Pattern[str], message: str, max_length: int | None = None) -> Callable[[str], str]:
    """A validator of a text field: the whole value matches `pattern` (and has at most `max_length` characters), else `message`."""
    def validate(value: str) -> str:
        if (max_length is not None and len(value) > max_length) or not pattern.fullmatch(value):
            raise ValueError(message)
        return value

    return validate


_dns_label = matching(
    _DNS_LABEL, "must be a DNS label: lowercase letters, digits and '-', starting and ending with a letter or digit, at most 63 characters", 63,
)


def _dns_name(value: str) -> str:
    """A lowercase DNS name: at most 253 characters, each of its labels at most 63 (RFC 1035)."""
    if not _DNS_NAME.fullmatch(value):
        raise ValueError("must be a lowercase DNS name such as site-a.fab.internal")
    if len(value) > DNS_NAME_MAX:
        raise ValueError(f"has {len(value)} characters; a DNS name has at most {DNS_NAME_MAX}")
    label = max(value.split("."), key=len)
    if len(label) > DNS_LABEL_MAX:
        raise ValueError(f"has a label of {len(label)} characters ({label[:20]!r}...); each label of a DNS name has at most "
                         f"{DNS_LABEL_MAX}: shorten it")
    return value


def label_key_problem(key: str) -> str | None:
    """Why `key` is not a Kubernetes label key (apimachinery's IsQualifiedName), or None: an optional DNS subdomain
    prefix of at most 253 characters and `/`, then a name of at most 63 alphanumerics, '-', '_' and '.', starting and
    ending with an alphanumeric."""
    prefix, slash, name = key.rpartition("/")
    if slash and (not prefix or len(prefix) > 253 or not _DNS_NAME.fullmatch(prefix)):
        return f"its prefix {prefix!r} must be a lowercase DNS subdomain of at most 253 characters, such as fab.internal"
    if not name or len(name) > 63 or not _QUALIFIED_NAME.fullmatch(name):
        return (f"its name {name!r} must be 1-63 letters, digits, '-', '_' or '.', starting and ending with a letter or "
                "digit (optionally after a prefix and '/', such as fab.internal/rack)")
    return None


def _label_key(value: str) -> str:
    problem = label_key_problem(value)
    if problem:
        raise ValueError(f"is not a Kubernetes label key: {problem}")
    return value


def _label_value(value: str) -> str:
    if value and (len(value) > 63 or not _QUALIFIED_NAME.fullmatch(value)):
        raise ValueError("is not a Kubernetes label value: at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit")
    return value


def _unique(items: list[Any]) -> list[Any]:
    for i, item in enumerate(items):
        if item in items[:i]:
            raise ValueError(f"lists {str(item)!r} twice (items {items.index(item)} and {i}); remove the duplicate")
    return items


_group_name = matching(
    re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,254}"),
    "must be a Keycloak group name as its tokens carry it: letters, digits, '_', '.' and '-', starting with a letter or "
    "digit, at most 255 characters", 255,
)


DnsLabel = Annotated[str, AfterValidator(_dns_label)]
DnsName = Annotated[str, AfterValidator(_dns_name)]
LabelKey = Annotated[str, AfterValidator(_label_key)]
LabelValue = Annotated[str, AfterValidator(_label_value)]
GroupName = Annotated[str, AfterValidator(_group_name)]
"""A group of the site's Keycloak realm, by name (its tokens' `groups` claim, `full_path` off)."""
Labels = dict[LabelKey, LabelValue]
Unique = AfterValidator(_unique)
"""A list whose items are all different: `Annotated[list[X], Unique]`."""
Port = Annotated[int, Field(ge=1, le=65535, strict=True)]
Asn = Annotated[int, Field(ge=1, le=4_294_967_294, strict=True)]
SPECIAL_RANGES: tuple[tuple[IPv4Network, str], ...] = tuple(
    (ipaddress.IPv4Network(net), kind) for net, kind in (
        ("0.0.0.0/8", "the 'this network' range 0.0.0.0/8"),
        ("127.0.0.0/8", "the loopback range 127.0.0.0/8"),
        ("169.254.0.0/16", "the link-local range 169.254.0.0/16"),
        ("224.0.0.0/4", "the multicast range 224.0.0.0/4"),
        ("240.0.0.0/4", "the reserved range 240.0.0.0/4"),
    )
)
"""Ranges no host, pod or VIP of a site can use: not routed, or not to one host."""


def _cidr(value: Any) -> Any:
    value = _text(value)
    try:
        network = ipaddress.IPv4Network(value, strict=False)
    except ValueError:
        raise ValueError("must be an IPv4 range such as 10.64.0.0/16") from None
    if "/" not in value:
        raise ValueError(f"has no mask: write the range with its prefix length, such as {value}/24 (a bare address is not a range)")
    if ipaddress.IPv4Interface(value).ip != network.network_address:
        raise ValueError(f"has host bits set; the range is {network}")
    for special, kind in SPECIAL_RANGES:
        if network.overlaps(special):
            raise ValueError(f"overlaps {kind}; use a routable range such as 10.64.0.0/16")
    return value


def _address(value: Any) -> Any:
    value = _text(value)
    try:
        address = ipaddress.IPv4Address(value)
    except ValueError:
        hint = " without a mask" if "/" in value else ""
        raise ValueError(f"must be an IPv4 address{hint}, such as 10.0.0.1") from None
    if address == ipaddress.IPv4Address("255.255.255.255"):
        raise ValueError("is the limited broadcast address; give the address of one host")
    for special, kind in SPECIAL_RANGES:
        if address in special:
            raise ValueError(f"is in {kind}; give the address of one host on the site's network")
    return value


def _host(host: str) -> bool:
    """A DNS name or an IPv4 address."""
    try:
        ipaddress.IPv4Address(host)
    except ValueError:
        return bool(_DNS_NAME.fullmatch(host)) and all(len(label) <= 63 for label in host.split("."))
    return True


def _host_name(value: str) -> str:
    """A DNS name or an IPv4 address, as a client dials it."""
    if not _host(value):
        raise ValueError("must be a lowercase DNS name or an IPv4 address, such as erp-db.corp.example or 10.0.0.1 (no port, "
                         "no scheme)")
    return value


def _host_port(value: str) -> str:
    """`host` or `host:port`: no scheme, no path, no spaces."""
    if "://" in value:
        raise ValueError("must be host:port without a scheme, such as s3-admin.site-a.fab.internal:9000 (TLS is set by `ssl`)")
    host, colon, port = value.partition(":")
    if not _host(host) or "/" in value or (colon and not (port.isdigit() and 1 <= int(port) <= 65535)):
        raise ValueError("must be host:port, such as s3-admin.site-a.fab.internal:9000: a lowercase DNS name or IPv4 address, "
                         "then an optional port 1-65535")
    return value


def _https_url(value: str) -> str:
    """An https URL of a host (and an optional port and base path): no credentials, query, fragment or spaces."""
    from urllib.parse import urlsplit

    example = "such as https://keycloak.site-a.fab.internal"
    if any(c.isspace() for c in value):
        raise ValueError(f"contains a space; write the URL alone, {example}")
    try:
        url = urlsplit(value)
        port = url.port
    except ValueError:
        raise ValueError(f"is not a URL with a valid port, {example}") from None
    if url.scheme != "https":
        raise ValueError(f"must start with https:// (the provider sends an admin credential), {example}")
    if url.username is not None or url.query or url.fragment or not url.hostname or not _host(url.netloc.rsplit(":", 1)[0] if port else url.netloc):
        raise ValueError(f"must be https://host[:port][/base-path] with a lowercase host and no credentials, query or fragment, {example}")
    if url.path.endswith("/"):
        raise ValueError(f"ends with '/'; write the base URL without it, {example}")
    return value


def _relative_path(value: str) -> str:
    """A path inside a bucket: no scheme, no leading '/', no '.' or '..' segment, no spaces, and no '*' or '?', which a
    bucket policy naming the path would read as wildcards."""
    if ("://" in value or value.startswith("/") or any(c.isspace() for c in value) or {".", ".."} & set(value.split("/"))
            or {"*", "?"} & set(value)):
        raise ValueError("must be a path inside the bucket, such as meta/llama-3.3-70b-instruct/: no scheme or bucket, no "
                         "leading '/', no '.' or '..', no spaces and no '*' or '?'")
    return value


CRON_FIELDS = (
    ("minute", 0, 59, ()),
    ("hour", 0, 23, ()),
    ("day of month", 1, 31, ()),
    ("month", 1, 12, ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")),
    ("day of week", 0, 6, ("sun", "mon", "tue", "wed", "thu", "fri", "sat")),
)
"""The five fields of a CronJob schedule with their bounds and names (the standard parser Kubernetes uses,
robfig/cron's ParseStandard: day of week 0-6 from Sunday, names in any case)."""
CRON_DESCRIPTORS = ("@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly")
CRON_EXAMPLE = "five fields, minute hour day-of-month month day-of-week, such as '0 19 * * 1-5'"


def _cron_value(text: str, low: int, high: int, names: tuple[str, ...]) -> int:
    if text.lower() in names:
        return low + names.index(text.lower())
    if not text.isdigit():
        raise ValueError(f"{text!r} is not a number{' or a name (' + ', '.join(names[:3]) + ', ...)' if names else ''}")
    value = int(text)
    if not low <= value <= high:
        raise ValueError(f"{value} is outside {low}-{high}")
    return value


def _cron_field(text: str, low: int, high: int, names: tuple[str, ...]) -> None:
    """One field: a comma-separated list of `*` (or `?`), a value or a range `a-b`, each optionally with `/step`."""
    for item in text.split(","):
        spread, slash, step = item.partition("/")
        if slash and (not step.isdigit() or int(step) == 0):
            raise ValueError(f"its step {step!r} must be a positive number")
        if spread in ("*", "?"):
            continue
        first, dash, last = spread.partition("-")
        start = _cron_value(first, low, high, names)
        if dash and _cron_value(last, low, high, names) < start:
            raise ValueError(f"its range {spread!r} ends before it starts")


def _cron_schedule(value: str) -> str:
    """A CronJob schedule as Kubernetes accepts it, without a time zone of its own (that is `timezone`'s)."""
    if value.strip() in CRON_DESCRIPTORS:
        return value
    if value.upper().startswith(("TZ=", "CRON_TZ=")):
        raise ValueError("names its own time zone; give it in `timezone` (Kubernetes refuses TZ= in a schedule that has timeZone)")
    fields = value.split()
    if len(fields) != len(CRON_FIELDS):
        raise ValueError(f"has {len(fields)} fields; a cron schedule has {CRON_EXAMPLE}, or is one of {', '.join(CRON_DESCRIPTORS)}")
    for text, (name, low, high, names) in zip(fields, CRON_FIELDS, strict=True):
        try:
            _cron_field(text, low, high, names)
        except ValueError as problem:
            raise ValueError(f"is not a cron schedule: its {name} field {text!r}: {problem}; write {CRON_EXAMPLE}") from None
    return value


def _time_zone(value: str) -> str:
    """An IANA time zone the API server knows (a CronJob's `timeZone`): `Area/Location` or `UTC`, never `Local`."""
    import zoneinfo

    example = "an IANA time zone such as Europe/Berlin or UTC"
    if value == "Local" or not re.fullmatch(r"[A-Za-z][A-Za-z0-9_+-]*(/[A-Za-z0-9_+-]+)*", value):
        raise ValueError(f"must be {example}")
    try:
        zoneinfo.ZoneInfo(value)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"is not a time zone of the IANA database; use {example}") from None
    return value


CronSchedule = Annotated[str, AfterValidator(_cron_schedule)]
TimeZone = Annotated[str, AfterValidator(_time_zone)]
HostPort = Annotated[str, AfterValidator(_host_port)]
Host = Annotated[str, AfterValidator(_host_name)]
HttpsUrl = Annotated[str, AfterValidator(_https_url)]
RelativePath = Annotated[str, AfterValidator(_relative_path)]
Cidr = Annotated[IPv4Network, BeforeValidator(_cidr)]
Address = Annotated[IPv4Address, BeforeValidator(_address)]
"""The address of one host: never unspecified, loopback, link-local, multicast, reserved or broadcast."""
Flag = Annotated[bool, Field(strict=True)]
NodeName = Annotated[str, AfterValidator(_dns_name)]
ModelName = DnsLabel

MAX_GPUS = 10_000
"""Most GPUs a quota or limit may name: above any site's fleet, so a larger number is a typo."""
MAX_CORES = 1_000_000
"""Most CPU cores a queue or quota may name: above any site, so a larger number is a typo."""
MAX_MEMORY_GIB = 10_000_000
"""Most memory in GiB a queue or quota may name (about 9.5 PiB): a larger number is a typo or MiB written as GiB."""


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)
