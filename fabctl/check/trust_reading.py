"""What the site-CA trust rule (fabctl/check/trust.py) reads of a client: whether the site's CA issued an endpoint's
certificate, the pods a client runs in, what they mount and what the mounted Secrets and ConfigMaps hold."""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import yaml

from components.config import SiteConfig
from fabctl.check.picture import Picture
from fabctl.check.placed import Placed
from fabctl.helm import _Loader


def load_yaml(text: str) -> Any:
    """YAML as libyaml parses it (the check's loader: `fabctl.helm._Loader`), several times faster than PyYAML's own."""
    return yaml.load(text, Loader=_Loader)


WORKLOADS = ("Deployment", "StatefulSet", "DaemonSet", "Job", "CronJob", "Pod")
SECRET_MASK = "[secret]"
"""How a plan shows a Pulumi secret's value: unreadable to the check."""


def site_ca_host(site: SiteConfig, host: str | None) -> bool:
    """Whether the site's CA issued the certificate of `host`: a name under the site's domain, or its Keycloak's host."""
    if not host or site.ca_bundle is None:
        return False
    host = host.lower().rstrip(".")
    domain = site.domain.lower()
    return host == domain or host.endswith(f".{domain}") or host == (urlsplit(str(site.keycloak.url)).hostname or "").lower()


def host_of(url: Any) -> str | None:
    return urlsplit(url).hostname if isinstance(url, str) and "://" in url else None


@dataclass(frozen=True)
class Client:
    """One client of the picture that calls a site-CA endpoint, and what it lacks to trust the CA (None: it trusts it)."""

    placed: Placed
    what: str
    """The client in words: `Grafana's generic OAuth sign-in (grafana.ini auth.generic_oauth)`."""
    url: str
    missing: str | None


# --------------------------------------------------------------------------------------------------------------------
# What the kinds share: pods, mounts, sources.


def pod_spec(obj: dict[str, Any]) -> dict[str, Any] | None:
    spec = obj.get("spec") or {}
    kind = obj.get("kind")
    if kind == "Pod":
        return spec
    if kind == "CronJob":
        spec = ((spec.get("jobTemplate") or {}).get("spec") or {})
    return (spec.get("template") or {}).get("spec") if kind in WORKLOADS else None


def containers(spec: dict[str, Any]) -> list[dict[str, Any]]:
    return [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]


def workloads_using(picture: Picture, client: Placed, volume_kind: str) -> list[tuple[Placed, dict[str, Any]]]:
    """The workloads of the client's namespace whose pods mount it (a ConfigMap or Secret) as a volume."""
    field, key = ("configMap", "name") if volume_kind == "ConfigMap" else ("secret", "secretName")
    found = []
    for placed in picture.placed:
        if placed.cluster != client.cluster or placed.namespace != client.namespace:
            continue
        spec = pod_spec(placed.obj)
        if spec and any((v.get(field) or {}).get(key) == client.name for v in spec.get("volumes") or []):
            found.append((placed, spec))
    return found


def source_keys(picture: Picture, cluster: str, namespace: str | None, kind: str, name: str) -> set[str] | None:
    """The keys of a Secret or ConfigMap in the picture (applied or derived); None when there is none. Keys of a Secret
    whose data the plan cannot show are the keys it names."""
    objs = picture.by_name.get((cluster, kind, namespace, name))
    if not objs:
        return None
    keys: set[str] = set()
    for placed in objs:
        for field in ("data", "stringData", "binaryData"):
            keys.update((placed.obj.get(field) or {}).keys())
    return keys


def mounted_file(picture: Picture, where: Placed, spec: dict[str, Any], path: str) -> str | None:
    """None when every container that mounts anything at the path's folder finds the file `path` there from a Secret or
    ConfigMap of the picture; else what is wrong, in words."""
    volumes = {v.get("name"): v for v in spec.get("volumes") or []}
    for container in containers(spec):
        for mount in container.get("volumeMounts") or []:
            mount_path = str(mount.get("mountPath", "")).rstrip("/")
            if mount.get("subPath") and mount_path == path:
                file_key = str(mount["subPath"])
            elif path.startswith(f"{mount_path}/") and not mount.get("subPath"):
                file_key = path[len(mount_path) + 1:]
            else:
                continue
            volume = volumes.get(mount.get("name")) or {}
            if "secret" in volume:
                kind, name = "Secret", volume["secret"].get("secretName")
            elif "configMap" in volume:
                kind, name = "ConfigMap", volume["configMap"].get("name")
            else:
                continue
            keys = source_keys(picture, where.cluster, where.namespace, kind, str(name))
            if keys is None:
                return f"{where.subject} mounts {kind} {where.namespace}/{name} at {mount_path}, which the plan does not create"
            if file_key not in keys:
                return f"{kind} {where.namespace}/{name}, mounted at {mount_path}, has no key {file_key}"
            return None
    return f"{where.subject} mounts nothing at {path}"


def decoded(value: Any) -> str | None:
    if not isinstance(value, str):
        return None
    try:
        return base64.b64decode(value, validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        return None


def holds_certificate(value: Any) -> bool:
    return isinstance(value, str) and "-----BEGIN CERTIFICATE-----" in value

