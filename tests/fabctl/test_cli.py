"""`python -m fabctl` as a user runs it: exit statuses, messages, the tree and the files it writes (through the CLI's entry
function, in process; `flows` also as a real process).

A run on site-a shows that the stack file plans; the other runs use stack files of small sites written into a copy of
the project, so that what they print does not change when a production stack grows."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from fabctl.render import PROJECT_DIR
from fabctl.stackfile import SITE_KEY
from helpers import CliRun, copy_project, fabctl_in_process, rendered
from small_site import full_site, small_site


def fabctl(*args: str) -> CliRun:
    return fabctl_in_process(*args)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A copy of the program and its stack files (federated sites read each other), to render stack files written by a test."""
    return copy_project(tmp_path)


def write_stack(project: Path, stack: str, config: dict) -> None:
    (project / f"Pulumi.{stack}.yaml").write_text(yaml.safe_dump({"config": config}))


def write_site(project: Path, stack: str, site: dict) -> None:
    write_stack(project, stack, {SITE_KEY: site})


@pytest.fixture(scope="module")
def site_a_run(tmp_path_factory) -> tuple[CliRun, Path]:
    out = tmp_path_factory.mktemp("out")
    return fabctl("plan", "--stack", "site-a", "--out", str(out), "--no-check"), out


def test_plan_renders_site_a_with_a_note_on_each_secret_it_stands_in_for(site_a_run):
    run, _ = site_a_run
    assert (run.returncode, run.stderr) == (0, (
        "note: fab-platform:trinoCatalogPassword-erp is not set on site-a: rendered with a redacted stand-in; before pulumi up: "
        "pulumi config set --secret trinoCatalogPassword-erp <value>\n"))


def test_plan_prints_a_tree_with_a_total_and_every_cluster(site_a_run):
    run, _ = site_a_run
    plan = rendered("site-a")
    custom = [r for r in plan.resources if r["custom"]]
    components = len(plan.resources) - len(custom)
    clusters = sorted(r["name"] for r in plan.of_type("pulumi:providers:kubernetes"))
    lines = run.stdout.splitlines()
    assert lines[0] == (
        f"site-a: {len(custom)} resources on {len(clusters)} clusters, 2 other providers and site-wide; {components} components"
    )
    for target in (*clusters, "site-a-minio", "site-a-keycloak"):
        count = sum(1 for r in custom if plan.target(r) == target)
        assert count and any(line.endswith(f"{target}: {count}") for line in lines), target
    assert lines[-2].startswith(f"{len(plan.manifests())} Kubernetes objects on {len(clusters)} clusters written to ")
    assert lines[-1] == "policies: 0 mandatory and 0 advisory violations"


def test_plan_writes_manifests_per_cluster(site_a_run):
    _, out = site_a_run
    manifests = out / "site-a" / "manifests"
    clusters = sorted(r["name"] for r in rendered("site-a").of_type("pulumi:providers:kubernetes"))
    assert clusters and sorted(p.name for p in manifests.iterdir()) == clusters
    deny = yaml.safe_load((manifests / "site-a-gpu" / "ciliumclusterwidenetworkpolicy-fab-default-deny-remote.yaml").read_text())
    assert (deny["apiVersion"], deny["kind"]) == ("cilium.io/v2", "CiliumClusterwideNetworkPolicy")
    assert len(list(manifests.rglob("*.yaml"))) == len(rendered("site-a").manifests())


def test_plan_json_records_every_resource_with_secrets_redacted(site_a_run):
    _, out = site_a_run
    text = (out / "site-a" / "plan.json").read_text()
    plan = json.loads(text)
    assert len(plan["resources"]) == len(rendered("site-a").resources)
    assert {"urn", "type", "name", "parent", "provider", "inputs", "dependencies", "protect", "retain_on_delete"} <= set(plan["resources"][0])
    assert "PRIVATE KEY" not in text


def test_plan_writes_the_helm_values_of_each_release(site_a_run):
    _, out = site_a_run
    values = yaml.safe_load((out / "site-a" / "releases" / "site-a-gpu" / "cilium.yaml").read_text())
    assert (values["chart"], values["version"]) == ("cilium", "1.18.3")
    assert values["values"]["tls"]["ca"]["key"] == "[secret]"


def test_fails_when_a_stack_file_has_overlapping_pod_cidrs(project, tmp_path):
    site = small_site()
    site["clusters"]["gpu"]["pod_cidr"] = "10.91.0.0/16"
    write_site(project, "overlap", site)
    run = fabctl("plan", "--stack", "overlap", "--project-dir", str(project), "--out", str(tmp_path / "out"))
    assert run.returncode == 1
    assert run.stderr.splitlines() == [
        "error: fab-platform:site.clusters.gpu.pod_cidr: 10.91.0.0/16 overlaps clusters.compute.pod_cidr "
        "(10.91.0.0/16); every pod, node and pool range of a site must be disjoint"
    ]
    assert not (tmp_path / "out").exists()


def test_fails_when_the_stack_file_does_not_exist(project):
    write_site(project, "site-t", small_site())
    stacks = ", ".join(sorted(p.name.removeprefix("Pulumi.").removesuffix(".yaml") for p in project.glob("Pulumi.*.yaml")))
    run = fabctl("plan", "--stack", "site-z", "--project-dir", str(project))
    assert "site-t" in stacks
    assert run.returncode == 2
    assert run.stderr == f"error: no stack file Pulumi.site-z.yaml in {project}; stacks: {stacks}\n"


def test_fails_when_a_stack_file_repeats_a_key(project):
    lines = (PROJECT_DIR / "Pulumi.site-b.yaml").read_text().splitlines()
    at = lines.index("        cluster_id: 3") + 1
    lines.insert(at, "        cluster_id: 4")
    (project / "Pulumi.dup.yaml").write_text("\n".join(lines))
    run = fabctl("plan", "--stack", "dup", "--project-dir", str(project))
    assert run.returncode == 1
    assert run.stderr == f"error: Pulumi.dup.yaml:{at + 1}: duplicate key 'cluster_id'; each key may appear once\n"


def test_fails_when_a_stack_file_is_not_yaml(project):
    (project / "Pulumi.broken.yaml").write_text("config:\n  fab-platform:site: [unclosed\n")
    run = fabctl("plan", "--stack", "broken", "--project-dir", str(project))
    assert run.returncode == 1
    assert run.stderr.startswith("error: Pulumi.broken.yaml:3: not valid YAML")


def test_fails_when_the_site_key_is_missing(project):
    write_stack(project, "empty", {"kubernetes:enableServerSideApply": True})
    run = fabctl("plan", "--stack", "empty", "--project-dir", str(project))
    assert run.returncode == 1
    assert run.stderr == "error: fab-platform:site: not set; add it to Pulumi.<stack>.yaml (see docs/configuration.md)\n"


def test_schema_check_passes_for_the_committed_schema():
    run = fabctl("schema", "--check")
    assert (run.returncode, run.stdout) == (0, "schema and configuration reference are up to date\n")


def test_fails_when_the_stack_violates_a_mandatory_policy(project, tmp_path):
    # A careless change to the program: the default deny lets the whole world in.
    policies = project / "components" / "network_policies.py"
    assert 'LOCAL_ENTITIES = ["host",' in policies.read_text()
    policies.write_text(policies.read_text().replace('LOCAL_ENTITIES = ["host",', 'LOCAL_ENTITIES = ["world", "host",'))
    write_site(project, "open-world", small_site())
    run = fabctl("plan", "--stack", "open-world", "--project-dir", str(project), "--out", str(tmp_path / "out"), "--no-check")
    assert run.returncode == 4
    assert run.stderr.splitlines() == [
        f"mandatory fab-flow-direction: CiliumClusterwideNetworkPolicy fab-default-deny-remote on site-t-{cluster} ({role}) "
        f"admits the world entity on every port; name the flow's port (network-{cluster}-policy-fab-default-deny-remote)"
        for cluster, role in (("compute", "compute"), ("gpu", "gpu"), ("storage", "storage"))
    ]
    assert run.stdout.splitlines()[-1] == "policies: 3 mandatory and 0 advisory violations"


def test_plan_can_skip_the_policy_pack(project, tmp_path):
    write_site(project, "quick", small_site())
    run = fabctl("plan", "--stack", "quick", "--project-dir", str(project), "--out", str(tmp_path / "out"), "--no-policies", "--no-check")
    assert run.returncode == 0
    assert "policies:" not in run.stdout


def test_diff_adding_a_team_lists_additions_the_gateway_policy_that_admits_it_and_the_submission_contract(project):
    write_site(project, "site-t", small_site())
    run = fabctl("diff", "--stack", "site-t", "--project-dir", str(project), "--set", "site.teams.litho={description: Lithography}")
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    changed = [line.split(" (")[0] for line in lines[:-1] if not line.startswith("+ ")]
    assert lines[-1].endswith("to add, 12 to change, 0 to replace, 0 to delete; 0 protected resources replaced or deleted")
    # Each model's JWT SecurityPolicy lists the teams it admits (default deny), Airflow's copy of the submission contract
    # lists each team's queue and its API server each team's role, JupyterHub marks and mounts each team's members, KubeRay
    # watches each team namespace, Spark's operator and YuniKorn take each team's Spark Connect namespace, Trino's rules and
    # their groups' sync name each team, and each cluster's isolation policy holds a rule per team: all change in place,
    # all else is added.
    # In the render's registration order, which varies between runs (the SDK registers concurrently).
    assert sorted(changed) == [
        "~ compute-airflow", "~ compute-jupyterhub", "~ compute-spark-operator", "~ compute-trino", "~ compute-trino-groups-sync",
        "~ compute-yunikorn", "~ inference-jwt-qwen3-8b", "~ network-compute-policy-fab-team-isolation",
        "~ network-gpu-policy-fab-team-isolation", "~ network-storage-policy-fab-team-isolation", "~ ray-gpu-kuberay",
        "~ training-compute-airflow-submission",
    ]
    assert len(lines) > 10


def test_fails_when_a_diff_deletes_a_protected_bucket(project):
    write_site(project, "site-t", small_site())
    run = fabctl("diff", "--stack", "site-t", "--project-dir", str(project), "--set", "site.storage.buckets.site-t-olap-v2={class: olap}",
                 "--unset", "site.storage.buckets.site-t-olap")
    assert run.returncode == 5
    assert ("- storage-bucket-site-t-olap (minio:index/s3Bucket:S3Bucket) deleted PROTECTED (a rename deletes and re-creates: "
            "keep the key, or move it with an alias)") in run.stdout.splitlines()


def test_diff_against_a_saved_plan(site_a_run):
    _, out = site_a_run
    run = fabctl("diff", "--stack", "site-a", "--against", str(out / "site-a" / "plan.json"), "--set", "site.compute.trino.workers=8")
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines() == [
        "~ compute-trino (kubernetes:helm.sh/v3:Release): values.server.workers",
        "0 to add, 1 to change, 0 to replace, 0 to delete; 0 protected resources replaced or deleted",
    ]


def test_fails_when_a_diff_gives_no_change():
    run = fabctl("diff", "--stack", "site-a")
    assert (run.returncode, run.stderr) == (2, "error: give --set PATH=VALUE, --unset PATH or --against PLAN_JSON\n")


def test_graph_names_every_cluster_and_every_flow(project, tmp_path):
    write_site(project, "site-t", full_site())
    out = tmp_path / "site-t.md"
    run = fabctl("graph", "--stack", "site-t", "--project-dir", str(project), "--out", str(out))
    assert run.returncode == 0, run.stderr
    text = out.read_text()
    assert sorted(line.split("[")[0].strip() for line in text.splitlines() if line.strip().startswith("subgraph ")) == [
        "subgraph site_t_compute", "subgraph site_t_gpu", "subgraph site_t_gpu_train", "subgraph site_t_storage",
    ]
    edges = {line.strip() for line in text.splitlines() if " --> " in line}
    assert edges == {
        'world -- "compute-ingress 443/TCP" --> site_t_compute',
        'site_t_compute -- "inference 443/TCP" --> site_t_gpu',
        'site_t_compute -- "multikueue 6443/TCP API" --> site_t_gpu',
        'site_t_compute -- "multikueue 6443/TCP API" --> site_t_gpu_train',
        'site_t_compute -- "polaris 8181/TCP" --> site_t_storage',
        'site_t_gpu -- "polaris 8181/TCP" --> site_t_storage',
        'site_t_gpu_train -- "polaris 8181/TCP" --> site_t_storage',
        'site_t_compute -- "s3 9000/TCP" --> site_t_storage',
        'site_t_gpu -- "s3 9000/TCP" --> site_t_storage',
        'site_t_gpu_train -- "s3 9000/TCP" --> site_t_storage',
        'world -- "s3-external 9000/TCP" --> site_t_storage',
        'site_t_compute -- "ray-fdc 10001/TCP" --> site_t_gpu',
        'site_t_compute -- "ray-fdc 10001/TCP" --> site_t_gpu_train',
        'site_t_compute -- "ray-yield 10001/TCP" --> site_t_gpu',
        'site_t_compute -- "ray-yield 10001/TCP" --> site_t_gpu_train',
    }


@pytest.mark.parametrize("stack", ["site-a", "site-b"])
def test_the_committed_graphs_are_current(stack):
    from fabctl.graph import graph_page

    assert (PROJECT_DIR / "docs" / "graphs" / f"{stack}.md").read_text() == graph_page(rendered(stack))


def test_flows_prints_the_flow_matrix():
    run = subprocess.run([sys.executable, "-m", "fabctl", "flows", "--stack", "site-b"], cwd=PROJECT_DIR, capture_output=True,
                         text=True, check=False, env={**__import__("os").environ, "COLUMNS": "200"})
    assert run.returncode == 0
    assert "site-b: allowed cross-cluster flows (everything else is denied)" in run.stdout
    assert "multikueue" in run.stdout and "6443/TCP" in run.stdout


@pytest.mark.parametrize("stack", ["site-a", "site-b"])
def test_the_readme_links_the_diagram(stack):
    assert f"[{stack}](docs/graphs/{stack}.md)" in (PROJECT_DIR / "README.md").read_text()


def test_stack_name_comes_from_the_stack_file():
    run = fabctl("stack-name", "--stack", "site-a", "--organization", "fab")
    assert (run.returncode, run.stdout) == (0, "fab/fab-platform/site-a\n")


def test_fails_when_the_stack_file_and_the_ci_disagree_on_the_organization():
    run = fabctl("stack-name", "--stack", "site-a", "--organization", "other")
    assert (run.returncode, run.stderr) == (2, (
        "error: Pulumi.site-a.yaml names organization 'fab' (federation.organization) but this run deploys to 'other'; make them agree\n"
    ))


def test_every_command_but_schema_stack_name_and_verify_renders_from_one_preloaded_renderer():
    """`python -m fabctl` starts the preloaded renderer before it imports the CLI, for the commands that render."""
    from fabctl.__main__ import RENDERING
    from fabctl.cli import parser

    (commands,) = [action.choices for action in parser()._actions if action.dest == "command"]
    assert RENDERING == set(commands) - {"schema", "stack-name", "verify"}
