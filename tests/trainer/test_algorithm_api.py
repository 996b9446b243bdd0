"""`rlfleet.Algorithm` (the Trainer) with RLlib 2.x's methods: save_to_path / restore_from_path /
from_checkpoint round trip, and get_module().forward_inference against compute_single_action."""
from __future__ import annotations

import shutil
import subprocess
import sys

import numpy as np
import pytest
import torch

import rlfleet
from rlfleet.algorithms.ppo import PPOTrainer
from tests.offline_helpers import write_scripted_cartpole

TINY_PPO = {"env": "CartPole-v1", "num_workers": 0, "train_batch_size": 200, "sgd_minibatch_size": 64,
            "num_sgd_iter": 1, "rollout_fragment_length": 200, "model": {"fcnet_hiddens": [16]}, "seed": 0}


@pytest.fixture
def trained(tmp_path):
    trainer = PPOTrainer(config=TINY_PPO, logdir=str(tmp_path / "run"))
    trainer.train()
    yield trainer
    trainer.stop()


def test_algorithm_is_the_trainer_and_lazy():
    from rlfleet.trainer import Trainer

    assert rlfleet.Algorithm is Trainer
    code = "import rlfleet, sys; print('rlfleet.trainer.trainer' in sys.modules, 'torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]


def _weights(trainer):
    return {k: np.asarray(v) for k, v in trainer.get_weights()["default_policy"].items()}


def test_save_to_path_restore_from_path_and_from_checkpoint(trained, tmp_path):
    target = tmp_path / "ck"
    path = trained.save_to_path(str(target))
    assert path == str(target) and (target / "manifest.json").is_file()  # the folder itself, 2.x's layout
    saved = _weights(trained)

    trained.train()
    assert trained.iteration == 2
    trained.restore_from_path(path)
    assert trained.iteration == 1
    assert all(np.array_equal(saved[k], v) for k, v in _weights(trained).items())

    rebuilt = rlfleet.Algorithm.from_checkpoint(path, logdir=str(tmp_path / "rebuilt"))
    try:
        assert type(rebuilt) is PPOTrainer and rebuilt.iteration == 1
        assert all(np.array_equal(saved[k], v) for k, v in _weights(rebuilt).items())
    finally:
        rebuilt.stop()

    # Saving again into the same checkpoint folder replaces it; a default path is a new folder.
    assert trained.save_to_path(path) == path
    other = trained.save_to_path()
    assert other != path
    from_default = PPOTrainer.from_checkpoint(other, logdir=str(tmp_path / "other"))
    try:
        assert from_default.iteration == 1
    finally:
        from_default.stop()
        shutil.rmtree(other)


def test_save_to_path_never_deletes_other_files(trained, tmp_path):
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "notes.txt").write_text("keep me")
    with pytest.raises(FileExistsError, match="no rlfleet checkpoint"):
        trained.save_to_path(str(folder))
    assert (folder / "notes.txt").read_text() == "keep me"


def test_forward_inference_matches_compute_single_action(trained):
    module = trained.get_module("default_policy")
    obs = (0.05 * np.random.default_rng(0).normal(size=(5, 4))).astype(np.float32)  # inside CartPole's bounds
    out = module.forward_inference({"obs": obs})
    assert set(out) == {"action_dist_inputs", "vf_preds"}
    assert isinstance(out["action_dist_inputs"], torch.Tensor) and out["action_dist_inputs"].shape == (5, 2)
    for i, o in enumerate(obs):
        _, _, extra = trained.compute_single_action(o, full_fetch=True, explore=False)
        np.testing.assert_allclose(out["action_dist_inputs"][i].numpy(), extra["action_dist_inputs"], rtol=1e-5,
                                   atol=1e-6)
        np.testing.assert_allclose(out["vf_preds"][i].numpy(), extra["vf_preds"], rtol=1e-5, atol=1e-6)
    # A torch batch gives the same; greedy actions are the argmax of the logits.
    again = module.forward_inference({"obs": torch.from_numpy(obs)})
    assert torch.equal(again["action_dist_inputs"], out["action_dist_inputs"])
    greedy = [trained.compute_single_action(o, explore=False) for o in obs]
    assert greedy == out["action_dist_inputs"].argmax(-1).tolist()
    with pytest.raises(KeyError, match="obs"):
        module.forward_inference({"observations": obs})


def test_forward_inference_of_a_q_network_has_no_value(tmp_path):
    from rlfleet.algorithms.dqn import DQNTrainer

    trainer = DQNTrainer(config={"env": "CartPole-v1", "num_workers": 0, "seed": 0}, logdir=str(tmp_path))
    try:
        obs = (0.05 * np.random.default_rng(1).normal(size=(3, 4))).astype(np.float32)
        out = trainer.get_module().forward_inference({"obs": obs})
        assert set(out) == {"action_dist_inputs"}  # DQN's model has no state-value head
        for i, o in enumerate(obs):
            _, _, extra = trainer.compute_single_action(o, full_fetch=True, explore=False)
            np.testing.assert_allclose(out["action_dist_inputs"][i].numpy(), extra["action_dist_inputs"], rtol=1e-5,
                                       atol=1e-6)
        with pytest.raises(KeyError, match="nope"):
            trainer.get_module("nope")
    finally:
        trainer.stop()


def test_forward_inference_of_an_lstm_takes_state_in_and_returns_state_out(tmp_path):
    """A recurrent module stepped with forward_inference, its state_out fed back as state_in,
    gives compute_single_action's outputs and states step after step, for every row."""
    # One LSTM shared with the value head: its state is (h, c), as 2.x's default LSTM module's.
    config = dict(TINY_PPO, model={"fcnet_hiddens": [16], "use_lstm": True, "lstm_cell_size": 8, "max_seq_len": 4,
                                   "vf_share_layers": True})
    trainer = PPOTrainer(config=config, logdir=str(tmp_path))
    try:
        module = trainer.get_module()
        assert module.is_stateful() and not _feed_forward_module_is_stateful(trainer, tmp_path)
        initial = module.get_initial_state()
        assert [tuple(s.shape) for s in initial] == [(8,), (8,)]
        rng = np.random.default_rng(2)
        rows = 3
        state = {"h": torch.stack([initial[0]] * rows), "c": torch.stack([initial[1]] * rows)}  # 2.x's LSTM keys
        single = [[s.numpy() for s in initial] for _ in range(rows)]
        for _ in range(3):
            obs = (0.05 * rng.normal(size=(rows, 4))).astype(np.float32)
            out = module.forward_inference({"obs": torch.from_numpy(obs), "state_in": state})
            assert set(out) == {"action_dist_inputs", "vf_preds", "state_out"} and list(out["state_out"]) == ["h", "c"]
            for i in range(rows):
                _, single[i], extra = trainer.compute_single_action(obs[i], state=single[i], full_fetch=True,
                                                                    explore=False)
                np.testing.assert_allclose(out["action_dist_inputs"][i].numpy(), extra["action_dist_inputs"],
                                           rtol=1e-5, atol=1e-6)
                for part, key in enumerate(("h", "c")):
                    np.testing.assert_allclose(out["state_out"][key][i].numpy(), single[i][part], rtol=1e-5, atol=1e-6)
            state = out["state_out"]
        # Without state_in every row starts from the initial state; state_out is then a list.
        fresh = module.forward_inference({"obs": obs})
        assert isinstance(fresh["state_out"], list) and len(fresh["state_out"]) == 2
        assert not torch.allclose(fresh["state_out"][0], state["h"])  # the carried state mattered
        with pytest.raises(ValueError, match="needs 2 parts"):
            module.forward_inference({"obs": obs, "state_in": [state["h"]]})
        with pytest.raises(ValueError, match="one row per observation"):
            module.forward_inference({"obs": obs, "state_in": [state["h"][:1], state["c"][:1]]})
    finally:
        trainer.stop()


def _feed_forward_module_is_stateful(trainer, tmp_path):
    # A feed-forward module refuses a state_in, naming the fix.
    ff = PPOTrainer(config=TINY_PPO, logdir=str(tmp_path / "ff"))
    try:
        module = ff.get_module()
        with pytest.raises(ValueError, match="not recurrent .*use_lstm"):
            module.forward_inference({"obs": np.zeros((1, 4), np.float32), "state_in": [np.zeros((1, 8))]})
        return module.is_stateful()
    finally:
        ff.stop()


def test_evaluate_records_its_episodes_with_an_evaluation_config_output(tmp_path):
    """2.x's old stack records a trained policy with `evaluation_config={"output": ...}`: the
    episodes evaluate() runs are written, whole and greedy; the top-level `output` keeps
    recording the training samples only."""
    import json

    from rlfleet.algorithms.ppo import PPOConfig
    from rlfleet.offline.readers import JsonReader
    from rlfleet.policy.sample_batch import SampleBatch

    episodes_dir, train_dir = tmp_path / "episodes", tmp_path / "train"
    config = (PPOConfig().environment("CartPole-v1").env_runners(num_env_runners=0, rollout_fragment_length=100)
              .training(train_batch_size=200, minibatch_size=64, num_epochs=1, model={"fcnet_hiddens": [16]})
              .evaluation(evaluation_duration=3, evaluation_duration_unit="episodes",
                          evaluation_config=PPOConfig.overrides(output=str(episodes_dir), explore=False))
              .offline_data(output=str(train_dir)).debugging(seed=0))

    def lines(folder):
        return sum(len(path.read_text().splitlines()) for path in folder.glob("*.json"))

    trainer = config.build(logdir=str(tmp_path / "run"))
    try:
        trainer.train()
        trained_lines = lines(train_dir)
        assert trained_lines > 0 and not episodes_dir.exists()  # training samples go to the top-level output
        evaluation = trainer.evaluate()["evaluation"]
        episodes = evaluation["episodes_this_iter"]
        assert episodes >= 3 and lines(train_dir) == trained_lines
        reader = JsonReader(str(episodes_dir))
        batch = SampleBatch.concat_samples([reader.next() for _ in range(lines(episodes_dir))])
        assert len(set(batch[SampleBatch.EPS_ID].tolist())) == episodes
        assert batch[SampleBatch.REWARDS].sum() == pytest.approx(evaluation["episode_reward_mean"] * episodes)
        ends = batch[SampleBatch.TERMINATEDS] | batch[SampleBatch.TRUNCATEDS]
        assert ends.sum() == episodes and ends[-1]  # whole episodes only
        for obs, action in list(zip(batch[SampleBatch.OBS], batch[SampleBatch.ACTIONS]))[:20]:
            assert trainer.compute_single_action(obs, explore=False) == action  # explore=False applied
        json.loads((next(episodes_dir.glob("*.json"))).read_text().splitlines()[0])  # RLlib's JSON lines
    finally:
        trainer.stop()


def test_an_evaluation_output_with_an_offline_input_names_the_fix(tmp_path):
    from rlfleet.algorithms.bc import BCConfig

    write_scripted_cartpole(str(tmp_path / "data"), 50)
    config = (BCConfig().environment("CartPole-v1").offline_data(input_=str(tmp_path / "data"))
              .evaluation(evaluation_interval=1, evaluation_config=BCConfig.overrides(output=str(tmp_path / "out"))))
    with pytest.raises(ValueError, match="evaluation_config.output.*add input_='sampler' to evaluation_config"):
        config.build(logdir=str(tmp_path / "run"))
