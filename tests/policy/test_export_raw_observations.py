"""Exports act as the trainer does on raw env observations: for each algorithm family (PPO,
DQN with noisy nets, SAC, ARS, an LSTM policy), with and without an observation filter, the
exported model's `actions` (ONNX through onnxruntime, and TorchScript) equal
`compute_single_action(obs, explore=False)` for every one of 256 observations. The bare model
(`include_filter=False`) with filter.json's two documented lines agrees too, and without them
it does not; Tuple / Dict observation spaces go through the graph's preprocessor; `rlfleet
serve` answers the same actions as the export."""
from __future__ import annotations

import json
import os

import gymnasium as gym
import numpy as np
import pytest
import torch

from rlfleet.policy.export_observations import FILTER_FORMAT
from rlfleet.registry import get_trainer_class
from tests.envs import DictObsEnv, TupleObsEnv

N = 256
ORT = pytest.importorskip("onnxruntime")
# (algorithm, env, config): tiny nets, no training; the filter's statistics come from sampling.
CASES = {
    "PPO": ("PPO", "CartPole-v1", {"model": {"fcnet_hiddens": [16]}}),
    "DQN": ("DQN", "CartPole-v1", {"noisy": True, "hiddens": [16], "model": {"fcnet_hiddens": [16]}}),
    "SAC": ("SAC", "Pendulum-v1", {"policy_model": {"fcnet_hiddens": [16]}, "Q_model": {"fcnet_hiddens": [16]}}),
    "ARS": ("ARS", "Pendulum-v1", {"noise_size": 10_000, "num_rollouts": 2, "rollouts_used": 1,
                                   "model": {"fcnet_hiddens": [16]}}),
    "LSTM": ("PPO", "CartPole-v1", {"model": {"use_lstm": True, "lstm_cell_size": 8, "fcnet_hiddens": [16],
                                              "lstm_use_prev_action": True}}),
}


def raw_observations(env, n: int = N, seed: int = 0) -> list:
    """`n` observations of `env` acting at random (the 256 the exports are checked on)."""
    env = gym.make(env) if isinstance(env, str) else env()
    env.action_space.seed(seed)
    obs, _ = env.reset(seed=seed)
    out = []
    while len(out) < n:
        out.append(obs)
        obs, _, terminated, truncated, _ = env.step(env.action_space.sample())
        if terminated or truncated:
            obs, _ = env.reset()
    return out


def make_trainer(algo: str, env, config: dict, filtered: bool, tmp_path):
    config = dict(config, seed=1, num_workers=0, observation_filter="MeanStdFilter" if filtered else "NoFilter")
    trainer = get_trainer_class(algo)(env=env, config=config, logdir=str(tmp_path / "run"))
    if filtered:  # statistics far from (0, 1): shifted and scaled samples of the env's observations
        worker = trainer.workers.local_worker()
        pp, filt = worker.preprocessors["default_policy"], worker.filters["default_policy"]
        seen = pp.transform_batch(raw_observations(env, 300, seed=7))
        filt.apply_batch(seen * np.linspace(1.5, 4.0, seen.shape[1]) + 0.7, update=True)
    return trainer


def trainer_actions(trainer, observations: list) -> tuple:
    """compute_single_action(explore=False) on each raw observation, and what a recurrent
    export needs fed alongside (previous action, reward, state going in), step by step."""
    policy = trainer.get_policy()
    if not policy.is_recurrent():
        return np.asarray([trainer.compute_single_action(o, explore=False) for o in observations]), {}
    state, prev_a, rows = policy.get_initial_state(), 0, []
    actions = []
    for o in observations:
        rows.append((prev_a, state))
        a, state, _ = trainer.compute_single_action(o, state=state, prev_action=prev_a, prev_reward=0.0,
                                                    explore=False)
        actions.append(a)
        prev_a = a
    feeds = {"prev_actions": np.asarray([r[0] for r in rows], np.int64),
             "prev_rewards": np.zeros(len(rows), np.float32),
             **{f"state_in_{k}": np.stack([r[1][k] for r in rows]) for k in range(len(rows[0][1]))}}
    return np.asarray(actions), feeds


def run_export(path: str, feeds: dict) -> list:
    meta = json.loads(open(os.path.join(os.path.dirname(path), "model.json")).read())
    ordered = [np.asarray(feeds[name]) for name in meta["inputs"]]
    if path.endswith(".onnx"):
        session = ORT.InferenceSession(path, providers=["CPUExecutionProvider"])
        return session.run(None, dict(zip(meta["inputs"], ordered)))
    with torch.no_grad():
        return [t.numpy() for t in torch.jit.load(path)(*map(torch.from_numpy, ordered))]


def agreement(got: np.ndarray, want: np.ndarray) -> float:
    got = np.asarray(got).reshape(len(want), -1)
    want = np.asarray(want).reshape(len(want), -1)
    if want.dtype.kind == "f":  # float32 sums in another order (onnxruntime, NumPy) differ in the last bits
        return float(np.mean(np.all(np.abs(got - want) <= 1e-5 * (1 + np.abs(want)), axis=1)))
    return float(np.mean(np.all(got == want, axis=1)))


@pytest.fixture(scope="module", params=[(c, f) for c in CASES for f in (True, False)],
                ids=[f"{c}-{'filter' if f else 'nofilter'}" for c in CASES for f in (True, False)])
def case(request, tmp_path_factory):
    name, filtered = request.param
    algo, env, config = CASES[name]
    trainer = make_trainer(algo, env, config, filtered, tmp_path_factory.mktemp(name))
    observations = raw_observations(env)
    want, feeds = trainer_actions(trainer, observations)
    yield name, filtered, trainer, np.asarray(observations, np.float32), want, feeds
    trainer.stop()


@pytest.mark.parametrize("kind", ["onnx", "torchscript"])
def test_export_acts_as_compute_single_action_on_raw_observations(case, kind, tmp_path):
    name, filtered, trainer, obs, want, feeds = case
    path = trainer.export_policy_model(str(tmp_path), onnx=17 if kind == "onnx" else None)
    meta = json.loads((tmp_path / "model.json").read_text())
    assert meta["observations"] == "raw" and meta["outputs"][0] == "actions"
    assert json.loads((tmp_path / "filter.json").read_text())["in_graph"] is True
    actions = run_export(path, {"obs": obs, **feeds})[0]
    assert agreement(actions, want) == 1.0


def test_the_bare_model_agrees_only_with_filter_json_applied(case, tmp_path):
    name, filtered, trainer, obs, want, feeds = case
    path = trainer.export_policy_model(str(tmp_path), onnx=17, include_filter=False)
    meta = json.loads((tmp_path / "model.json").read_text())
    assert meta["observations"] == "preprocessed, filtered" and meta["filter_file"] == "filter.json"
    # The two lines the export guide shows (Box observations: the preprocessor is a cast).
    f = json.load(open(tmp_path / "filter.json"))
    applied = np.clip((obs - np.asarray(f["shift"])) / np.asarray(f["scale"]), -(f["clip"] or np.inf),
                      f["clip"] or np.inf).astype(np.float32)
    assert f["format"] == FILTER_FORMAT and f["in_graph"] is False
    assert f["filter"] == ("MeanStdFilter" if filtered else "NoFilter")
    assert agreement(run_export(path, {"obs": applied, **feeds})[0], want) == 1.0
    if filtered and name != "LSTM":  # the filter matters: raw observations into the bare model act otherwise
        assert agreement(run_export(path, {"obs": obs, **feeds})[0], want) < 0.9


@pytest.mark.parametrize("env, kind", [(TupleObsEnv, "onnx"), (DictObsEnv, "torchscript")])
def test_tuple_and_dict_observations_go_through_the_graph(env, kind, tmp_path):
    trainer = make_trainer("PPO", env, {"model": {"fcnet_hiddens": [16]}}, True, tmp_path)
    try:
        space = trainer.workers.local_worker().preprocessors["default_policy"].original_space
        space.seed(3)
        observations = [space.sample() for _ in range(N)]
        want = np.asarray([trainer.compute_single_action(o, explore=False) for o in observations])
        path = trainer.export_policy_model(str(tmp_path / "x"), onnx=17 if kind == "onnx" else None)
        meta = json.loads((tmp_path / "x" / "model.json").read_text())
        keys = list(space.spaces) if isinstance(space, gym.spaces.Dict) else range(len(space.spaces))
        assert list(meta["inputs"]) == [f"obs.{k}" for k in keys]
        feeds = {f"obs.{k}": np.asarray([o[k] for o in observations]) for k in keys}
        for name, spec in meta["inputs"].items():
            feeds[name] = feeds[name].astype(spec["dtype"])
        assert agreement(run_export(path, feeds)[0], want) == 1.0
    finally:
        trainer.stop()


def test_rlfleet_serve_answers_the_exports_actions(tmp_path):
    from rlfleet.serving.http_client import HTTPClient
    from rlfleet.serving.inference_server import serve_checkpoint

    trainer = make_trainer("PPO", "CartPole-v1", {"train_batch_size": 64, "rollout_fragment_length": 64,
                                                  "sgd_minibatch_size": 32, "num_sgd_iter": 1,
                                                  "model": {"fcnet_hiddens": [16]}}, True, tmp_path)
    try:
        trainer.train()  # the filter's statistics move with training, and travel in the checkpoint
        checkpoint = trainer.save(str(tmp_path / "ckpt"))
        obs = np.asarray(raw_observations("CartPole-v1"), np.float32)
        want, _ = trainer_actions(trainer, list(obs))
        exported = run_export(trainer.export_policy_model(str(tmp_path / "onnx"), onnx=17), {"obs": obs})[0]
    finally:
        trainer.stop()
    server = serve_checkpoint(checkpoint, port=0).start()
    try:
        served = HTTPClient(server.url).call("/v1/compute_actions", {"observations": obs.tolist()})["actions"]
    finally:
        server.stop()
        server.trainer.stop()
    assert agreement(exported, want) == 1.0
    assert agreement(np.asarray(served), want) == 1.0


def test_a_custom_preprocessor_cannot_go_into_the_graph(tmp_path):
    from rlfleet.models.preprocessors import register_custom_preprocessor
    from rlfleet.models.space_preprocessors import NoPreprocessor

    class Doubling(NoPreprocessor):
        def transform(self, obs):
            return 2.0 * np.asarray(obs, np.float32)

    register_custom_preprocessor("doubling_for_export", Doubling)
    trainer = make_trainer("PPO", "CartPole-v1", {"model": {"fcnet_hiddens": [8],
                                                            "custom_preprocessor": "doubling_for_export"}},
                           True, tmp_path)
    try:
        with pytest.raises(ValueError, match="Doubling.*cannot become part of an exported graph.*include_filter=False"):
            trainer.export_policy_model(str(tmp_path / "a"))
        trainer.export_policy_model(str(tmp_path / "b"), include_filter=False)
        assert json.loads((tmp_path / "b" / "filter.json").read_text())["filter"] == "MeanStdFilter"
    finally:
        trainer.stop()


def test_a_filter_it_cannot_freeze_is_refused_before_anything_is_written(tmp_path):
    from rlfleet.utils.filters import NoFilter

    class Halving(NoFilter):
        def __call__(self, x, update=True):
            return 0.5 * np.asarray(x, np.float32)

    trainer = make_trainer("PPO", "CartPole-v1", {"model": {"fcnet_hiddens": [8]}}, False, tmp_path)
    trainer.workers.local_worker().filters["default_policy"] = Halving()
    try:
        for include_filter in (True, False):
            with pytest.raises(ValueError, match="observation filter .*Halving is not one rlfleet can freeze"):
                trainer.export_policy_model(str(tmp_path / "out"), include_filter=include_filter)
        assert not (tmp_path / "out").exists()
    finally:
        trainer.stop()
