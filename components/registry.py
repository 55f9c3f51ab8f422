"""Where a cluster's charts, images and downloaded files come from: their upstream sources, or the site's own registry
on an air-gapped site (config `registry`, docs/airgap.md).

Every component asks its cluster's `Registry` for the image it runs, the chart it installs and the file it applies, so
that one config section moves all of them. Without `registry` every answer is the upstream source, unchanged.

Mirrored images keep their source registry and path under the mirror's prefix (`docker.io/library/python:3.13` ->
`<images>/docker.io/library/python:3.13`), the layout `skopeo sync --scoped` writes: no two sources share a mirror
reference, and each mirror reference names its source (`source_of`), which `fabctl mirror` lists.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any

import pulumi

from components.config import RegistryConfig
from components.versions import HelmChart, Image

DOCKER_HUB = "docker.io"
"""The registry of an image reference that names none (`python:3.13` is `docker.io/library/python:3.13`)."""
_DIGEST = re.compile(r"@sha256:[0-9a-f]{64}$")


@dataclass(frozen=True)
class ImageRef:
    """An image reference in its parts: registry host, repository path, and tag and/or digest."""

    registry: str
    repository: str
    tag: str | None = None
    digest: str | None = None

    @classmethod
    def parse(cls, reference: str) -> ImageRef:
        """Split a reference as the container runtime reads it (a first segment with '.' or ':', or `localhost`, is a
        registry; otherwise Docker Hub, whose one-segment names are under `library/`)."""
        digest = None
        match = _DIGEST.search(reference)
        if match:
            digest, reference = match.group(0)[1:], reference[: match.start()]
        name, tag = reference, None
        last = reference.rsplit("/", 1)[-1]
        if ":" in last:
            name, tag = reference.rsplit(":", 1)
        first, _, rest = name.partition("/")
        if rest and ("." in first or ":" in first or first == "localhost"):
            registry, repository = first, rest
        else:
            registry, repository = DOCKER_HUB, name
        if registry == DOCKER_HUB and "/" not in repository:
            repository = f"library/{repository}"
        return cls(registry, repository, tag, digest)

    @property
    def version(self) -> str:
        """What follows the name: `:tag`, `@digest` or both."""
        return (f":{self.tag}" if self.tag else "") + (f"@{self.digest}" if self.digest else "")

    def __str__(self) -> str:
        return f"{self.registry}/{self.repository}{self.version}"


@dataclass(frozen=True)
class Registry:
    """The source of one cluster's charts, images and release files: upstream (`mirror` None) or the site's registry."""

    mirror: RegistryConfig | None = None
    ca_file: str | None = None
    """The PEM file Helm trusts for an https chart repository (`registry.ca_bundle`, else the site's `ca_bundle`)."""
    pull_credentials: pulumi.Input[str] | None = None
    """The Docker config.json of the pull Secret (secret config `registryPullSecret`), when `registry.pull_secret` is set."""
    site_ca_file: str | None = None
    """The site's `ca_bundle`: the JVMs that trust the registry's CA must keep trusting the site's endpoints too."""

    @classmethod
    def of(cls, config: RegistryConfig | None, site_ca_bundle: str | None = None,
           pull_credentials: pulumi.Input[str] | None = None) -> Registry:
        if config is None:
            return UPSTREAM
        return cls(config, config.ca_bundle or site_ca_bundle, pull_credentials, site_ca_bundle)

    @property
    def trusted_ca_files(self) -> list[str]:
        """The PEM files a client of the registry that replaces its trust store must trust: the registry's CA and the
        site's, each once."""
        return list(dict.fromkeys(f for f in (self.ca_file, self.site_ca_file) if f))

    @property
    def mirrored(self) -> bool:
        return self.mirror is not None

    def image(self, reference: str) -> str:
        """The reference a pod pulls `reference` by: the mirror's copy, or `reference` itself."""
        if self.mirror is None:
            return reference
        return str(self.ref(reference))

    def ref(self, reference: str) -> ImageRef:
        """The parts of the reference a pod pulls (`image`), for values that take registry, repository and tag apart."""
        parsed = ImageRef.parse(reference)
        if self.mirror is None:
            return parsed
        return ImageRef(self.mirror.images, f"{parsed.registry}/{parsed.repository}", parsed.tag, parsed.digest)

    def operand(self, image: Image) -> Image:
        """An operator operand as its custom resource names it (repository, image, version), from the mirror if any."""
        if self.mirror is None:
            return image
        return replace(image, repository=f"{self.mirror.images}/{image.repository}")

    def source_of(self, reference: str) -> str | None:
        """The source image of a mirror reference, or None if `reference` is not under the mirror."""
        if self.mirror is None or not reference.startswith(f"{self.mirror.images}/"):
            return None
        return reference[len(self.mirror.images) + 1:]

    def chart(self, chart: HelmChart) -> HelmChart:
        """The chart as the release pulls it: same name and version, from the mirror's repository if any."""
        return chart if self.mirror is None else replace(chart, repo=self.mirror.charts)

    def file(self, url: str) -> str:
        """The URL a release file is applied from: the mirror's copy under its source host and path, or `url`."""
        if self.mirror is None or self.mirror.files is None:
            return url
        return f"{self.mirror.files}/{url.split('://', 1)[1]}"

    @property
    def maven(self) -> str | None:
        """The Maven repository Spark resolves packages from, or None for Maven Central."""
        return self.mirror.maven if self.mirror is not None else None

    @property
    def pull_secret(self) -> str | None:
        """The name of the image pull Secret in every namespace the program creates, if the site uses one."""
        return self.mirror.pull_secret if self.mirror is not None else None

    @property
    def pull_secrets(self) -> list[dict[str, str]]:
        """A pod's `imagePullSecrets`: the site's pull Secret, or none."""
        return [{"name": self.pull_secret}] if self.pull_secret else []

    def pod_fields(self) -> dict[str, Any]:
        """The fields a pod spec adds for the registry: `imagePullSecrets` with the site's pull Secret, or nothing (so
        that a site without one renders exactly as before)."""
        return {"imagePullSecrets": self.pull_secrets} if self.pull_secret else {}


UPSTREAM = Registry()
"""Every chart, image and file from its upstream source: a site without `registry`."""


def merge_values(values: Any, overlay: dict[str, Any]) -> Any:
    """Chart values with `overlay` laid over them, key by key; an Output in `values` is merged once it resolves."""
    if not overlay:
        return values
    if isinstance(values, pulumi.Output):
        return values.apply(lambda resolved: merge_values(resolved, overlay))
    if not isinstance(values, dict):
        return overlay
    merged = dict(values)
    for key, value in overlay.items():
        merged[key] = merge_values(merged[key], value) if key in merged and isinstance(value, dict) else value
    return merged
