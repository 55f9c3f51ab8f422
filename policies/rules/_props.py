"""Engine configuration properties wherever a plan holds them: Helm values, ConfigMaps, Secrets and custom resources.

Engines read `key=value` settings from many places: Trino catalog files (`connector.name=iceberg`), Spark's
`spark-defaults.conf` (`key value`) and `--conf key=value` arguments, a SparkApplication's `sparkConf` mapping,
Hadoop's `*-site.xml` (`<name>key</name><value>v</value>`) and StarRocks' `CREATE EXTERNAL CATALOG ... PROPERTIES
("key" = "value")`. `properties()` finds every one of them in a resource, with where it is, so that a rule reads a
property as the engine would instead of searching the text. Only dotted keys count as properties; everything else
in a text is left alone. Unknown values (see `_k8s`) stay `UNKNOWN`: a rule decides what they mean.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from rules._k8s import HELM_RELEASE, UNKNOWN, k8s_object, name_of, namespace_of, plain, provider_name

_KEY = r"[A-Za-z][\w-]*(?:\.[\w/-]+)+"
_LINE = re.compile(rf"^[ \t]*(?:export[ \t]+)?({_KEY})[ \t]*(?:[=:][ \t]*|[ \t]+)(.*?)[ \t]*$", re.MULTILINE)
_CONF_ARG = re.compile(rf"--conf[ \t=]+[\"']?({_KEY})=([^\s\"']*)")
_XML = re.compile(rf"<name>\s*({_KEY})\s*</name>\s*<value>\s*(.*?)\s*</value>", re.DOTALL)
_SQL_CATALOG = re.compile(
    r"CREATE\s+EXTERNAL\s+CATALOG\s+(?:IF\s+NOT\s+EXISTS\s+)?[`\"]?([\w-]+)[`\"]?[^;]*?PROPERTIES\s*\((.*?)\)\s*(?:;|$)", re.IGNORECASE | re.DOTALL,
)
_SQL_PROPERTY = re.compile(r"[\"']([^\"']+)[\"']\s*=\s*[\"']([^\"']*)[\"']")
_DOTTED = re.compile(rf"^{_KEY}$")


@dataclass(frozen=True)
class Prop:
    """One setting: its key, its value (text, or UNKNOWN) and the text or mapping holding it."""

    key: str
    value: Any
    source: str
    """Where in the resource: the path of the text or mapping (`values.catalogs.fab`), and for a StarRocks catalog its
    statement (`data.setup.sh, CREATE EXTERNAL CATALOG polaris`)."""
    sql_catalog: str | None = None
    """The StarRocks catalog whose PROPERTIES hold it, if any (`type` alone means nothing outside one)."""


@dataclass(frozen=True)
class Config:
    """The properties of one resource, with what the messages call it."""

    resource: Any
    what: str
    """`Helm release compute-trino`, `ConfigMap spark/spark-defaults`."""
    cluster: str
    props: list[Prop]

    def sources(self) -> dict[str, dict[str, Any]]:
        """The properties of each text or mapping, by source (the last setting of a key wins, as in a properties file)."""
        out: dict[str, dict[str, Any]] = {}
        for prop in self.props:
            out.setdefault(prop.source, {})[prop.key] = prop.value
        return out

    def where(self, source: str) -> str:
        """A source as messages name it: `Helm release compute-trino (values.catalogs.fab) on site-a-compute`."""
        return f"{self.what} ({source}) on {self.cluster}"


def _unquoted(value: str) -> str:
    value = value.strip().rstrip(",").strip()
    return value[1:-1] if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'" else value


def text_properties(text: str, source: str) -> Iterator[Prop]:
    """The settings a text holds, in every form above; a StarRocks catalog's become Props of that catalog."""
    for match in _SQL_CATALOG.finditer(text):
        name, body = match.group(1), match.group(2)
        for key, value in _SQL_PROPERTY.findall(body):
            yield Prop(key, value, f"{source}, CREATE EXTERNAL CATALOG {name}", sql_catalog=name)
    for pattern in (_LINE, _CONF_ARG, _XML):
        for key, value in pattern.findall(text):
            yield Prop(key, _unquoted(value), source)


def _text(value: Any) -> Any:
    """A mapping's scalar as the engine reads it from a properties file (numbers arrive as doubles: 1 is 1.0)."""
    if value is UNKNOWN or isinstance(value, str):
        return value
    if isinstance(value, bool):
        return str(value).lower()
    return str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)


def _walk(value: Any, path: str) -> Iterator[Prop]:
    if isinstance(value, dict):
        for key, item in value.items():
            if _DOTTED.match(str(key)) and (item is UNKNOWN or isinstance(item, (str, int, float, bool))):
                yield Prop(str(key), _text(item), path or ".")
            yield from _walk(item, f"{path}.{key}" if path else str(key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _walk(item, f"{path}[{i}]")
    elif isinstance(value, str):
        yield from text_properties(value, path or ".")


def properties(value: Any, path: str = "") -> list[Prop]:
    """Every setting in a plain value (mapping entries with dotted keys, and the settings inside every text)."""
    return list(_walk(value, path))


def configs(resources: list[Any]) -> Iterator[Config]:
    """The properties of every Helm release (its values) and Kubernetes object (all but its metadata) that has any."""
    for resource in resources:
        cluster = provider_name(resource) or "an unknown cluster"
        if resource.resource_type == HELM_RELEASE:
            values = plain(resource.props).get("values")
            what, props = f"Helm release {resource.name}", properties(values, "values")
        else:
            obj = k8s_object(resource.resource_type, resource.props)
            if obj is None:
                continue
            body = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind", "metadata")}
            ns = namespace_of(obj)
            what, props = f"{obj['kind']} {ns + '/' if ns else ''}{name_of(obj)}", properties(body)
        if props:
            yield Config(resource, what, cluster, props)
