"""`python -m fabctl mirror`: everything a site's registry must hold, and the inputs of the tools that fill it."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from helpers import CliRun, copy_project, fabctl_in_process, render_small
from small_site import small_site

from components import versions
from components.config import RegistryConfig
from components.registry import Registry
from fabctl.helm import ChartRef
from fabctl.mirror import (
    Manifest,
    MirroredImage,
    _node_os_images,
    chart_commands,
    copy_commands,
    plain_list,
    read_digests,
    skopeo_sync,
)
from fabctl.render import HELM_RELEASE_TYPE
from fabctl.stackfile import SITE_KEY

WITHOUT_SHARED = {"FAB_CHART_DIR": None, "FAB_HELM": None}
"""The tests name the chart folder and Helm themselves."""
DIGEST = "sha256:" + "ab" * 32
UNREACHABLE = {"HTTPS_PROXY": "http://127.0.0.1:1", "HTTP_PROXY": "http://127.0.0.1:1"}
"""No chart repository answers (the tests never depend on the network)."""
REGISTRY = ["--set", "site.registry.charts=oci://registry.fab.internal/charts", "--set", "site.registry.images=registry.fab.internal/mirror",
            "--set", "site.registry.maven=https://maven.fab.internal/central"]
MIRROR = Registry.of(RegistryConfig(charts="oci://registry.fab.internal/charts", images="registry.fab.internal/mirror"))


def fabctl(*args: str, env: dict[str, str] | None = None) -> CliRun:
    return fabctl_in_process(*args, env={**WITHOUT_SHARED, **(env or {})})


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    """A copy of the program with the smallest site (no registry) as the stack file of stack site-t."""
    folder = tmp_path_factory.mktemp("project")
    project = copy_project(folder)
    (project / "Pulumi.site-t.yaml").write_text(yaml.safe_dump({"config": {SITE_KEY: small_site()}}))
    return project


@pytest.fixture(scope="module")
def mirrored(project, chart_dir, helm, tmp_path_factory):
    """`fabctl mirror` of the smallest site with a registry given on the command line, the python image pinned by digest."""
    out = tmp_path_factory.mktemp("mirror")
    digests = out / "digests.yaml"
    digests.write_text(yaml.safe_dump({"python:3.13.9-slim-bookworm": DIGEST}))
    run = fabctl("mirror", "--stack", "site-t", "--project-dir", str(project), *REGISTRY, "--digests", str(digests), "--node-os", "ubuntu24.04",
                 "--out", str(out / "files"), "--chart-cache", str(out / "cache"),
                 env={"FAB_CHART_DIR": str(chart_dir), "FAB_HELM": str(helm), **UNREACHABLE})
    return run, out / "files"


def _manifest() -> Manifest:
    return Manifest(
        registry=MIRROR,
        charts=[ChartRef("kueue", "0.19.2", "oci://registry.fab.internal/charts", "oci://registry.k8s.io/kueue/charts"),
                ChartRef("cilium", "1.18.3", "oci://registry.fab.internal/charts", "https://helm.cilium.io/")],
        images=[MirroredImage("docker.io/library/python:3.13.9-slim-bookworm",
                              "registry.fab.internal/mirror/docker.io/library/python:3.13.9-slim-bookworm", DIGEST),
                MirroredImage("registry.k8s.io/kubectl:v1.34.1", "registry.fab.internal/mirror/registry.k8s.io/kubectl:v1.34.1")],
    )


def test_the_list_names_each_chart_and_image_with_its_source_and_mirror():
    assert plain_list(_manifest()) == [
        "chart kueue 0.19.2 oci://registry.k8s.io/kueue/charts -> oci://registry.fab.internal/charts",
        "chart cilium 1.18.3 https://helm.cilium.io/ -> oci://registry.fab.internal/charts",
        f"image docker.io/library/python@{DIGEST} -> registry.fab.internal/mirror/docker.io/library/python:3.13.9-slim-bookworm",
        "image registry.k8s.io/kubectl:v1.34.1 -> registry.fab.internal/mirror/registry.k8s.io/kubectl:v1.34.1",
    ]


def test_the_skopeo_sync_file_lists_the_tags_by_source_registry_and_leaves_digest_file_pins_to_the_copy():
    assert yaml.safe_load(skopeo_sync(_manifest())) == {"registry.k8s.io": {"images": {"kubectl": ["v1.34.1"]}}}


def test_the_skopeo_sync_file_lists_the_digest_a_reference_carries_beside_its_tag():
    cilium = f"quay.io/cilium/cilium:v1.18.3@{DIGEST}"
    found = Manifest(registry=MIRROR, images=[MirroredImage(cilium, f"registry.fab.internal/mirror/{cilium}", DIGEST, pods_pull_by_tag=False)])
    assert yaml.safe_load(skopeo_sync(found)) == {"quay.io": {"images": {"cilium/cilium": [DIGEST, "v1.18.3"]}}}


@pytest.mark.parametrize(("operand", "tag"), [
    (f"{versions.GPU_DRIVER.repository}/{versions.GPU_DRIVER.image}:{versions.GPU_DRIVER.version}", f"{versions.GPU_DRIVER.version}-ubuntu24.04"),
    (f"{versions.NIC_OFED_DRIVER.repository}/{versions.NIC_OFED_DRIVER.image}:{versions.NIC_OFED_DRIVER.version}",
     f"{versions.NIC_OFED_DRIVER.version}-ubuntu24.04-arm64"),
])
def test_a_driver_is_mirrored_with_the_tag_its_operator_pulls_on_the_nodes_os(operand, tag):
    (image,) = _node_os_images(MirroredImage(operand, MIRROR.image(operand)), ["ubuntu24.04"], "arm64")
    assert (image.source, image.mirror) == (f"{operand.rsplit(':', 1)[0]}:{tag}", MIRROR.image(f"{operand.rsplit(':', 1)[0]}:{tag}"))


def test_fails_when_a_gpu_site_names_no_node_os(project, chart_dir, helm):
    run = fabctl("mirror", "--stack", "site-t", "--project-dir", str(project), *REGISTRY, "--no-pull",
                 env={"FAB_CHART_DIR": str(chart_dir), "FAB_HELM": str(helm)})
    driver = f"{versions.GPU_DRIVER.repository}/{versions.GPU_DRIVER.image}:{versions.GPU_DRIVER.version}"
    doca = f"{versions.NIC_OFED_DRIVER.repository}/{versions.NIC_OFED_DRIVER.image}:{versions.NIC_OFED_DRIVER.version}"
    assert (run.returncode, run.stderr.splitlines()[-1]) == (
        2, f"error: {driver}, {doca}: the operator pulls it with the GPU nodes' OS appended to the tag "
        "(580.105.08-ubuntu24.04), and only those tags exist upstream; name the nodes' OS with --node-os (for example "
        "--node-os ubuntu24.04, once per OS the GPU nodes run)"
    )


def test_an_image_pinned_by_digest_is_copied_from_that_digest_to_its_tag():
    assert copy_commands(_manifest())[0] == (
        f"skopeo copy --all --preserve-digests docker://docker.io/library/python@{DIGEST} "
        "docker://registry.fab.internal/mirror/docker.io/library/python:3.13.9-slim-bookworm"
    )


def test_charts_are_pulled_from_upstream_and_pushed_to_the_registry():
    assert chart_commands(_manifest()) == [
        "helm pull oci://registry.k8s.io/kueue/charts/kueue --version 0.19.2",
        "helm push kueue-0.19.2.tgz oci://registry.fab.internal/charts",
        "helm pull cilium --repo https://helm.cilium.io/ --version 1.18.3",
        "helm push cilium-1.18.3.tgz oci://registry.fab.internal/charts",
    ]


def test_fails_when_a_digest_file_holds_a_tag(tmp_path):
    path = tmp_path / "digests.yaml"
    path.write_text("python:3.13.9-slim-bookworm: 3.13.9\n")
    with pytest.raises(ValueError, match=r"^.*digests.yaml: python:3.13.9-slim-bookworm: '3.13.9' is not a digest; write sha256:<64 hex digits>$"):
        read_digests(path)


def test_fails_when_the_stack_has_no_registry(project, helm):
    run = fabctl("mirror", "--stack", "site-t", "--project-dir", str(project), "--helm", str(helm), "--charts", str(project))
    assert (run.returncode, run.stderr) == (
        2, "error: site-t has no registry: add `registry` to its site config (docs/airgap.md), or name one here with --set "
        "site.registry.charts=oci://HOST/PATH --set site.registry.images=HOST/PATH\n"
    )


def test_mirror_lists_every_chart_of_the_plan_and_fails_on_the_releases_it_cannot_render(mirrored, chart_dir):
    """../shared/charts has no Airflow or Superset package: the list would lack their images, so the run fails, naming
    them in a stable order (by cluster and release) however Pulumi happened to register them."""
    run, _ = mirrored
    site = small_site()
    site["registry"] = {"charts": "oci://registry.fab.internal/charts", "images": "registry.fab.internal/mirror",
                        "maven": "https://maven.fab.internal/central"}
    releases = render_small(site).of_type(HELM_RELEASE_TYPE)
    listed = [tuple(line.split()[1:4]) for line in run.stdout.splitlines() if line.startswith("chart ")]
    assert [line for line in run.stderr.splitlines() if line.startswith("error: ")] == [
        f"error: site-t-compute {name} was not rendered (no package of {chart} ({source}, from "
        f"oci://registry.fab.internal/charts) in {chart_dir}; cannot pull {chart} ({source}, from oci://registry.fab.internal/"
        f'charts): Error: looks like "{source}" is not a valid chart repository or cannot be reached: Get "{source}/index.yaml": '
        "proxyconnect tcp: dial tcp 127.0.0.1:1: connect: connection refused): the images of its chart are not in the list; "
        "give its package with --charts DIR"
        for name, chart, source in (("compute-airflow", f"airflow {versions.AIRFLOW.version}", versions.AIRFLOW.repo),
                                    ("compute-superset", f"superset {versions.SUPERSET.version}", versions.SUPERSET.repo))
    ]
    assert run.returncode == 6
    assert releases
    assert listed == sorted({(c.name, c.version, c.source) for c in map(ChartRef.of, releases)})


def test_every_listed_image_is_its_source_under_the_prefix(mirrored):
    run, _ = mirrored
    pairs = [line.split()[1:4:2] for line in run.stdout.splitlines() if line.startswith("image ")]
    assert pairs
    assert [(s, m) for s, m in pairs if "@" not in s and m != f"registry.fab.internal/mirror/{s}"] == []


def test_an_image_without_a_digest_is_mirrored_by_tag_with_a_warning(mirrored):
    run, _ = mirrored
    assert "warning: docker.io/vllm/vllm-openai:v0.31.0 is mirrored by tag, not by digest: add its digest to image-digests.yaml" in run.stderr.splitlines()


def test_an_image_with_a_digest_is_listed_by_it(mirrored):
    run, _ = mirrored
    assert (f"image docker.io/library/python@{DIGEST} -> registry.fab.internal/mirror/docker.io/library/python:3.13.9-slim-bookworm"
            in run.stdout.splitlines())


def test_mirror_writes_the_tools_inputs(mirrored):
    _, out = mirrored
    assert sorted(p.name for p in out.iterdir()) == [
        "charts.sh", "copy-images.sh", "files.sh", "maven.txt", "mirror.json", "mirror.txt", "skopeo-sync.yaml"]


def test_the_maven_packages_spark_resolves_are_listed(mirrored):
    _, out = mirrored
    from components.versions import SPARK_PACKAGES

    assert (out / "maven.txt").read_text().splitlines() == sorted(SPARK_PACKAGES)


def test_the_gpu_driver_is_listed_with_the_nodes_os(mirrored):
    run, _ = mirrored
    source = f"{versions.GPU_DRIVER.repository}/{versions.GPU_DRIVER.image}:{versions.GPU_DRIVER.version}-ubuntu24.04"
    assert f"image {source} -> registry.fab.internal/mirror/{source}" in run.stdout.splitlines()


def test_the_images_of_the_acceptance_jobs_are_listed(mirrored):
    run, _ = mirrored
    assert f"image {versions.VERIFY_GPU_IMAGE} -> registry.fab.internal/mirror/{versions.VERIFY_GPU_IMAGE}" in run.stdout.splitlines()


def test_the_images_jupyterhub_starts_user_servers_with_are_listed(mirrored):
    """They are in the hub's configuration (a Secret), which the hub hands to every user server it spawns."""
    run, _ = mirrored
    assert "image quay.io/jupyterhub/k8s-singleuser-sample:4.4.0 -> registry.fab.internal/mirror/quay.io/jupyterhub/" \
           "k8s-singleuser-sample:4.4.0" in run.stdout.splitlines()


def test_charts_are_read_from_their_upstream_repository_before_the_registry_holds_them(tmp_path, monkeypatch):
    from fabctl.helm import ChartRepositories

    calls = tmp_path / "calls"
    helm = tmp_path / "helm"
    helm.write_text(f"#!/bin/sh\necho \"$@\" >> {calls}\nexit 1\n")
    helm.chmod(0o755)
    chart = ChartRef("kueue", "0.19.2", "oci://registry.fab.internal/charts", "oci://registry.k8s.io/kueue/charts")
    ChartRepositories(helm, tmp_path / "cache", upstream=True).find(chart)
    assert calls.read_text().split()[:2] == ["pull", "oci://registry.k8s.io/kueue/charts/kueue"]
