"""The algorithm cases the smoke tests run (algorithms/test_algorithm_smoke.py) and other tests
reuse: the action spaces, which of them each registered algorithm supports, a tiny config per
algorithm (about a second per train() call), an env for any action space, and `build`."""
from __future__ import annotations

import copy
from typing import Any, Dict

import gymnasium as gym
import numpy as np

from rlfleet.registry import get_trainer_class

S = gym.spaces

ACTION_SPACES = {
    "Discrete": S.Discrete(3),
    "Box": S.Box(-2.0, 2.0, (2,), np.float32),
    "MultiDiscrete": S.MultiDiscrete([3, 4]),
    "MultiBinary": S.MultiBinary(4),
    "Dict": S.Dict({"move": S.Discrete(3), "force": S.Box(-2.0, 2.0, (2,), np.float32)}),
    "Tuple": S.Tuple((S.Discrete(2), S.Box(-1.0, 1.0, (2,), np.float32))),
}

SUPPORTED_ACTION_SPACES = {
    "PPO": set(ACTION_SPACES),
    "DDPPO": set(ACTION_SPACES),
    "PG": set(ACTION_SPACES),
    "DQN": {"Discrete"},
    "SimpleQ": {"Discrete"},
    "SAC": {"Box", "Discrete"},
    "DDPG": {"Box"},
    "TD3": {"Box"},
    "A2C": set(ACTION_SPACES),
    "A3C": set(ACTION_SPACES),
    "IMPALA": set(ACTION_SPACES),
    "APPO": set(ACTION_SPACES),
    "APEX": {"Discrete"},
    "APEX_DDPG": {"Box"},
    "BC": set(ACTION_SPACES),
    "MARWIL": set(ACTION_SPACES),
    "CQL": {"Box"},
    "CRR": {"Box", "Discrete"},
    "IQL": {"Box", "Discrete"},
    "BanditLinUCB": {"Discrete"},
    "BanditLinTS": {"Discrete"},
    "ES": {"Discrete", "Box"},
    "ARS": {"Discrete", "Box"},
    "R2D2": {"Discrete"},
    "APEX_R2D2": {"Discrete"},
    "RNNSAC": {"Box", "Discrete"},
    "MADDPG": {"Discrete"},
    # A grouped env's Tuple of Discrete actions only (tests/algorithms/test_qmix.py): every
    # single-agent space is refused.
    "QMIX": set(),
    "MAML": set(ACTION_SPACES),
    "DT": {"Box", "Discrete"},
    # Learned dynamics over flat Box observations and actions only.
    "MBMPO": {"Box"},
    # A search over Discrete moves (ActionSpaceEnv saves and restores its position for it).
    "AlphaZero": {"Discrete"},
    "DreamerV3": {"Discrete", "Box"},
    "Dreamer": {"Discrete", "Box"},
    # A slate env's Dict observation (user, documents, response) and MultiDiscrete slates only
    # (tests/algorithms/test_slateq.py): every ActionSpaceEnv case is refused.
    "SlateQ": set(),
}

# Tiny nets and batches, so that each case takes about a second. Off-policy trainers start
# learning after 16 steps and sample at least 32 steps per train() call.
_OFF_POLICY = {"learning_starts": 16, "train_batch_size": 16, "timesteps_per_iteration": 32, "min_iter_time_s": 0}
TINY_CONFIGS: Dict[str, Dict[str, Any]] = {
    "PPO": {"rollout_fragment_length": 16, "train_batch_size": 32, "sgd_minibatch_size": 16, "num_sgd_iter": 2,
            "model": {"fcnet_hiddens": [16]}},
    # DD-PPO learns on remote workers only: one here (a process group of one), plus an env on
    # the driver for the checks below.
    "DDPPO": {"num_workers": 1, "create_env_on_driver": True, "rollout_fragment_length": 16,
              "num_envs_per_worker": 2, "sgd_minibatch_size": 16, "num_sgd_iter": 2, "model": {"fcnet_hiddens": [16]}},
    "PG": {"rollout_fragment_length": 16, "train_batch_size": 32, "model": {"fcnet_hiddens": [16]}},
    "DQN": {**_OFF_POLICY, "model": {"fcnet_hiddens": [16]}, "hiddens": [16]},
    "SimpleQ": {**_OFF_POLICY, "model": {"fcnet_hiddens": [16]}},
    "SAC": {**_OFF_POLICY, "Q_model": {"fcnet_hiddens": [16]}, "policy_model": {"fcnet_hiddens": [16]}},
    "DDPG": {**_OFF_POLICY, "actor_hiddens": [16], "critic_hiddens": [16],
             "exploration_config": {"random_timesteps": 16}},
    "TD3": {**_OFF_POLICY, "actor_hiddens": [16], "critic_hiddens": [16],
            "exploration_config": {"random_timesteps": 16}},
    # min_iter_time_s 0: A2C's and A3C's defaults (10 s, 5 s) would make each case take that long.
    "A2C": {"rollout_fragment_length": 16, "train_batch_size": 32, "min_iter_time_s": 0,
            "model": {"fcnet_hiddens": [16]}},
    "A3C": {"rollout_fragment_length": 16, "min_iter_time_s": 0, "model": {"fcnet_hiddens": [16]}},
    "IMPALA": {"rollout_fragment_length": 16, "train_batch_size": 32, "min_iter_time_s": 0,
               "model": {"fcnet_hiddens": [16]}},
    "APPO": {"rollout_fragment_length": 16, "train_batch_size": 32, "min_iter_time_s": 0,
             "model": {"fcnet_hiddens": [16]}},
    "APEX": {**_OFF_POLICY, "model": {"fcnet_hiddens": [16]}, "hiddens": [16], "num_replay_buffer_shards": 2},
    "APEX_DDPG": {**_OFF_POLICY, "actor_hiddens": [16], "critic_hiddens": [16], "num_replay_buffer_shards": 2,
                  "exploration_config": {"random_timesteps": 16}},
    # Offline learners, fed by the env here ("sampler" input) rather than by files.
    "BC": {"input": "sampler", "train_batch_size": 32, "model": {"fcnet_hiddens": [16]}},
    "MARWIL": {"input": "sampler", "train_batch_size": 32, "model": {"fcnet_hiddens": [16]}},
    "CQL": {"input": "sampler", **_OFF_POLICY, "Q_model": {"fcnet_hiddens": [16]},
            "policy_model": {"fcnet_hiddens": [16]}, "bc_iters": 4, "num_actions": 2},
    "CRR": {"input": "sampler", **_OFF_POLICY, "actor_hiddens": [16], "critic_hiddens": [16], "n_action_sample": 2},
    "IQL": {"input": "sampler", **_OFF_POLICY, "actor_hiddens": [16], "critic_hiddens": [16]},
    "BanditLinUCB": {"timesteps_per_iteration": 16},
    "BanditLinTS": {"timesteps_per_iteration": 16},
    "ES": {"noise_size": 100_000, "episodes_per_batch": 4, "train_batch_size": 16, "model": {"fcnet_hiddens": [16]}},
    "ARS": {"noise_size": 100_000, "num_rollouts": 4, "rollouts_used": 2, "model": {"fcnet_hiddens": [16]}},
    "R2D2": {**_OFF_POLICY, "model": {"fcnet_hiddens": [16], "use_lstm": True, "lstm_cell_size": 8, "max_seq_len": 4},
             "hiddens": [16]},
    "APEX_R2D2": {**_OFF_POLICY, "model": {"fcnet_hiddens": [16], "use_lstm": True, "lstm_cell_size": 8,
                                           "max_seq_len": 4}, "hiddens": [16], "num_replay_buffer_shards": 2},
    "RNNSAC": {**_OFF_POLICY, "model": {"max_seq_len": 4}, "Q_model": {"fcnet_hiddens": [16], "lstm_cell_size": 8},
               "policy_model": {"fcnet_hiddens": [16], "lstm_cell_size": 8}},
    "MADDPG": {**_OFF_POLICY, "actor_hiddens": [16], "critic_hiddens": [16], "rollout_fragment_length": 16},
    "QMIX": {**_OFF_POLICY, "model": {"fcnet_hiddens": [16]}},
    # Two tasks (ActionSpaceEnv's reward signs) per iteration, pre- and post-adaptation.
    "MAML": {"rollout_fragment_length": 16, "meta_batch_size": 2, "model": {"fcnet_hiddens": [16]}},
    # Whole 8-step episodes from the env's fragments (DT gathers them), segments of 4 steps.
    "DT": {"input": "sampler", "target_return": 4.0, "max_ep_len": 16, "embed_dim": 8, "num_layers": 1,
           "train_batch_size": 32, "timesteps_per_iteration": 32, "model": {"max_seq_len": 4}},
    # Two small dynamics models, one short MAML step in 8-step imagined episodes.
    "MBMPO": {"rollout_fragment_length": 16, "horizon": 8, "ensemble_size": 2, "num_worker_envs": 2,
              "num_maml_steps": 1, "maml_optimizer_steps": 1, "model": {"fcnet_hiddens": [16]},
              "dynamics_model": {"model_hiddens": [16], "model_train_epochs": 2}},
    "AlphaZero": {"rollout_fragment_length": 16, "train_batch_size": 32, "sgd_minibatch_size": 16, "num_sgd_iter": 2,
                  "model": {"fcnet_hiddens": [16]}, "mcts_config": {"num_simulations": 4},
                  "ranked_rewards": {"num_init_rewards": 4}},
    # The tiny model size (not the paper's) on short sequences: one update per 4 sampled steps.
    **{name: {"model_size": "nano", "num_latents": 4, "num_classes": 4, "batch_size": 2, "batch_length": 8,
              "learning_starts": 16, "training_ratio": 4, "timesteps_per_iteration": 32}
       for name in ("DreamerV3", "Dreamer")},
    "SlateQ": {**_OFF_POLICY, "fcnet_hiddens_per_candidate": [16],
               "exploration_config": {"warmup_timesteps": 16, "epsilon_timesteps": 64}},
}

class ActionSpaceEnv(gym.Env):
    """Box(3) observations and the action space `env_config["action_space"]`.

    Raises on an action outside its space; the reward is the first entry of the flattened
    action (so losses see a signal that depends on the action), times the task's sign (a task
    family for MAML: `sample_tasks` / `set_task`; +1 unless set); 8-step episodes.
    """

    def __init__(self, env_config: Any) -> None:
        self.action_space = env_config["action_space"]
        self.observation_space = S.Box(-1.0, 1.0, (3,), np.float32)
        self.actions_received = 0
        self._t = 0
        self._sign = 1.0

    def sample_tasks(self, n_tasks: int) -> list:
        return [float(s) for s in self.np_random.choice([-1.0, 1.0], n_tasks)]

    def set_task(self, task: float) -> None:
        self._sign = float(task)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self._t = 0
        return self._obs(), {}

    def step(self, action):
        if not self.action_space.contains(action):
            raise AssertionError(f"action {action!r} is outside {self.action_space}")
        self.actions_received += 1
        self._t += 1
        reward = self._sign * float(S.flatten(self.action_space, action)[0])
        return self._obs(), reward, self._t >= 8, False, {}

    def reward(self, obs: np.ndarray, action: np.ndarray, next_obs: np.ndarray) -> np.ndarray:
        """The same reward over a batch (MB-MPO's hook), for env-space Box actions."""
        return self._sign * np.asarray(action, np.float32).reshape(len(obs), -1)[:, 0]
    # The position, saved and restored by tree search (AlphaZero): the step count and the RNG
    # the observations are drawn from.
    def get_state(self) -> tuple:
        return self._t, copy.deepcopy(self.np_random.bit_generator.state)

    def set_state(self, state: tuple) -> None:
        self._t = int(state[0])
        self.np_random.bit_generator.state = copy.deepcopy(state[1])

    def _obs(self) -> np.ndarray:
        return self.np_random.uniform(-1.0, 1.0, 3).astype(np.float32)


def build(algo: str, space_name: str, logdir: str) -> Any:
    """A trainer of `algo` on `ActionSpaceEnv` with the action space `space_name`, from its tiny config."""
    config = {"seed": 0, "num_workers": 0, "log_sys_usage": False,
              "env_config": {"action_space": ACTION_SPACES[space_name]}, **TINY_CONFIGS[algo]}
    return get_trainer_class(algo)(env=ActionSpaceEnv, config=config, logdir=logdir)
