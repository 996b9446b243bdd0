"""MLflow tracking (`pip install 'rlfleet[mlflow]'`): the config as the run's parameters,
every result's numbers as metrics at step `timesteps_total`, checkpoints as artifacts.

    rlfleet train --run PPO --env CartPole-v1 --config '{"logger_config": {"type": ["JsonLogger",
        "CSVLogger", "TBXLogger", "MLflowLogger"], "mlflow": {"experiment_name": "cartpole"}}}'

Where runs go: `tracking_uri` when given (e.g. "http://127.0.0.1:5000" for an `mlflow
server`), else `$MLFLOW_TRACKING_URI`, else a local store beside the run folders:
`<results folder>/mlflow/mlflow.db` (SQLite; MLflow 3 keeps its file store in maintenance
mode, https://mlflow.org/docs/latest/self-hosting/migrate-from-file-store) with artifacts in
`<results folder>/mlflow/artifacts/`, shown by
`mlflow ui --backend-store-uri sqlite:///<results folder>/mlflow/mlflow.db`. Any `sqlite:///` store
keeps its artifacts in `artifacts/` beside its file.

Everything goes through `MlflowClient` with explicit run ids, never MLflow's "active run":
several trials tracked from one Tune driver never mix.
"""
from __future__ import annotations

import os
from typing import Any, Dict, List, Mapping, Optional

from rlfleet.results.trackers import Tracker, TrackerLogger, import_tracker, tracked_params

MLFLOW_OPTIONS: Dict[str, str] = {
    "tracking_uri": "where runs go (default: $MLFLOW_TRACKING_URI, else <results folder>/mlflow)",
    "experiment_name": "the MLflow experiment (default 'rlfleet'; created if missing)",
    "run_name": "the run's name (default: the run folder's name)",
    "tags": "a dict of tags set on the run",
    "log_checkpoints": "upload checkpoint folders as artifacts (default True)",
}
# MLflow refuses longer parameter values (its MAX_PARAM_VAL_LENGTH); longer config values
# (a long list of policies, say) are cut and marked.
_MAX_PARAM_LENGTH = 6000
# MLflow's log_batch takes at most 1000 metrics and 100 params per call (its documented limits).
_METRICS_PER_CALL, _PARAMS_PER_CALL = 1000, 100


def local_store(run_dir: str) -> str:
    """The local tracking folder for a run in `run_dir`: `mlflow/` beside the run folders."""
    return os.path.join(os.path.dirname(os.path.abspath(run_dir)), "mlflow")


class MLflowTracker(Tracker):
    """One MLflow run (see the module's docstring for `options`)."""

    def __init__(self, options: Mapping[str, Any], run_dir: str):
        import_tracker("mlflow", "mlflow", "MLflow tracking")
        from mlflow.tracking import MlflowClient

        self.options = dict(options)
        uri = options.get("tracking_uri") or os.environ.get("MLFLOW_TRACKING_URI")
        if not uri:
            store = local_store(run_dir)
            os.makedirs(store, exist_ok=True)
            uri = "sqlite:///" + os.path.join(store, "mlflow.db")
        # A local SQLite store keeps its artifacts beside it (MLflow's own default is ./mlruns
        # in whatever folder the process runs in); a server or other store decides itself.
        self._artifacts: Optional[str] = None
        if uri.startswith("sqlite:///"):
            self._artifacts = "file://" + os.path.join(os.path.dirname(os.path.abspath(uri[len("sqlite:///"):])),
                                                       "artifacts")
        self.tracking_uri = uri
        self.client = MlflowClient(tracking_uri=uri)
        self.run_id: Optional[str] = None
        self._pending: List[Any] = []

    def _experiment_id(self) -> str:
        name = self.options.get("experiment_name") or "rlfleet"
        found = self.client.get_experiment_by_name(name)
        if found is not None:
            return found.experiment_id
        try:
            return self.client.create_experiment(name, artifact_location=self._artifacts)
        except Exception:  # another trial created it meanwhile
            found = self.client.get_experiment_by_name(name)
            if found is None:
                raise
            return found.experiment_id

    def start(self, name: str, config: Mapping[str, Any]) -> None:
        from mlflow.entities import Param

        tags = {str(k): str(v) for k, v in (self.options.get("tags") or {}).items()}
        run = self.client.create_run(self._experiment_id(), run_name=self.options.get("run_name") or name, tags=tags)
        self.run_id = run.info.run_id
        items = [Param(key, value if len(value) <= _MAX_PARAM_LENGTH else value[:_MAX_PARAM_LENGTH - 3] + "...")
                 for key, value in tracked_params(config).items()]
        for i in range(0, len(items), _PARAMS_PER_CALL):
            self.client.log_batch(self.run_id, params=items[i:i + _PARAMS_PER_CALL])

    def log(self, metrics: Mapping[str, float], step: int) -> None:
        import time

        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        items = [Metric(key, value, now, step) for key, value in metrics.items()]
        # Asynchronously: a result's ~50 metrics take 30-50 ms in a local SQLite store, as
        # long as a small iteration; MLflow queues them and `finish` waits for them
        # (https://mlflow.org/docs/latest/tracking/tracking-api/#async-logging).
        for i in range(0, len(items), _METRICS_PER_CALL):
            self._pending.append(self.client.log_batch(self.run_id, metrics=items[i:i + _METRICS_PER_CALL],
                                                       synchronous=False))

    def log_checkpoint(self, path: str) -> None:
        self.client.log_artifacts(self.run_id, path, artifact_path=os.path.basename(os.path.normpath(path)))

    def finish(self, failed: bool = False) -> None:
        for operation in self._pending:
            operation.wait()  # raises what logging raised, so a lost metric is never silent
        self._pending = []
        if self.run_id is not None:
            self.client.set_terminated(self.run_id, "FAILED" if failed else "FINISHED")


class MLflowLogger(TrackerLogger):
    """`logger_config: {"type": [..., "MLflowLogger"], "mlflow": {options}}`: one MLflow run
    per rlfleet run (options: see `MLFLOW_OPTIONS`)."""

    option_key = "mlflow"
    OPTIONS = MLFLOW_OPTIONS

    def __init__(self, config: Mapping[str, Any], logdir: str):
        super().__init__(config, logdir)
        import_tracker("mlflow", "mlflow", "logger_config type 'MLflowLogger'")  # fail before training starts

    def make_tracker(self, options: Mapping[str, Any], run_dir: str) -> Tracker:
        return MLflowTracker(options, run_dir)


__all__ = ["MLFLOW_OPTIONS", "MLflowLogger", "MLflowTracker", "local_store"]
