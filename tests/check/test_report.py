"""fabctl check as a whole: both stack files deploy in order, findings can be accepted with a reason, every rule is named."""

from __future__ import annotations

import inspect
import re

from helpers import config_errors, site_raw
from small_site import small_site

import fabctl.check as check_module
from components.config import CHECK_RULES, parse_site
from fabctl.check import check
from fabctl.render import HELM_RELEASE_TYPE


def test_each_stack_file_deploys_with_no_error(plan, releases_of):
    releases, missing = releases_of(plan.stack)
    report = check(plan, parse_site(site_raw(plan.stack)), releases, missing)
    assert report.objects > len(plan.manifests())
    assert [f.line() for f in report.errors] == []


def test_every_release_of_each_stack_file_is_rendered_or_listed_missing(plan, releases_of):
    releases, missing = releases_of(plan.stack)
    assert sorted([r.release["urn"] for r in releases] + [m.release["urn"] for m in missing]) == sorted(
        r["urn"] for r in plan.of_type(HELM_RELEASE_TYPE)
    )


def _vllm_untolerated(small) -> None:
    (deployment,) = [d for d in small.plan.objects("Deployment", "site-t-gpu") if d["metadata"]["name"] == "vllm-qwen3-8b"]
    deployment["spec"]["template"]["spec"]["tolerations"] = []


def test_an_accepted_finding_is_reported_with_its_reason_and_blocks_nothing(small):
    _vllm_untolerated(small)
    raw = small_site()
    raw["check"] = {"accept": [{"rule": "scheduling.fit", "cluster": "gpu", "object": "Deployment inference/vllm-qwen3-8b",
                                "reason": "the inference pool is added next week"}]}
    small.site = parse_site(raw)
    report = small.report()
    (finding,) = [f for f in report.findings if f.rule == "scheduling.fit"]
    assert (report.errors, finding.line().rsplit("; ", 1)[1]) == ([], "accepted: the inference pool is added next week")


def test_an_acceptance_that_matches_nothing_is_reported(small):
    raw = small_site()
    raw["check"] = {"accept": [{"rule": "scheduling.fit", "cluster": "gpu", "object": "Deployment inference/gone",
                                "reason": "kept from an older plan"}]}
    small.site = parse_site(raw)
    assert small.report().unmatched == [
        "check.accept[0] (scheduling.fit gpu Deployment inference/gone) matches no finding; remove it"
    ]


def test_the_summary_counts_findings_and_releases(small):
    _vllm_untolerated(small)
    summary = small.report().summary()
    assert summary.startswith("check site-t: 1 errors, 2 releases NOT checked, 0 accepted, 0 notes; 18 of 20 releases rendered; ")


def test_fails_when_an_acceptance_names_an_unknown_rule():
    raw = small_site()
    raw["check"] = {"accept": [{"rule": "order", "cluster": "gpu", "object": "Deployment a/b", "reason": "a long enough reason"}]}
    assert config_errors(raw) == [
        "fab-platform:site.check.accept[0].rule: Input should be " + ", ".join(f"'{r}'" for r in CHECK_RULES[:-1])
        + f" or '{CHECK_RULES[-1]}' (got 'order')"
    ]


def test_fails_when_an_acceptance_names_an_unknown_cluster():
    raw = small_site()
    raw["check"] = {"accept": [{"rule": "references", "cluster": "gpu2", "object": "Deployment a/b", "reason": "a long enough reason"}]}
    assert config_errors(raw) == [
        "fab-platform:site.check.accept[0].cluster: 'gpu2' is not a cluster of this site; clusters: compute, gpu, storage"
    ]


def test_fails_when_an_existing_object_is_not_kind_and_name():
    raw = small_site()
    raw["check"] = {"existing": {"gpu": ["secret/registry-pull"]}}
    assert config_errors(raw) == [
        "fab-platform:site.check.existing.gpu[0]: must be `Kind namespace/name` or `Kind name` (cluster-scoped), for example "
        "`Secret fdc/registry-pull` (got 'secret/registry-pull')"
    ]


def test_the_rules_the_check_reports_are_exactly_those_config_can_accept():
    source = "".join(inspect.getsource(m) for m in (
        check_module.order, check_module.references, check_module.readiness, check_module.scheduling, check_module.pins,
        check_module.values, check_module.mirror,
        check_module.settings,
        check_module.trust,
    ))
    assert set(re.findall(r'Finding(?:\.of)?\(\s*"([^"]+)"', source)) == set(CHECK_RULES)
