"""What the report shows, computed once from a render and its site config (fabctl/report/model.py)."""

from __future__ import annotations

import json
import re

import pytest
from helpers import render_small
from report_site import report_site, with_protected_resource_gone
from small_site import SERVING_REPO_TOKEN, add_bucket, small_site, with_argocd, write_flow_table

from components.config import parse_site
from fabctl.render import Plan
from fabctl.report import Guards, html, page_data
from fabctl.report.model import REDACTED, config_warnings, outside_sources, quota_rows, resource_inputs


@pytest.fixture(scope="module")
def site_and_plan():
    raw = report_site()
    return parse_site(raw), render_small(raw)


@pytest.fixture(scope="module")
def data(site_and_plan):
    site, plan = site_and_plan
    return page_data(plan, site, Guards())


def test_every_resource_the_stack_registers_is_in_the_tree_once(data, site_and_plan):
    _, plan = site_and_plan
    custom = [r["urn"] for r in plan.resources if r["custom"]]
    assert custom
    assert sorted((e.logical_name, e.type) for e in data.tree) == sorted((r["name"], r["type"]) for r in plan.resources if r["custom"])


def test_clusters_are_listed_storage_compute_then_gpu_with_their_roles(data):
    assert [(c.key, c.name, c.role) for c in data.clusters] == [
        ("storage", "site-t-storage", "storage"), ("compute", "site-t-compute", "compute"), ("gpu", "site-t-gpu", "gpu")]


def test_the_active_profile_comes_first(data):
    assert data.profiles == ["day", "night"]


def test_gpu_pools_are_counted_per_profile(data):
    assert [(p.pool, p.profile, p.nodes, p.gpus, p.gpu_types) for p in data.pools] == [
        ("inference", "day", 1, 8, "1 x h100"), ("training", "day", 1, 8, "1 x h100"),
        ("inference", "night", 1, 8, "1 x h100"), ("training", "night", 1, 8, "1 x h100")]


def test_a_model_is_sized_per_profile_as_the_inference_pool_sizes_it(data):
    """qwen3-8b (bf16, 36 layers, 8 KV heads of 128) on an H100: 8.2e9 x 2 bytes = 15.3 GiB of weights; 2 x 36 x 8 x 128
    x 2 = 147456 bytes of KV cache per token; 54.4 GiB of KV cache per GPU hold 193 sequences of 2048 tokens. By day two
    replicas, at night the one the profile asks for."""
    assert [(m.profile, m.weights_per_gpu_gib, m.kv_bytes_per_token, m.kv_cache_per_gpu_gib, m.tensor_parallel, m.replicas,
             m.gpus, m.sequences, m.concurrent_sequences) for m in data.models] == [
        ("day", 15.3, 147456, 54.4, 1, 2, 2, 386, 64), ("night", 15.3, 147456, 54.4, 1, 1, 1, 193, 64)]


def test_headroom_is_the_share_of_the_asked_concurrency_held_beyond_it(data):
    """386 sequences held for 64 asked: 503% more; 193 at night: 202% more."""
    assert [(m.profile, m.headroom_percent) for m in data.models] == [("day", 503), ("night", 202)]


def test_team_quotas_follow_the_profile_with_their_borrowing_and_lending_limits(data):
    assert [(q.team, q.cluster, q.profile, q.gpus, q.borrowing_limit_gpus, q.lending_limit_gpus) for q in data.quotas] == [
        ("yield", "gpu", "day", 4, 2, None), ("yield", "gpu", "night", 8, None, None)]


def test_the_flow_matrix_says_compute_may_reach_the_inference_gateway(data):
    assert "inference 443/TCP" in data.matrix["compute"]["gpu"]


def test_a_profile_short_of_a_models_concurrency_is_a_config_warning():
    raw = report_site()
    raw["inference"]["models"]["qwen3-8b"]["concurrent_sequences"] = 512
    site = parse_site(raw)
    data = page_data(render_small(raw), site, Guards())
    night = next(row for row in data.models if row.profile == "night")
    assert data.guards.warnings == [
        (f"qwen3-8b under night: 1 replicas hold {night.sequences} sequences of the mean context, short of "
         f"concurrent_sequences 512 ({night.headroom_percent}%): requests queue at peak")
    ]


def test_a_secrets_values_are_hidden_even_where_they_are_not_pulumi_secrets():
    resource = {"inputs": {"kind": "Secret", "metadata": {"name": "s"}, "stringData": {"token": "plain", "ca.crt": "[secret]"},
                           "data": {"x": "cGxhaW4="}}}
    assert resource_inputs(resource) == {"kind": "Secret", "metadata": {"name": "s"},
                                         "stringData": {"token": REDACTED, "ca.crt": "[secret]"}, "data": {"x": REDACTED}}


def test_a_text_under_a_key_that_names_a_credential_is_hidden():
    resource = {"inputs": {"values": {"auth": {"password": "hunter2", "client_secret": "s3cr3t", "enabled": True}}}}
    assert resource_inputs(resource) == {"values": {"auth": {"password": REDACTED, "client_secret": REDACTED, "enabled": True}}}


def test_where_a_credential_is_kept_stays_visible():
    """Reviewers see which Secret a pod reads: a reference to a credential is no credential."""
    env = {"name": "PGPASSWORD", "valueFrom": {"secretKeyRef": {"name": "polaris-db", "key": "password"}}}
    resource = {"inputs": {"spec": {"env": [env], "passwordSecret": {"name": "pg"}, "passwordKey": "password"}}}
    assert resource_inputs(resource) == resource["inputs"]


def test_the_password_of_a_url_is_hidden():
    resource = {"inputs": {"data": {"uri": "postgresql://polaris:hunter2@pg-rw.polaris:5432/polaris"}}}
    assert resource_inputs(resource) == {"data": {"uri": "postgresql://polaris:[redacted]@pg-rw.polaris:5432/polaris"}}


def test_the_page_never_holds_a_secret_config_value():
    raw = with_argocd(small_site())
    plan = render_small(raw, secrets=SERVING_REPO_TOKEN)
    page = html(page_data(plan, parse_site(raw), Guards()))
    assert "[secret]" in page
    assert ("serving-repo-token" in page, "c2VydmluZy1yZXBvLXRva2Vu" in page) == (False, False)


def test_text_from_the_stack_file_is_escaped_not_markup():
    raw = report_site()
    raw["teams"]["yield"]["description"] = "<script>alert(1)</script>"
    page = html(page_data(render_small(raw), parse_site(raw), Guards()))
    assert "<script>alert(1)</script>" not in page
    assert "\\u003cscript\\u003ealert(1)\\u003c/script\\u003e" in page


def test_deleting_a_protected_resource_is_a_protected_change(site_and_plan):
    site, plan = site_and_plan
    saved = with_protected_resource_gone(plan.to_json())
    before = Plan(stack=saved["stack"], resources=saved["resources"], outputs=saved["outputs"])
    data = page_data(plan, site, Guards(), before, "plan.json")
    assert [(c.action, c.logical_name, c.protected) for c in data.changes] == [
        ("deleted", "storage-bucket-site-t-checkpoints-old", True)]


def test_the_page_is_one_file_that_names_no_other(data):
    page = html(data)
    assert json.loads(page.split('<script type="application/json" id="inputs-data">')[1].split("</script>")[0]) == data.inputs
    assert ("src=" in page, "href=\"http" in page, "@import" in page, "url(http" in page) == (False, False, False, False)


def test_a_federated_sites_range_is_named_as_that_site():
    raw = small_site()
    add_bucket(raw, "site-t-gold", "gold")
    raw["federation"] = {"consumers": {"site-x": {}}, "ranges": {"site-x": ["10.200.0.0/16"]}}
    assert outside_sources(parse_site(raw)) == {"world": "outside the site", "10.200.0.0/16": "site-x (federated site)"}


def test_without_an_active_profile_the_base_config_comes_first():
    """`pulumi up` applies the base config; the profiles are what a schedule switches to."""
    raw = report_site()
    del raw["active_profile"]
    assert page_data(render_small(raw), parse_site(raw), Guards()).profiles == ["(base config)", "day", "night"]


def test_nodes_a_profile_moves_are_counted_in_their_new_pool():
    raw = report_site()
    raw["gpu"]["gpu"]["nodes"]["gpu-inf-2"] = {"gpu_type": "h100", "gpus": 8, "pool": "inference"}
    raw["profiles"]["night"]["node_pools"] = {"gpu": {"gpu-inf-2": "training"}}
    del raw["profile_schedule"]  # a scheduled switch never moves nodes: `pulumi up` with active_profile night does
    data = page_data(render_small(raw), parse_site(raw), Guards())
    assert [(p.pool, p.profile, p.nodes, p.gpus) for p in data.pools] == [
        ("inference", "day", 2, 16), ("training", "day", 1, 8), ("inference", "night", 1, 8), ("training", "night", 2, 16)]


def test_a_peers_team_has_quotas_here_only_once_the_peer_is_linked():
    raw = report_site()
    add_bucket(raw, "site-t-gold", "gold")
    raw["federation"] = {"peers": {"site-x": {"remote_training": {"yield": {"gpu": {"gpus": 0, "borrowing_limit_gpus": 4}}}}},
                         "ranges": {"site-x": ["10.200.0.0/16"]}}
    unlinked = parse_site(raw)
    raw["federation"]["linked"] = ["site-x"]
    linked = parse_site(raw)  # the render would read site-x's consent from its stack: the quotas come from the config
    assert [q.peer for q in quota_rows(unlinked, ["day", "night"])] == [None, None]
    assert config_warnings(unlinked, []) == [("federation.peers.site-x: its teams' quotas (yield) take effect once site-x "
                                              "is in federation.linked")]
    assert [(q.team, q.peer, q.cluster, q.profile, q.gpus, q.borrowing_limit_gpus)
            for q in quota_rows(linked, ["day", "night"]) if q.peer] == [
        ("yield", "site-x", "gpu", "day", 0, 4), ("yield", "site-x", "gpu", "night", 0, 4)]


def test_a_flows_description_is_escaped_in_the_diagram_and_the_table():
    raw = report_site()
    write_flow_table(raw)
    raw["flows"]["inference"]["description"] = "<img src=x onerror=alert(1)>"
    page = html(page_data(render_small(raw), parse_site(raw), Guards()))
    assert "<img src=x" not in page
    assert page.count("&lt;img src=x onerror=alert(1)&gt;") == 2


def test_the_page_says_which_guard_did_not_run(data):
    assert '<span class="muted" id="guards-not-run">(policy pack and deploy check not run)</span>' in html(data)


def test_egress_to_an_external_database_is_a_column_of_the_flow_matrix():
    raw = report_site()
    raw["compute"]["trino"] = {"external_catalogs": {"erp": {"connector": "postgresql", "host": "10.200.0.5",
                                                             "cidrs": ["10.200.0.5/32"], "database": "erp", "user": "trino"}}}
    plan = render_small(raw, secrets={"fab-platform:trinoCatalogPassword-erp": {"secure": "v1:ZXJw"}})
    data = page_data(plan, parse_site(raw), Guards())
    assert data.matrix_columns[-1] == "world"
    assert data.matrix["compute"]["world"] == ["trino-catalog-erp 5432/TCP to 10.200.0.5/32"]


def test_the_check_headline_says_how_many_releases_were_not_checked_beside_its_errors(small):
    """../shared/charts has no Airflow or Superset package: the headline says so in the words of its errors, and is not
    green."""
    page = html(page_data(small.plan, small.site, Guards(check=small.report())))
    assert '<p id="check-state" class="warn"><b id="check-headline">0 errors · 2 releases NOT checked</b><br>check site-t: ' in page


def test_the_check_headline_is_green_only_when_every_release_was_checked(small):
    small.missing = []
    page = html(page_data(small.plan, small.site, Guards(check=small.report())))
    assert '<p id="check-state" class="good"><b id="check-headline">0 errors · all 18 releases checked</b>' in page


def test_the_header_counts_the_releases_not_checked_beside_the_blocking_findings(small):
    page = html(page_data(small.plan, small.site, Guards(check=small.report())))
    assert ('<li class="warn"><span class="number" id="count-blocking">0</span> blocking guard findings · <span class="number" '
            'id="count-unchecked">2</span> releases NOT checked') in page


def test_each_release_not_checked_is_listed_with_why(small, chart_dir):
    page = html(page_data(small.plan, small.site, Guards(check=small.report())))
    airflow, superset = "airflow 1.22.0 (https://airflow.apache.org)", "superset 0.22.4 (https://apache.github.io/superset)"
    assert re.findall(r"<li><b>NOT checked:</b> (.*?)</li>", page) == [
        f"site-t-compute compute-airflow ({airflow}): no package of {airflow} in {chart_dir}",
        f"site-t-compute compute-superset ({superset}): no package of {superset} in {chart_dir}",
    ]
