"""The scripted Pendulum expert and its mixed dataset: the expert swings up, the files read back."""
import numpy as np
import pytest

from rlfleet.offline.pendulum_dataset import write_mixed_pendulum_dataset
from rlfleet.offline.readers import JsonReader
from rlfleet.policy.sample_batch import SampleBatch


def test_mixed_dataset_holds_expert_and_random_episodes(tmp_path):
    stats = write_mixed_pendulum_dataset(str(tmp_path / "data"), episodes=6, expert_fraction=0.5, seed=0)
    # Random torques average about -1200 on Pendulum-v1; the controller swings up and holds.
    assert stats["expert_return"] > -400 > -800 > stats["random_return"]
    reader = JsonReader(str(tmp_path / "data"))
    batches = [reader.next() for _ in range(6)]
    returns = [float(b[SampleBatch.REWARDS].sum()) for b in batches]
    assert [b.count for b in batches] == [200] * 6
    assert abs(np.mean(returns[:3]) - stats["expert_return"]) < 1e-3
    assert all(np.abs(b[SampleBatch.ACTIONS]).max() <= 1.0 for b in batches)
    assert len({int(b[SampleBatch.EPS_ID][0]) for b in batches}) == 6


def test_expert_noise_covers_states_off_the_top_at_little_cost(tmp_path):
    """The noise-free expert balances exactly upright; the default noise puts its data a little
    off the top (what return-conditioned learners need there) for a few % of its return."""
    clean = write_mixed_pendulum_dataset(str(tmp_path / "clean"), episodes=8, expert_fraction=1.0, seed=0,
                                         expert_noise=0.0)
    noisy = write_mixed_pendulum_dataset(str(tmp_path / "noisy"), episodes=8, expert_fraction=1.0, seed=0)
    assert noisy["expert_return"] < clean["expert_return"] < 0
    assert noisy["expert_return"] > 1.15 * clean["expert_return"]  # costs under 15 %

    def upright_angles(folder):
        reader = JsonReader(folder)
        obs = np.concatenate([reader.next()[SampleBatch.OBS] for _ in range(8)])
        upright = obs[obs[:, 0] > 0.95]
        return np.abs(np.arctan2(upright[:, 1], upright[:, 0]))

    # Once caught, the clean expert holds the top to within 1e-3 rad; the noisy one strays.
    assert np.quantile(upright_angles(str(tmp_path / "clean")), 0.5) < 1e-3
    assert np.quantile(upright_angles(str(tmp_path / "noisy")), 0.5) > 3e-3


def test_negative_expert_noise_is_refused(tmp_path):
    with pytest.raises(ValueError, match="expert_noise"):
        write_mixed_pendulum_dataset(str(tmp_path / "d"), episodes=2, expert_noise=-0.1)
