"""Secrets in Git: the checked-in stack files carry none (a ciphertext of another stack's key, or a fake one, stops a real
`pulumi preview`); fabctl renders the ones a site needs as redacted stand-ins and says so."""

from __future__ import annotations

from pathlib import Path

import yaml

from fabctl.render import PROJECT_DIR, with_secret_stand_ins
from fabctl.stackfile import SITE_KEY
from helpers import copy_project, fabctl_in_process
from small_site import small_site


def external_catalog_site() -> dict:
    site = small_site()
    site.setdefault("compute", {})["trino"] = {"external_catalogs": {"erp": {
        "connector": "postgresql", "host": "erp-db.corp.example", "cidrs": ["172.20.8.0/28"], "database": "erp", "user": "trino_ro",
    }}}
    return {SITE_KEY: site}


def test_no_checked_in_stack_file_holds_a_secret_value():
    """This repository's stack files are the sites' config without their stack keys: any `secure:` text here would be
    another key's ciphertext or a fake one. (A site's own stack file holds its real ciphertext, which fabctl stands in.)"""
    files = sorted(PROJECT_DIR.glob("Pulumi.*.yaml"))
    held = {path.name: [key for key, value in (yaml.safe_load(path.read_text())["config"] or {}).items()
                        if isinstance(value, dict) and "secure" in value] for path in files}
    assert held == {path.name: [] for path in files}


def test_a_secret_the_site_needs_and_the_config_does_not_set_gets_a_stand_in():
    config, stand_ins = with_secret_stand_ins(external_catalog_site())
    assert (stand_ins, config["trinoCatalogPassword-erp"]) == (("trinoCatalogPassword-erp",), {"secure": "fabctl-offline-stand-in"})


def test_a_secret_the_config_sets_is_kept():
    config = {**external_catalog_site(), "fab-platform:trinoCatalogPassword-erp": {"secure": "v1:abc"}}
    assert with_secret_stand_ins(config) == (config, ())


def test_a_config_the_program_refuses_gets_no_stand_in():
    config = {SITE_KEY: {"name": 7}}
    assert with_secret_stand_ins(config, Path(PROJECT_DIR)) == (config, ())


def test_fabctl_names_each_stand_in_and_the_command_that_sets_it(tmp_path):
    project = copy_project(tmp_path)
    (project / "Pulumi.site-t.yaml").write_text(yaml.safe_dump({"config": external_catalog_site()}))
    run = fabctl_in_process("plan", "--stack", "site-t", "--out", str(tmp_path / "out"), "--project-dir", str(project),
                            "--no-policies", "--no-check")
    assert (run.returncode, run.stderr) == (0, (
        "note: fab-platform:trinoCatalogPassword-erp is not set on site-t: rendered with a redacted stand-in; before pulumi up: "
        "pulumi config set --secret trinoCatalogPassword-erp <value>\n"))


def test_a_diff_names_a_stand_in_once_though_it_renders_twice(tmp_path):
    project = copy_project(tmp_path)
    (project / "Pulumi.site-t.yaml").write_text(yaml.safe_dump({"config": external_catalog_site()}))
    run = fabctl_in_process("diff", "--stack", "site-t", "--project-dir", str(project), "--set", "site.teams.yield.description=Yield")
    assert (run.returncode, run.stdout.splitlines()[0]) == (0, "~ identity-team-yield (keycloak:index/group:Group): description")
    assert [line for line in run.stderr.splitlines() if line.startswith("note:")] == [
        "note: fab-platform:trinoCatalogPassword-erp is not set on site-t: rendered with a redacted stand-in; before pulumi up: "
        "pulumi config set --secret trinoCatalogPassword-erp <value>"]
