"""The platform's DAGs in Apache Airflow's own DagBag, where Airflow is installed (in this interpreter, or the one
FAB_AIRFLOW_PYTHON names), loaded from a directory laid out as the kubelet mounts the ConfigMap `platform-dags`; and the
`plan` task of the serving loop on given runs (tests/components/test_serving_loop_dag.py, tests/attacks/)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

AIRFLOW_CHECK = textwrap.dedent('''
    import json, os, sys
    from pathlib import Path
    dags, runs = Path(sys.argv[1]), json.loads(sys.argv[2])
    from airflow.utils.file import list_py_file_paths
    from airflow.dag_processing.dagbag import DagBag
    found = list_py_file_paths(str(dags))
    bag = DagBag(dag_folder=str(dags), include_examples=False)

    def plan(dag, params):
        """The DAG's own `plan` task on a run's parameters (the DAG's defaults, then the run's conf, as Airflow merges
        them): the plan, or the refusal."""
        merged = {**{k: v for k, v in dag.params.dump().items() if v is not None}, **params}
        if "plan" not in dag.task_ids:
            return {"error": "the DAG has no plan task"}
        try:
            return {"plan": dag.get_task("plan").python_callable(params=merged, run_id="manual__2026-03-01T10:00:00+00:00")}
        except ValueError as error:
            return {"refused": str(error)}
        except Exception as error:
            return {"error": f"{type(error).__name__}: {error}"}

    print(json.dumps({
        "found": [str(Path(f).relative_to(dags)) for f in found], "errors": {k: str(v) for k, v in bag.import_errors.items()},
        "dags": {d: {"order": [t.task_id for t in dag.topological_sort()],
                     "access_control": {r: {k: sorted(v) for k, v in a.items()} for r, a in (dag.access_control or {}).items()},
                     "params": sorted(dag.params),
                     "paused_upon_creation": dag.is_paused_upon_creation,
                     "feature_spec": dag.get_task("prepare_features").template_spec if "prepare_features" in dag.task_ids else None}
                 for d, dag in bag.dags.items()},
        "runs": {name: plan(bag.dags[d], params) for name, (d, params) in runs.items() if d in bag.dags},
    }, default=str))
''')


def _airflow_python() -> str | None:
    if importlib.util.find_spec("airflow") is not None:
        return sys.executable
    return os.environ.get("FAB_AIRFLOW_PYTHON")


def config_map_volume(root: Path, files: dict[str, str]) -> Path:
    """A directory laid out as the kubelet mounts a ConfigMap: the files in a timestamped directory, `..data` linking
    to it, and each key a link through `..data`."""
    root.mkdir(parents=True)
    stamp = root / "..2026_03_01_10_00_00.000000001"
    stamp.mkdir()
    for name, text in files.items():
        (stamp / name).write_text(text)
    (root / "..data").symlink_to(stamp.name)
    for name in files:
        (root / name).symlink_to(f"..data/{name}")
    return root


def airflow_dagbag(tmp_path: Path, files: dict[str, str], submission: dict[str, Any],
                   runs: dict[str, tuple[str, dict[str, Any]]] | None = None) -> dict[str, Any]:
    """The platform's DAGs as Airflow's DagBag loads them from the ConfigMap `files` (platform.json pointing at
    `submission`), and the `plan` task of each of `runs` (name -> DAG id and the run's parameters)."""
    platform = json.loads(files["platform.json"])
    (tmp_path / "submission.json").write_text(json.dumps(submission))
    platform["training_submission"] = str(tmp_path / "submission.json")
    dags = tmp_path / "dags"
    config_map_volume(dags / "platform", {**files, "platform.json": json.dumps(platform)})
    env = {**os.environ, "AIRFLOW_HOME": str(tmp_path / "home"), "AIRFLOW__CORE__LOAD_EXAMPLES": "false"}
    out = subprocess.run([_airflow_python(), "-c", AIRFLOW_CHECK, str(dags), json.dumps(runs or {})], env=env,
                         capture_output=True, text=True, timeout=300, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


needs_airflow = pytest.mark.skipif(
    _airflow_python() is None, reason="Apache Airflow is not installed here (nor named by FAB_AIRFLOW_PYTHON); the stubbed "
    "parse tests above cover the task graph")
