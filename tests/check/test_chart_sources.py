"""Where `fabctl check` gets chart packages: a local mirror folder, or each release's repository through a cache."""

from __future__ import annotations

import contextlib
import functools
import http.server
import shutil
import socket
import subprocess
import threading

import pytest

from fabctl import helm_install
from fabctl.helm import ChartPackages, ChartRef, ChartRepositories, ChartSources, NoSuchHelm, find_helm, releases
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


def _package(folder, name: str = "jobset", version: str = "0.12.0"):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}-{version}.tgz").write_bytes(b"a package")
    return folder / f"{name}-{version}.tgz"


def test_the_mirror_folder_comes_before_the_chart_cache(tmp_path):
    mirror, cache = _package(tmp_path / "mirror"), _package(tmp_path / "cache")
    sources = ChartSources([ChartPackages(mirror.parent), ChartRepositories(tmp_path / "no-helm", cache.parent)])
    assert sources.find(ChartRef("jobset", "0.12.0", "https://any.example")) == mirror


def test_the_chart_cache_comes_before_the_repository(tmp_path):
    """What an earlier pull (or a `helm pull -d` into the cache) left is used as it is: nothing is pulled, and a Helm that
    does not exist is never run."""
    cache = _package(tmp_path / "cache")
    sources = ChartSources([ChartPackages(tmp_path), ChartRepositories(tmp_path / "no-helm", cache.parent)])
    assert sources.find(ChartRef("jobset", "0.12.0", "https://any.example")) == cache


def test_a_chart_no_source_has_says_why_each_one_lacks_it(helm, tmp_path):
    chart = ChartRef("jobset", "0.12.0", "http://127.0.0.1:1")
    sources = ChartSources([ChartPackages(tmp_path), ChartRepositories(helm, tmp_path / "cache")])
    assert sources.find(chart) is None
    assert sources.why_missing(chart) == (
        f"no package of jobset 0.12.0 (http://127.0.0.1:1) in {tmp_path}; cannot pull jobset 0.12.0 (http://127.0.0.1:1): "
        'Error: looks like "http://127.0.0.1:1" is not a valid chart repository or cannot be reached: Get '
        '"http://127.0.0.1:1/index.yaml": dial tcp 127.0.0.1:1: connect: connection refused'
    )


@pytest.fixture
def silent_repository():
    """A chart repository that accepts connections and never answers."""
    listener = socket.create_server(("127.0.0.1", 0))
    accepted = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                accepted.append(listener.accept()[0])

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    stop.set()
    thread.join()
    for connection in accepted:
        connection.close()
    listener.close()


def test_fails_when_a_repository_does_not_answer_in_time(helm, silent_repository, tmp_path):
    charts = ChartRepositories(helm, tmp_path / "cache", timeout_sec=1)
    chart = ChartRef("jobset", "0.12.0", silent_repository)
    assert charts.find(chart) is None
    assert charts.why_missing(chart) == f"cannot pull jobset 0.12.0 ({silent_repository}): no answer within 1 s"


def test_a_host_that_could_not_be_reached_is_not_asked_again(helm, silent_repository, tmp_path):
    charts = ChartRepositories(helm, tmp_path / "cache", timeout_sec=1)
    charts.find(ChartRef("jobset", "0.12.0", silent_repository))
    other = ChartRef("kueue", "0.19.2", f"{silent_repository}/other")
    assert charts.find(other) is None
    assert charts.why_missing(other) == (
        f"not pulled: {silent_repository.removeprefix('http://')} could not be reached (no answer within 1 s)"
    )


@pytest.fixture
def helms(tmp_path, monkeypatch):
    """A Helm for each place fabctl looks: the option, FAB_HELM, the virtualenv (beside Python) and the PATH."""
    places = {}
    for place in ("option", "variable", "venv", "path"):
        (tmp_path / place).mkdir()
        places[place] = tmp_path / place / "helm"
        places[place].write_text("#!/bin/sh\n")
        places[place].chmod(0o755)
    monkeypatch.setattr(helm_install, "default_target", lambda: places["venv"])
    return places


def test_helm_is_the_one_the_option_names_first(helms):
    assert find_helm(str(helms["option"]), {"FAB_HELM": str(helms["variable"]), "PATH": str(helms["path"].parent)}) == helms["option"]


def test_helm_is_the_one_fab_helm_names_without_the_option(helms):
    assert find_helm(None, {"FAB_HELM": str(helms["variable"]), "PATH": str(helms["path"].parent)}) == helms["variable"]


def test_helm_is_the_virtualenvs_before_the_one_on_the_path(helms):
    assert find_helm(None, {"PATH": str(helms["path"].parent)}) == helms["venv"]


def test_helm_is_the_one_on_the_path_last(helms, tmp_path, monkeypatch):
    monkeypatch.setattr(helm_install, "default_target", lambda: tmp_path / "no-venv" / "helm")
    assert (find_helm(None, {"PATH": str(helms["path"].parent)}), find_helm(None, {"PATH": str(tmp_path / "none")})) == (
        helms["path"], None)


def test_fails_when_fab_helm_names_no_file(helms, tmp_path):
    with pytest.raises(NoSuchHelm) as raised:
        find_helm(None, {"FAB_HELM": str(tmp_path / "gone"), "PATH": str(helms["path"].parent)})
    assert str(raised.value) == f"FAB_HELM names {tmp_path / 'gone'}, which is not a file: give the path of a Helm binary (3.8 or later)"


def test_a_chart_not_in_the_cache_is_not_pulled_when_pulls_are_off(tmp_path):
    """`--no-pull` (a hermetic CI): a Helm that does not exist is never run, and the reason names the option."""
    charts = ChartRepositories(tmp_path / "no-helm", tmp_path / "cache", pull=False)
    chart = ChartRef("jobset", "0.12.0", "https://any.example")
    assert (charts.find(chart), charts.why_missing(chart)) == (
        None, f"not in the chart cache {tmp_path / 'cache'}, and not pulled (--no-pull)")


def test_a_chart_cache_that_cannot_be_created_says_so(helm, tmp_path):
    (tmp_path / "cache").write_text("a file where the chart cache should be")
    charts = ChartRepositories(helm, tmp_path / "cache" / "charts")
    chart = ChartRef("jobset", "0.12.0", "https://any.example")
    assert (charts.find(chart), charts.why_missing(chart)) == (
        None, f"not pulled: the chart cache {tmp_path / 'cache' / 'charts'} cannot be used (Not a directory)")
