"""Where `fabctl check` gets chart packages: a local mirror folder, or each release's repository through a cache."""

from __future__ import annotations

import functools
import http.server
import shutil
import subprocess
import threading

import pytest

from fabctl.helm import ChartPackages, ChartRef, ChartRepositories, releases
from fabctl.render import HELM_RELEASE_TYPE, K8S_PROVIDER_TYPE, Plan

JOBSET = "jobset-0.12.0.tgz"


def test_a_folder_of_pulled_packages_is_a_mirror(chart_dir, tmp_path):
    shutil.copy(chart_dir / JOBSET, tmp_path / JOBSET)
    packages = ChartPackages(tmp_path)
    assert (packages.find(ChartRef("jobset", "0.12.0", "https://any.example")), packages.find(ChartRef("jobset", "0.13.0", ""))) == (
        tmp_path / JOBSET, None
    )


def test_a_folder_with_an_index_also_matches_the_repository(chart_dir):
    packages = ChartPackages(chart_dir)
    assert packages.find(ChartRef("kueue", "0.19.2", "https://charts.example/elsewhere")) is None
    assert packages.why_missing(ChartRef("kueue", "0.19.2", "https://charts.example/elsewhere")) == (
        f"no package of kueue 0.19.2 (https://charts.example/elsewhere) in {chart_dir}"
    )


@pytest.fixture
def chart_repository(chart_dir, helm, tmp_path):
    """A Helm chart repository served over HTTP on this machine, holding the JobSet chart."""
    served = tmp_path / "repo"
    served.mkdir()
    shutil.copy(chart_dir / JOBSET, served / JOBSET)
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(served))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    url = f"http://127.0.0.1:{server.server_address[1]}"
    subprocess.run([str(helm), "repo", "index", str(served), "--url", url], check=True, capture_output=True,
                   env={"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"})
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield url
    server.shutdown()


def test_charts_are_pulled_from_their_repository_into_the_cache(chart_repository, helm, tmp_path):
    charts = ChartRepositories(helm, tmp_path / "cache")
    assert charts.find(ChartRef("jobset", "0.12.0", chart_repository)) == tmp_path / "cache" / JOBSET


def test_fails_when_a_repository_cannot_be_reached(helm, tmp_path):
    charts = ChartRepositories(helm, tmp_path / "cache")
    chart = ChartRef("jobset", "0.12.0", "http://127.0.0.1:1")
    assert charts.find(chart) is None
    assert charts.why_missing(chart) == (
        'cannot pull jobset 0.12.0 (http://127.0.0.1:1): Error: looks like "http://127.0.0.1:1" is not a valid chart '
        'repository or cannot be reached: Get "http://127.0.0.1:1/index.yaml": dial tcp 127.0.0.1:1: connect: connection refused'
    )


def test_releases_come_in_one_order_whatever_order_pulumi_registered_them():
    """Pulumi registers resources concurrently, so a plan's order varies between runs; what is said about its releases
    (the errors of `fabctl mirror`, the check's findings) must not."""
    providers = [{"urn": f"urn:{name}", "type": K8S_PROVIDER_TYPE, "name": name} for name in ("site-t-gpu", "site-t-compute")]
    found = [{"urn": f"urn:{cluster}:{name}", "type": HELM_RELEASE_TYPE, "name": name, "provider": f"urn:{cluster}"}
             for cluster, name in (("site-t-gpu", "gpu-operator"), ("site-t-compute", "compute-superset"),
                                   ("site-t-compute", "compute-airflow"))]
    listed = [[(plan.cluster(r), r["name"]) for r in releases(plan)]
              for plan in (Plan("site-t", providers + found), Plan("site-t", providers + found[::-1]))]
    assert listed == [[("site-t-compute", "compute-airflow"), ("site-t-compute", "compute-superset"),
                       ("site-t-gpu", "gpu-operator")]] * 2
