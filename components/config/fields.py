"""Value types and constants shared by every part of the site schema (DESIGN section 4, "Config first").

A field type refuses a bad value with what is allowed: DNS labels and names, Kubernetes labels, ports,
ASNs, and IPv4 ranges and addresses written as text.
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

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS_NAME = re.compile(r"^(?=.{1,253}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL_KEY = re.compile(r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
_LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$")


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
_dns_name = matching(_DNS_NAME, "must be a lowercase DNS name such as site-a.fab.internal")


def _labels(value: dict[str, str]) -> dict[str, str]:
    for key, val in value.items():
        if not _LABEL_KEY.fullmatch(key):
            raise ValueError(f"label key {key!r} is not a valid Kubernetes label key")
        if not _LABEL_VALUE.fullmatch(val):
            raise ValueError(f"label value {val!r} of {key!r} is not a valid Kubernetes label value")
    return value


DnsLabel = Annotated[str, AfterValidator(_dns_label)]
DnsName = Annotated[str, AfterValidator(_dns_name)]
Labels = Annotated[dict[str, str], AfterValidator(_labels)]
Port = Annotated[int, Field(ge=1, le=65535, strict=True)]
Asn = Annotated[int, Field(ge=1, le=4_294_967_294, strict=True)]
def _cidr(value: Any) -> Any:
    value = _text(value)
    try:
        ipaddress.IPv4Network(value)
    except ValueError as exc:
        if "host bits set" in str(exc):
            raise ValueError(f"has host bits set; the range is {ipaddress.IPv4Network(value, strict=False)}") from None
        raise ValueError("must be an IPv4 range such as 10.64.0.0/16") from None
    return value


Cidr = Annotated[IPv4Network, BeforeValidator(_cidr)]
Address = Annotated[IPv4Address, BeforeValidator(_text)]
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
