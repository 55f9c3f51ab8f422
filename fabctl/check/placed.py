"""One object of the deploy check's picture (fabctl/check/picture.py): where it goes and which Pulumi resource applies
it; what the picture and the run-time tables (fabctl/check/runtime.py) both build."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fabctl.helm import RenderedRelease


def group_of(api_version: str) -> str:
    return api_version.rsplit("/", 1)[0] if "/" in api_version else ""


@dataclass(frozen=True)
class Placed:
    """One object of the picture: where it goes and which Pulumi resource applies it."""

    cluster: str
    obj: dict[str, Any]
    resource: dict[str, Any]
    """The program's resource for this object, or the Helm release that installs it."""
    release: RenderedRelease | None = None
    namespace: str | None = None
    """The namespace it lands in (a release's namespace for its namespaced objects that name none); None if cluster-scoped."""

    @property
    def kind(self) -> str:
        return str(self.obj.get("kind"))

    @property
    def name(self) -> str:
        return str((self.obj.get("metadata") or {}).get("name", ""))

    @property
    def group(self) -> str:
        return group_of(str(self.obj.get("apiVersion", "")))

    @property
    def subject(self) -> str:
        """`Kind namespace/name` or `Kind name`: how findings and the config's `check.accept` name an object."""
        return f"{self.kind} {self.namespace}/{self.name}" if self.namespace else f"{self.kind} {self.name}"

    @property
    def origin(self) -> str:
        """The Pulumi resource that applies it, by logical name (and the release name of a chart's object)."""
        if self.release is not None:
            return f"{self.resource['name']} (Helm release {self.release.release['inputs'].get('name')})"
        return str(self.resource["name"])
