"""Reads back what metrics_loggers.py logged, from each tool's own storage with the tool's own
reader: W&B's offline run file (its datastore and protobuf records), MLflow's tracking client on
the local file store, TensorBoard's EventAccumulator. Prints {tool: [{name: value} per step]}."""
from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Dict, List

Rows = List[Dict[str, float]]


def wandb_rows(out: Path) -> Rows:
    from wandb.proto import wandb_internal_pb2
    from wandb.sdk.internal import datastore
    files = sorted(out.glob("wandb/offline-run-*/run-*.wandb"))
    assert len(files) == 1, f"expected one offline W&B run under {out}, found {files}"
    ds = datastore.DataStore()
    ds.open_for_scan(str(files[0]))
    rows: Rows = []
    while (data := ds.scan_data()) is not None:
        record = wandb_internal_pb2.Record()
        record.ParseFromString(data)
        if record.WhichOneof("record_type") == "history":
            items = {(i.key or "/".join(i.nested_key)): json.loads(i.value_json) for i in record.history.item}
            rows.append({k: float(v) for k, v in items.items() if k.startswith("traintime/")})
    return rows


def mlflow_rows(out: Path) -> Rows:
    import mlflow
    from mlflow.tracking import MlflowClient
    mlflow.set_tracking_uri((out / "mlruns").as_uri())
    client = MlflowClient()
    run_id = (out / "mlflow-run-id.txt").read_text()
    by_step: Dict[int, Dict[str, float]] = {}
    for key in client.get_run(run_id).data.metrics:
        for m in client.get_metric_history(run_id, key):
            by_step.setdefault(m.step, {})[key] = m.value
    return [by_step[s] for s in sorted(by_step)]


def tensorboard_rows(out: Path) -> Rows:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    acc = EventAccumulator(str(out / "tb"))
    acc.Reload()
    by_step: Dict[int, Dict[str, float]] = {}
    for tag in acc.Tags()["scalars"]:
        for e in acc.Scalars(tag):
            by_step.setdefault(e.step, {})[tag] = e.value
    return [by_step[s] for s in sorted(by_step)]


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    out = ap.parse_args().out
    print(json.dumps({"wandb": wandb_rows(out), "mlflow": mlflow_rows(out), "tensorboard": tensorboard_rows(out)}))
