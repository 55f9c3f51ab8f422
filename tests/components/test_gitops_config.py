"""Serving through Git in the config (issue 18): inference delivered by Argo CD needs Argo CD and its repository, is a
roadmap phase 03 feature, and adds the one flow Argo CD needs: its controller on compute to the serving API server."""

from __future__ import annotations

from helpers import config_errors
from small_site import SERVING_REPO, full_site, small_site, with_argocd

from components.config import Flow, parse_site

ARGOCD_FLOW = Flow(
    description="Argo CD on compute applies the serving repository through the serving cluster's API server.",
    sources=["compute"], to=["gpu"], port=6443, target="kube-apiserver",
    from_namespace="argocd", from_labels={"app.kubernetes.io/name": "argocd-application-controller"},
)


def argocd_flow(**changes) -> dict:
    return {"from": ["compute"], "to": ["gpu"], "port": 6443, "target": "kube-apiserver", "from_namespace": "argocd", **changes}


def test_fails_when_delivery_is_argocd_without_argocd():
    site = small_site()
    site["inference"]["delivery"] = "argocd"
    site["compute"]["argocd"] = {"serving_repo": {"url": SERVING_REPO}}
    assert config_errors(site) == [
        ("fab-platform:site.inference.delivery: 'argocd' needs Argo CD, but compute.argocd.enabled is false: set "
         "compute.argocd.enabled: true, or keep delivery: pulumi")
    ]


def test_fails_when_delivery_is_argocd_without_a_serving_repository():
    site = with_argocd(small_site())
    del site["compute"]["argocd"]["serving_repo"]
    assert config_errors(site) == [
        ("fab-platform:site.inference.delivery: 'argocd' needs the serving repository Argo CD applies, but "
         "compute.argocd.serving_repo is not set: add it (its url, on the site's Git server), or keep delivery: pulumi")
    ]


def test_fails_when_argocd_comes_before_phase_3():
    site = with_argocd(small_site())
    site["phase"] = 2
    assert config_errors(site) == [
        ("fab-platform:site.compute.argocd.enabled: true runs Argo CD on compute: serving through Git (Argo CD on compute "
         "applying the serving repository) comes in phase 03 (training pipeline) and the site is at phase 2; do without it "
         "until phase 02 is done and phase is 3 (docs/roadmap.md), or list gitops-serving in early_features")
    ]


def test_argocd_may_come_early_when_the_site_says_so():
    site = with_argocd(small_site())
    site.update(phase=2, early_features=["gitops-serving"])
    assert parse_site(site).compute.argocd.enabled


def test_the_default_table_lets_argo_cd_reach_the_serving_api_server_while_it_delivers():
    assert parse_site(with_argocd(small_site())).flow_table()["argocd"] == ARGOCD_FLOW


def test_a_stacks_own_table_gets_argo_cds_flow_where_it_lacks_it():
    site = with_argocd(small_site(flow_table=True))
    assert parse_site(site).flow_table()["argocd"] == ARGOCD_FLOW


def test_argo_cd_gets_no_flow_while_pulumi_delivers():
    site = with_argocd(small_site())
    site["inference"]["delivery"] = "pulumi"
    assert "argocd" not in parse_site(site).flow_table()


def test_a_stacks_own_argocd_flow_is_accepted():
    site = with_argocd(full_site())
    site["flows"]["argocd"] = argocd_flow()
    assert parse_site(site).flows["argocd"].to == ["gpu"]


def test_fails_when_argo_cds_flow_is_listed_while_argo_cd_does_not_deliver():
    site = full_site()
    site["flows"]["argocd"] = argocd_flow()
    assert config_errors(site) == [
        ("fab-platform:site.flows.argocd.from_namespace: 'argocd' lets Argo CD reach API servers, but Argo CD applies nothing "
         "on this site (it needs compute.argocd.enabled true and inference.delivery argocd); remove the flow")
    ]


def test_fails_when_argo_cds_flow_reaches_another_api_server():
    site = with_argocd(full_site())
    site["flows"]["argocd"] = argocd_flow(to=["gpu", "gpu-train"])
    assert config_errors(site) == [
        ("fab-platform:site.flows.argocd.to[1]: 'gpu-train' is not the serving cluster (inference.cluster 'gpu'); Argo CD "
         "reaches only the API server of the cluster it applies the serving repository to: remove it")
    ]


def test_fails_when_argo_cds_flow_comes_from_another_cluster():
    site = with_argocd(full_site())
    site["flows"]["argocd"] = argocd_flow(**{"from": ["compute", "storage"]})
    assert config_errors(site) == [
        ("fab-platform:site.flows.argocd.from[1]: 'storage' is a storage cluster; Argo CD runs on the compute cluster, the only "
         "source of its flow: remove it")
    ]
