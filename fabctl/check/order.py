"""Order on an empty cluster: every custom resource after its CRD, every namespaced object after its namespace.

The API server refuses a custom resource whose CRD is not registered, and an object in a namespace that does
not exist. So each must be applied by something that (transitively) depends on what creates them: a chart's
CRDs (Helm installs those first within a release), a CRD or Namespace object of the program, a Helm release's
own namespace (`createNamespace`), a controller known to register them at run time (`runtime.RUNTIME_CRDS`),
or something the stack's config declares as existing already (`check.existing`, `adopt.namespaces`, Cilium
installed by other means).
"""

from __future__ import annotations

from collections.abc import Iterator

from fabctl.check.findings import Finding
from fabctl.check.picture import BUILTIN_GROUPS, BUILTIN_NAMESPACES, Picture, release_placed
from fabctl.check.placed import Placed, group_of
from fabctl.check.runtime import RUNTIME_CRDS

CRD = "CustomResourceDefinition"


def _crds(picture: Picture, cluster: str, group: str, kind: str) -> list[Placed]:
    return [p for p in picture.placed if p.cluster == cluster and p.kind == CRD
            and (p.obj.get("spec") or {}).get("group") == group and ((p.obj.get("spec") or {}).get("names") or {}).get("kind") == kind]


def _served(crd: Placed, version: str) -> bool:
    return any(v.get("name") == version and v.get("served", True) for v in (crd.obj.get("spec") or {}).get("versions") or [])


def _in_place(picture: Picture, source: Placed, placed: Placed) -> bool:
    """Whether `source` exists when `placed` is applied: created before it, or installed first by the same release."""
    same_release = placed.release is not None and source.release is placed.release
    return (same_release and source.release.installs_first(source.obj)) or picture.before(source, placed.resource)


def _in_place_namespace(picture: Picture, source: Placed, placed: Placed) -> bool:
    """Whether a Namespace exists when `placed` is applied: created before it, or by the same release (Helm creates
    Namespaces first among a release's objects)."""
    same_release = placed.release is not None and source.release is placed.release
    return same_release or picture.before(source, placed.resource)


def crd_findings(picture: Picture) -> Iterator[Finding]:
    for placed in picture.placed:
        api_version = str(placed.obj.get("apiVersion", ""))
        group = group_of(api_version)
        if group in BUILTIN_GROUPS or picture.existing_crd(placed.cluster, group, placed.kind):
            continue
        key = picture.cluster_key(placed.cluster)
        cluster_config = picture.site.clusters.get(key)
        if group == "cilium.io" and cluster_config is not None and not cluster_config.cilium.managed:
            continue  # Cilium is installed by other means and runs already: its operator has registered its CRDs
        wanted = f"{group}/{placed.kind}"
        crds = _crds(picture, placed.cluster, group, placed.kind)
        if crds:
            if not any(_in_place(picture, crd, placed) for crd in crds):
                origins = ", ".join(sorted({crd.origin for crd in crds}))
                yield Finding.of("order.crd", placed, f"its CRD ({wanted}) is installed by {origins}, which is not created before it",
                                 f"make {placed.resource['name']} depend on {crds[0].resource['name']}")
            elif not any(_served(crd, api_version.rsplit("/", 1)[-1]) for crd in crds):
                yield Finding.of("order.crd", placed, f"its CRD does not serve {api_version}",
                                 "use a version the pinned CRD serves (components/versions.py)")
            continue
        runtime = next((entry for entry in RUNTIME_CRDS if entry.group == group), None)
        if runtime is not None:
            installers = runtime.ready_after(picture.plan, picture.site, placed.cluster)
            if not any(record["urn"] in picture.waits_for(placed.resource) for record in installers):
                yield Finding.of("order.crd", placed, f"its CRD ({wanted}) is registered at run time by {runtime.installer}, "
                                 "and nothing it waits for ensures that has happened", runtime.fix)
            continue
        if picture.unrendered(placed.cluster):
            unknown = ", ".join(sorted(r["name"] for r in picture.unrendered(placed.cluster)))
            yield Finding.of("order.crd", placed, f"no CRD for {wanted} in the picture; the unrendered releases {unknown} may install it",
                             "render every release (see the missing charts) to check it", severity="note")
            continue
        yield Finding.of("order.crd", placed, f"nothing installs its CRD ({wanted}) on {placed.cluster}",
                         f"install the chart or CRD that defines {wanted} before it, or declare the CRD in "
                         f"check.existing.{picture.cluster_key(placed.cluster)} if the cluster has it already")


def namespace_findings(picture: Picture) -> Iterator[Finding]:
    namespaces: dict[tuple[str, str], list[Placed]] = {}
    for placed in picture.placed:
        if placed.kind == "Namespace":
            namespaces.setdefault((placed.cluster, placed.name), []).append(placed)
    for placed in picture.placed:
        namespace = placed.namespace
        if namespace is None or namespace in BUILTIN_NAMESPACES or picture.existing(placed.cluster, "Namespace", None, namespace):
            continue
        if placed.release is not None and namespace == placed.resource["inputs"].get("namespace") and placed.resource["inputs"].get("createNamespace"):
            continue
        sources = namespaces.get((placed.cluster, namespace), [])
        if sources:
            if not any(_in_place_namespace(picture, source, placed) for source in sources):
                yield Finding.of("order.namespace", placed, f"it does not wait for its namespace {namespace}",
                                 f"make {placed.resource['name']} depend on {sources[0].resource['name']}")
        elif picture.unrendered(placed.cluster):
            unknown = ", ".join(sorted(r["name"] for r in picture.unrendered(placed.cluster)))
            yield Finding.of("order.namespace", placed, f"nothing in the picture creates its namespace {namespace}; the "
                             f"unrendered releases {unknown} may", "render every release (see the missing charts) to check it",
                             severity="note")
        else:
            yield Finding.of("order.namespace", placed, f"nothing creates its namespace {namespace}",
                             f"create the namespace in the program, or declare it in check.existing.{picture.cluster_key(placed.cluster)}")


def release_namespace_findings(picture: Picture) -> Iterator[Finding]:
    """A Helm release installs into its namespace, which must exist first unless the release creates it: checked
    for every release, rendered or not (a chart may put nothing of its own there)."""
    for release in picture.release_records():
        inputs = release["inputs"]
        placed = release_placed(picture.plan, release)
        namespace = inputs.get("namespace") or "default"
        if inputs.get("createNamespace") or namespace in BUILTIN_NAMESPACES or picture.existing(placed.cluster, "Namespace", None, namespace):
            continue
        sources = [p for p in picture.by_name.get((placed.cluster, "Namespace", None, namespace), []) if p.release is None]
        if not sources:
            yield Finding.of("order.namespace", placed, f"nothing creates its namespace {namespace}",
                             f"create the namespace in the program, set createNamespace, or declare it in "
                             f"check.existing.{picture.cluster_key(placed.cluster)}")
        elif not any(picture.before(source, release) for source in sources):
            yield Finding.of("order.namespace", placed, f"it does not wait for its namespace {namespace}",
                             f"make {release['name']} depend on {sources[0].resource['name']}")
