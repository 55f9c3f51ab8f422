"""Phase 04's metrics check (fabctl/verify/criteria/phase_04.py metric_queries): one query per ServiceMonitor and PodMonitor the
cluster's Prometheus really scrapes (components/monitors.py), each on the cluster's `cluster` label, and the DCGM count."""

from __future__ import annotations

import pytest
from small_site import add_observability, full_site

from components import monitors
from components.config import parse_site
from fabctl.verify.criteria import criteria
from fabctl.verify.criteria.blocks import Site
from fabctl.verify.criteria.phase_04 import metric_queries


def site(**clusters) -> Site:
    raw = full_site()
    add_observability(raw)  # in-cluster: compute's Prometheus holds every cluster's series
    for key, settings in clusters.items():
        raw["clusters"][key].update(settings)
    return Site(parse_site(raw))


@pytest.fixture(scope="module")
def full() -> Site:
    return site()


def test_compute_is_queried_for_each_of_its_monitors_only(full):
    assert sorted(metric_queries(full, "compute")) == [
        "cilium-agent", "cilium-operator", "envoy-proxies", "kueue", "spark-operator", "starrocks"]


def test_every_cluster_is_queried_for_what_its_prometheus_scrapes(full):
    for key, scope in monitors.metrics_scopes(full.config).items():
        queried = set(metric_queries(full, key)) - {"dcgm_gpus"}
        assert queried == {m["metadata"]["name"] for m in monitors.scrape_targets(scope)}


def test_a_podmonitors_targets_are_matched_by_the_job_the_operator_gives_them(full):
    assert metric_queries(full, "compute")["spark-operator"] == (
        'count(up{cluster="site-t-compute", namespace="spark-operator", job="monitoring/spark-operator"} == 1)', 1)


def test_a_servicemonitors_targets_are_matched_by_their_endpoint(full):
    assert metric_queries(full, "gpu")["kueue"] == (
        'count(up{cluster="site-t-gpu", namespace="kueue-system", endpoint=~"https"} == 1)', 1)


def test_cilium_is_matched_by_its_own_jobs_not_by_kube_systems_other_targets(full):
    queries = metric_queries(full, "storage")
    assert queries["cilium-agent"] == (
        'count(up{cluster="site-t-storage", namespace="kube-system", job="monitoring/cilium-agent"} == 1)', 1)
    assert queries["cilium-operator"] == (
        'count(up{cluster="site-t-storage", namespace="kube-system", job="monitoring/cilium-operator"} == 1)', 1)


def test_every_query_is_on_the_clusters_own_label(full):
    for key in full.config.clusters:
        for query, _ in metric_queries(full, key).values():
            assert f'{{cluster="site-t-{key}"' in query


def test_dcgm_counts_the_gpus_of_the_cluster_on_its_label(full):
    assert metric_queries(full, "gpu-train")["dcgm_gpus"] == ('count(DCGM_FI_DEV_GPU_UTIL{cluster="site-t-gpu-train"})', 8)


def test_cilium_is_not_queried_where_the_program_does_not_install_it():
    queries = metric_queries(site(storage={"cilium": {"managed": False}}), "storage")
    assert sorted(queries) == ["aistor", "polaris", "polaris-db"]


def test_the_criterion_passes_each_query_to_the_probe(full):
    check = next(c for c in criteria(full.config, 4) if c.id == "04-metrics-gpu-train")
    job = next(o for o in check.steps[0].objects if o["kind"] == "Job")
    assert job["spec"]["template"]["spec"]["containers"][0]["args"] == [
        "prom", "http://metrics-prometheus.monitoring:9090",
        'cilium-agent=count(up{cluster="site-t-gpu-train", namespace="kube-system", job="monitoring/cilium-agent"} == 1)',
        'cilium-operator=count(up{cluster="site-t-gpu-train", namespace="kube-system", job="monitoring/cilium-operator"} == 1)',
        'dcgm-exporter=count(up{cluster="site-t-gpu-train", namespace="gpu-operator", endpoint=~"gpu-metrics"} == 1)',
        'dcgm_gpus=count(DCGM_FI_DEV_GPU_UTIL{cluster="site-t-gpu-train"})',
        'kueue=count(up{cluster="site-t-gpu-train", namespace="kueue-system", endpoint=~"https"} == 1)',
    ]

