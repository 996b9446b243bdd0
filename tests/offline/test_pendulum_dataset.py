"""The scripted Pendulum expert and its mixed dataset: the expert swings up, the files read back."""
import numpy as np

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
