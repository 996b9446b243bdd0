"""MADDPG (Lowe et al. 2017): decentralised actors, a centralised critic per agent, replayed
in lockstep (all agents' transitions of one env step together, `joint_batch.py`).

The loop is `OffPolicyTrainer.training_step`; MADDPG replaces three of its steps to use one
joint buffer: `store` adds a fragment's joint transitions, `ready_to_learn` waits for that
buffer, and `learn_from_replay` replays one joint batch per update that every trained policy
learns on, after each agent's target actor has filled in its `new_actions_i` column. Learning runs on
torch: MADDPG has no NumPy learner (the fast-path report says so).
"""
from __future__ import annotations

from typing import Any, Dict, List

from rlfleet.algorithms.maddpg.agent_policies import fill_agent_policies
from rlfleet.algorithms.maddpg.joint_batch import joint_transitions
from rlfleet.algorithms.maddpg.maddpg_policy import MADDPGTorchPolicy, column
from rlfleet.algorithms.common.off_policy import OffPolicyTrainer, make_replay_buffer
from rlfleet.algorithms.common.replay_keys import replay_keys
from rlfleet.config import (ConfigKey, activation, algorithm_config, boolean, int_at_least, not_available,
                            number_above, number_in, one_of, optional, override, positive_int_list)
from rlfleet.policy.sample_batch import MultiAgentBatch
from rlfleet.replay import ReplayBuffer
from rlfleet.rollout.multi_agent_settings import MultiAgentSettings

K = ConfigKey

# The replay keys MADDPG honours (no prioritized replay, as in RLlib 1.x's MADDPG).
_REPLAY = {"buffer_size", "store_buffer_in_checkpoints", "learning_starts", "training_intensity",
           "target_network_update_freq", "n_step"}

# RLlib 1.x's MADDPG keys and defaults (`rllib/contrib/maddpg/maddpg.py`), so its configs run unchanged.
ALGO_KEYS: List[ConfigKey] = [
    K("agent_id", None, "This policy's agent: its index in 'multiagent.policies' (None: that index).",
      optional(int_at_least(0), "its index in 'multiagent.policies'")),
    K("use_local_critic", False, "The critic sees this agent's observation and action only (DDPG per agent, "
      "the paper's baseline).", boolean),
    K("use_state_preprocessor", False, "Run the 'model' network before the actor and critic hiddens.",
      not_available("MADDPG's actor and critic read flat observations through 'actor_hiddens' and "
                    "'critic_hiddens' only", False)),
    K("actor_hiddens", [64, 64], "Hidden layer sizes of the actor.", positive_int_list),
    K("actor_hidden_activation", "relu", "Activation of the actor's hidden layers.", activation),
    K("critic_hiddens", [64, 64], "Hidden layer sizes of the critic.", positive_int_list),
    K("critic_hidden_activation", "relu", "Activation of the critic's hidden layers.", activation),
    K("good_policy", "maddpg", "Algorithm of the non-adversary policies: 'maddpg' (centralised critic) or "
      "'ddpg' (local critic).", one_of("maddpg", "ddpg")),
    K("adv_policy", "maddpg", "Algorithm of the adversary policies (ids starting with 'adversary'): 'maddpg' "
      "or 'ddpg'.", one_of("maddpg", "ddpg")),
    *[k for k in replay_keys(buffer_size=int(1e6), learning_starts=1024 * 25, target_network_update_freq=0)
      if k.name in _REPLAY],
    override("multiagent.replay_mode", "lockstep"),
    K("critic_lr", 1e-2, "Learning rate of the critic.", number_in(0)),
    K("actor_lr", 1e-2, "Learning rate of the actor.", number_in(0)),
    K("tau", 0.01, "Polyak averaging per target update: target <- tau * online + (1 - tau) * target.",
      number_above(0, 1)),
    K("actor_feature_reg", 0.001, "Weight of the mean squared actor logits in the actor loss.", number_in(0)),
    K("grad_norm_clipping", 0.5, "Clip each network's gradient norm to this; None: no clipping.",
      optional(number_above(0), "no clipping")),
    override("rollout_fragment_length", 100),
    override("train_batch_size", 1024, "Joint transitions (env steps of every agent) replayed per update."),
    override("timesteps_per_iteration", 0),
    override("min_iter_time_s", 0),
    override("evaluation_duration", 10),
]

DEFAULT_CONFIG = algorithm_config(ALGO_KEYS)


class MADDPGTrainer(OffPolicyTrainer):
    """Multi-Agent DDPG with discrete actions (Gumbel-softmax).

    Attributes:
        joint_buffer: the replay buffer of joint transitions (every agent's of one env step).
    """

    _name = "MADDPG"
    _default_config = DEFAULT_CONFIG
    _algo_keys = ALGO_KEYS
    _policy_class = MADDPGTorchPolicy

    def validate_algorithm_config(self, config: dict) -> None:
        if not MultiAgentSettings.from_config(config).lockstep:
            raise ValueError("'multiagent.replay_mode': MADDPG replays all agents of an env step together; "
                             "set it to 'lockstep' (its default)")
        if config.get("compress_observations"):
            raise ValueError("'compress_observations': True is not available for MADDPG (its joint replay "
                             "stores plain arrays); set it to False")
        for pid, spec in MultiAgentSettings.from_config(config).policies.items():
            if spec.policy_class is not None and not issubclass(spec.policy_class, MADDPGTorchPolicy):
                raise ValueError(f"'multiagent.policies': policy {pid!r} is a {spec.policy_class.__name__}; every "
                                 "MADDPG agent needs MADDPG's policy (leave the PolicySpec's class None)")

    def _make_workers(self, *, env_creator, policy_class, config, num_workers):
        fill_agent_policies(config, env_creator)  # before any policy is built: the critics need every agent's spaces
        return super()._make_workers(env_creator=env_creator, policy_class=policy_class, config=config,
                                     num_workers=num_workers)

    def setup(self, config: dict) -> None:
        super().setup(config)
        # The joint batch's agent order: that of `multiagent.policies`, as the critics' inputs (maddpg_policy.py).
        self.agents = list(config["multiagent"]["policies"] or self.workers.local_worker().policy_map)
        self.joint_buffer: ReplayBuffer = make_replay_buffer(config)
        self.counters.setdefault("num_agent_steps_dropped", 0)

    # --- what differs from `OffPolicyTrainer.training_step`: one joint buffer -----------
    def store(self, batch: MultiAgentBatch) -> None:
        """Adds the fragment's joint transitions (every agent's of one env step) to the joint
        buffer; agent steps without a joint row count as dropped."""
        gammas = {pid: self.get_policy(pid).config["gamma"] for pid in self.agents}
        joint, dropped = joint_transitions(batch, self.agents, self.config["n_step"], gammas)
        self.counters["num_agent_steps_dropped"] += dropped
        if joint.count:
            self.joint_buffer.add(joint)

    def ready_to_learn(self, to_train: List[str]) -> List[str]:
        """The trained agents, once the joint buffer holds something."""
        return [pid for pid in to_train if pid in self.agents] if len(self.joint_buffer) > 0 else []

    def learn_from_replay(self, policy_ids: List[str], sampled: int) -> None:
        """One update: one joint batch, each agent's target actions filled in, which every
        policy of `policy_ids` learns on."""
        replayed = self.joint_buffer.sample(self.config["train_batch_size"])
        for i, pid in enumerate(self.agents):
            replayed[column("new_actions", i)] = self.get_policy(pid).target_actions(replayed[column("new_obs", i)])
        for pid in policy_ids:
            info = self.get_policy(pid).learn_on_batch(replayed)
            info.pop("td_error", None)
            self._last_infos[pid] = info
            self.counters["num_agent_steps_trained"] += replayed.count

    # --- state: the trainer's, plus the joint buffer ------------------------------------
    def get_state(self) -> Dict[str, Any]:
        """`OffPolicyTrainer.get_state()` (with `update_credit`), plus `joint_replay_buffer`
        with `store_buffer_in_checkpoints`."""
        state = super().get_state()
        if self.config.get("store_buffer_in_checkpoints"):
            state["joint_replay_buffer"] = self.joint_buffer.get_state()
        return state

    def set_state(self, state: Dict[str, Any]) -> None:
        """`Trainer.set_state(state)`, then the joint buffer it holds (its capacity checked first)."""
        buffer_state = state.get("joint_replay_buffer")
        if buffer_state is not None and int(buffer_state.get("capacity", -1)) != int(self.config["buffer_size"]):
            raise ValueError(f"it holds a replay buffer of capacity {buffer_state.get('capacity')!r}; this "
                             f"trainer's has {self.config['buffer_size']} (set buffer_size to match)")
        super().set_state(state)
        if buffer_state is not None:
            self.joint_buffer.set_state(buffer_state)


__all__ = ["DEFAULT_CONFIG", "MADDPGTrainer"]
