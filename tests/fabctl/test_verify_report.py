"""The reports of `fabctl verify`: JUnit XML (parsed back and checked against the structure of the Jenkins junit-10
schema: no XSD is available offline, so its rules that matter are asserted here) and Markdown."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from fabctl.verify.report import ERROR, FAIL, INCOMPLETE, PASS, SKIPPED, WAIVED, Outcome, junit, markdown, summary

NCCL = Outcome(1, "01-nccl-under-load", FAIL, "busbw fell 31 % under load (182.4 -> 125.9 GB/s); at most 20 % allowed",
               "NCCL all_reduce under storage load", {"0.busbw_gbps": "182.4", "0.succeeded": "true", "1.busbw_gbps": "125.9",
                                                      "1.succeeded": "true"}, "reduction <= 20 %", 812.25)
GPUS = Outcome(1, "01-gpus-gpu-1", PASS, "8 GPUs seen, 8 configured", "GPUs recognised on gpu-1",
               {"0.gpus": "8", "0.succeeded": "true"}, "gpus == 8", 31.5)
S3 = Outcome(1, "01-s3-from-gpu", ERROR, "a cluster of the criterion cannot be reached: connection refused", "S3 from a GPU pod")
CHAT = Outcome(2, "02-chat-completion", SKIPPED, "the site serves no models (no inference section)")
OUTCOMES = [CHAT, NCCL, S3, GPUS]
"""Out of order on purpose: the report sorts by phase, then criterion id."""


def parsed() -> ET.Element:
    return ET.fromstring(junit("site-t", OUTCOMES))


def test_junit_has_one_suite_per_phase_with_its_counts():
    root = parsed()
    assert (root.tag, root.attrib) == ("testsuites", {"name": "fab.verify.site-t", "tests": "4", "failures": "1", "errors": "1",
                                                      "skipped": "1", "time": "843.750"})
    assert [s.attrib for s in root] == [
        {"name": "phase-01", "tests": "3", "failures": "1", "errors": "1", "skipped": "0", "time": "843.750"},
        {"name": "phase-02", "tests": "1", "failures": "0", "errors": "0", "skipped": "1", "time": "0.000"},
    ]


def test_junit_has_one_case_per_criterion_in_id_order():
    cases = parsed().findall("testsuite/testcase")
    assert [c.attrib for c in cases] == [
        {"name": "01-gpus-gpu-1", "classname": "fab.verify.site-t", "time": "31.500"},
        {"name": "01-nccl-under-load", "classname": "fab.verify.site-t", "time": "812.250"},
        {"name": "01-s3-from-gpu", "classname": "fab.verify.site-t", "time": "0.000"},
        {"name": "02-chat-completion", "classname": "fab.verify.site-t", "time": "0.000"},
    ]


def test_junit_marks_a_failed_criterion_with_failure_and_its_message():
    (case,) = parsed().findall("testsuite/testcase[@name='01-nccl-under-load']")
    assert [(e.tag, e.attrib) for e in case] == [("failure", {"message": NCCL.message}), ("system-out", {})]


def test_junit_marks_a_runner_error_with_error():
    (case,) = parsed().findall("testsuite/testcase[@name='01-s3-from-gpu']")
    assert [(e.tag, e.attrib) for e in case] == [("error", {"message": S3.message}), ("system-out", {})]


def test_junit_marks_a_criterion_that_does_not_apply_as_skipped():
    (case,) = parsed().findall("testsuite/testcase[@name='02-chat-completion']")
    assert [(e.tag, e.attrib) for e in case] == [("skipped", {"message": CHAT.message})]


def test_junit_leaves_a_passed_criterion_without_failure():
    (case,) = parsed().findall("testsuite/testcase[@name='01-gpus-gpu-1']")
    assert [e.tag for e in case] == ["system-out"]


def test_junit_suite_properties_hold_the_bounds_and_the_figures():
    (phase1, _) = parsed()
    assert [(p.get("name"), p.get("value")) for p in phase1.findall("properties/property")] == [
        ("verdict", "FAILED"), ("01-gpus-gpu-1.bound", "gpus == 8"), ("01-gpus-gpu-1.0.gpus", "8"), ("01-gpus-gpu-1.0.succeeded", "true"),
        ("01-nccl-under-load.bound", "reduction <= 20 %"), ("01-nccl-under-load.0.busbw_gbps", "182.4"), ("01-nccl-under-load.0.succeeded", "true"),
        ("01-nccl-under-load.1.busbw_gbps", "125.9"), ("01-nccl-under-load.1.succeeded", "true"),
    ]


def test_junit_follows_the_junit_10_element_order():
    """junit-10.xsd: a suite holds properties, then test cases; a case holds skipped, error, failure, then system-out."""
    order = {"testsuite": ["properties", "testcase"], "testcase": ["skipped", "error", "failure", "system-out"]}
    for parent in parsed().iter():
        if parent.tag in order:
            tags = [child.tag for child in parent]
            assert tags, parent.attrib
            assert tags == sorted(tags, key=order[parent.tag].index), parent.attrib


def test_junit_case_output_names_the_criterion_and_its_results():
    (out,) = parsed().findall("testsuite/testcase[@name='01-gpus-gpu-1']/system-out")
    assert out.text == "GPUs recognised on gpu-1\n0.gpus=8\n0.succeeded=true\n"


def test_junit_is_the_same_whatever_the_order_of_the_outcomes():
    assert junit("site-t", OUTCOMES) == junit("site-t", list(reversed(OUTCOMES)))


def test_markdown_has_a_table_per_phase_and_the_summary():
    assert markdown("site-t", OUTCOMES) == (
        "# fabctl verify: site-t\n\n"
        "## phase-01: FAILED\n\n"
        "| criterion | result | figures | bound | why |\n|---|---|---|---|---|\n"
        "| 01-gpus-gpu-1 | pass | 0.gpus=8 | gpus == 8 | 8 GPUs seen, 8 configured |\n"
        "| 01-nccl-under-load | fail | 0.busbw_gbps=182.4, 1.busbw_gbps=125.9 | reduction <= 20 % | "
        "busbw fell 31 % under load (182.4 -> 125.9 GB/s); at most 20 % allowed |\n"
        "| 01-s3-from-gpu | error | - | - | a cluster of the criterion cannot be reached: connection refused |\n\n"
        "## phase-02: PASSED\n\n"
        "| criterion | result | figures | bound | why |\n|---|---|---|---|---|\n"
        "| 02-chat-completion | skipped | - | - | the site serves no models (no inference section) |\n\n"
        "site-t phase-01, phase-02: FAILED: 1 passed, 1 failed, 1 errors, 0 incomplete, 0 waived, 1 skipped\n"
    )


def test_summary_passes_when_nothing_failed_or_errored():
    assert summary("site-t", [GPUS, CHAT]) == (
        "site-t phase-01, phase-02: PASSED: 1 passed, 0 failed, 0 errors, 0 incomplete, 0 waived, 1 skipped")


def test_markdown_escapes_a_pipe_in_a_message():
    odd = Outcome(1, "01-odd", FAIL, "exit 1 | see log")
    assert "| exit 1 \\| see log |" in markdown("site-t", [odd])


LOOP = Outcome(3, "03-serving-loop", INCOMPLETE, "required by phase 03 and not run: no serving-loop team")
WAIVED_NCCL = Outcome(1, "01-nccl-under-load-gpu-train", WAIVED, "waived: one node until March (acceptance.waivers); not run "
                      "because gpu-train has 1 training node(s)")


def test_summary_is_incomplete_when_a_required_criterion_did_not_run():
    assert summary("site-t", [GPUS, LOOP]) == (
        "site-t phase-01, phase-03: INCOMPLETE: 1 passed, 0 failed, 0 errors, 1 incomplete, 0 waived, 0 skipped")


def test_summary_passes_with_a_waived_criterion():
    assert summary("site-t", [GPUS, WAIVED_NCCL]).startswith("site-t phase-01: PASSED: ")


def test_junit_marks_an_incomplete_criterion_as_a_failure_of_type_incomplete():
    root = ET.fromstring(junit("site-t", [GPUS, LOOP]))
    (case,) = root.findall("testsuite/testcase[@name='03-serving-loop']")
    assert [(e.tag, e.attrib) for e in case] == [("failure", {"message": LOOP.message, "type": "incomplete"})]
    assert root.find("testsuite[@name='phase-03']").get("failures") == "1"
    assert root.find("testsuite[@name='phase-03']/properties/property").attrib == {"name": "verdict", "value": "INCOMPLETE"}


def test_junit_marks_a_waived_criterion_as_skipped_with_the_waiver():
    root = ET.fromstring(junit("site-t", [WAIVED_NCCL]))
    (case,) = root.findall("testsuite/testcase")
    assert [(e.tag, e.attrib) for e in case] == [("skipped", {"message": WAIVED_NCCL.message})]
    assert root.find("testsuite").get("skipped") == "1"


def test_markdown_names_an_incomplete_phase_in_its_heading():
    assert "## phase-03: INCOMPLETE\n" in markdown("site-t", [GPUS, LOOP])
