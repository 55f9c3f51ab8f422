"""Phase 03, training pipeline: the serving loop's run published its model with its data pin, and the model serves
(phase 02's call, on the run's model)."""

from __future__ import annotations

from collections.abc import Mapping

from fabctl.verify.criteria.blocks import Site, _no_training_nodes, _ran, _team_probe_step
from fabctl.verify.criteria.phase_02 import inference_call
from fabctl.verify.model import Criterion, Judgement


def phase_03(site: Site) -> list[Criterion | tuple[str, str]]:
    ids = ("03-model-published", "03-model-serves")
    run = site.acceptance.serving_loop
    if site.config.inference is None:
        return [(cid, "the site serves no model (no `inference` section)") for cid in ids]
    if run is None:
        return [(cid, "acceptance.serving_loop names no run of the serving-loop DAG to verify (docs/acceptance.md, phase 03)")
                for cid in ids]
    return [model_published(site), inference_call(site, run.model, "03-model-serves", 3)]


def model_published(site: Site) -> Criterion | tuple[str, str]:
    """The run's `metadata.json` in the models bucket: read with the team's keys from a GPU node, pinned to a snapshot."""
    run = site.acceptance.serving_loop
    assert run is not None and site.config.inference is not None
    cid = "03-model-published"
    source = site.config.inference.models[run.model].source
    uri = f"s3://{site.bucket('models')}/{source}{run.revision}/metadata.json"
    cluster = site.config.inference.cluster
    if skipped := _no_training_nodes(site, cluster, cid):
        return skipped
    step = _team_probe_step(site, cluster, cid, "model-published", ["s3-metadata", uri], run.team)

    def judge(results: Mapping[str, str]) -> Judgement:
        status = results.get("0.get_status")
        if status is None:
            return False, _ran(results, 0, "the metadata probe")
        if status != "200":
            return False, f"{uri} answered {status} to team {run.team}'s keys: the run did not publish (metadata.json is written last)"
        snapshot = results.get("0.snapshot_id", "")
        if not snapshot.isdigit() or results.get("0.has_metrics") != "true":
            return False, f"{uri} names snapshot {snapshot or 'none'} and metrics {results.get('0.has_metrics')}: a published model pins both"
        return True, f"{run.model} revision {run.revision} was trained from snapshot {snapshot} and published with its metrics"

    return Criterion(3, cid, f"the serving loop published {run.model} revision {run.revision} with its data pin", (step,), judge)
