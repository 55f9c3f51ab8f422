"""Cross-field checks of the site's registry (docs/airgap.md): its CA file can be read, and every run-time download of a
feature the site uses has a mirror to come from once the site is cut off from the internet."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from components.config.problems import Problem
from components.config.views import read_ca_bundle

if TYPE_CHECKING:
    from components.config.views import SiteViews


def pem_file_problems(path: str, key: tuple[str, ...]) -> Iterator[Problem]:
    """Why the PEM file at `path` (config key `key`) cannot serve as a CA bundle, if it cannot."""
    try:
        if not read_ca_bundle(path).strip():
            yield key, f"{path!r} holds no PEM certificate (-----BEGIN CERTIFICATE-----)"
    except OSError as exc:
        yield key, f"{path!r} cannot be read ({exc.strerror or exc}); paths are relative to the project directory"
    except UnicodeDecodeError:
        yield key, f"{path!r} is not a PEM file (PEM is ASCII text)"


def maven_users(site: SiteViews) -> list[str]:
    """The config keys of the features whose Spark pods resolve Maven packages at start (`spark.jars.packages`)."""
    users = ["compute.spark.connect"] if site.compute.spark.enabled and site.compute.spark.connect else []
    return users + [f"gpu.{key}.spark_rapids" for key, spec in sorted(site.gpu.items()) if spec.spark_rapids is not None]


def file_users(site: SiteViews) -> list[str]:
    """The config keys of the features the program applies a release file by URL for."""
    routing = site.inference is not None and site.inference.routing == "inference-extension"
    return ["inference.routing"] if routing else []


def registry_problems(site: SiteViews) -> Iterator[Problem]:
    registry = site.registry
    if registry is None:
        return
    if registry.ca_bundle is not None:
        yield from pem_file_problems(registry.ca_bundle, ("registry", "ca_bundle"))
    users = maven_users(site)
    if registry.maven is None and users:
        yield ("registry", "maven"), (
            f"is not set, but {' and '.join(users)} {'resolve' if len(users) > 1 else 'resolves'} Spark packages from Maven "
            "Central at start, which an air-gapped site cannot reach; set it to the site's Maven repository (a proxy of "
            "Maven Central)"
        )
    users = file_users(site)
    if registry.files is None and users:
        yield ("registry", "files"), (
            f"is not set, but {users[0]} applies the Gateway API Inference Extension's CRD manifest from its GitHub "
            "release, which an air-gapped site cannot reach; set it to the site's file server (docs/airgap.md)"
        )
