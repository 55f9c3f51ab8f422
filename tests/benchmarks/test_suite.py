"""The suite's benchmark (benchmarks/suite.py) reads where the time goes from pytest's JUnit report: checked on a report
written here, without running the suite."""

from __future__ import annotations

import pytest

from benchmarks.suite import TOP_LEVEL, Directory, directory_of, per_directory

REPORT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest">
<testcase classname="tests.components.test_storage" name="test_a" time="1.5"/>
<testcase classname="tests.components.test_storage" name="test_b" time="0.5"/>
<testcase classname="tests.policies.test_pack" name="test_c" time="4.25"/>
<testcase classname="tests.test_manifests" name="test_d" time="3.0"/>
</testsuite></testsuites>
"""


@pytest.mark.parametrize(("classname", "directory"), [
    ("tests.components.test_storage", "tests/components"),
    ("tests.test_manifests", TOP_LEVEL),
    ("tests.fabctl.test_cli", "tests/fabctl"),
])
def test_a_tests_directory_comes_from_its_class_name(classname, directory):
    assert directory_of(classname) == directory


def test_the_time_of_each_directory_is_its_tests_summed_slowest_first(tmp_path):
    report = tmp_path / "junit.xml"
    report.write_text(REPORT)
    assert per_directory(report) == [Directory("tests/policies", 1, 4.25), Directory(TOP_LEVEL, 1, 3.0),
                                     Directory("tests/components", 2, 2.0)]
