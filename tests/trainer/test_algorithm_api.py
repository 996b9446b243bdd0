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


def test_an_output_in_evaluation_config_is_refused_not_ignored(tmp_path):
    """2.x records evaluation episodes with `evaluation_config={"output": ...}`; rlfleet's
    evaluation keeps only metrics, so the writer would write nothing: refused with the fix,
    when the evaluation workers are made (at build with evaluation_interval, else at evaluate())."""
    from rlfleet.algorithms.ppo import PPOConfig

    config = (PPOConfig().environment("CartPole-v1").env_runners(num_env_runners=0)
              .training(train_batch_size=200, minibatch_size=64, num_epochs=1)
              .evaluation(evaluation_config=PPOConfig.overrides(output=str(tmp_path / "episodes"))))
    with pytest.raises(ValueError, match="evaluation_config.output.*do not record.*output` at the top level"):
        config.copy().evaluation(evaluation_interval=1).build(logdir=str(tmp_path / "a"))
    trainer = config.build(logdir=str(tmp_path / "b"))
    try:
        with pytest.raises(ValueError, match="evaluation_config.output"):
            trainer.evaluate()
    finally:
        trainer.stop()
    # The top-level output, inherited by the evaluation workers, records training samples as before.
    trainer = config.copy().evaluation(evaluation_config={}).offline_data(output=str(tmp_path / "train")).build(
        logdir=str(tmp_path / "c"))
    try:
        trainer.train()
        assert trainer.evaluate()["evaluation"]["episodes_this_iter"] > 0
        assert list((tmp_path / "train").glob("*.json")) and not (tmp_path / "episodes").exists()
    finally:
        trainer.stop()
