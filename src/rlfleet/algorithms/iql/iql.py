"""IQL: implicit Q-learning (Kostrikov et al. 2021, arXiv:2110.06169) from offline `input`;
Box and Discrete actions. The losses are in iql_policy.py; the loop, networks and shared keys
in algorithms/common/offline_actor_critic.py (one update per row read)."""
from __future__ import annotations

from typing import Any, List

from rlfleet.algorithms.common.offline_actor_critic import OFFLINE_AC_KEYS, OfflineActorCriticTrainer
from rlfleet.algorithms.iql.iql_policy import IQLTorchPolicy
from rlfleet.config import ConfigKey, InvalidValue, algorithm_config, is_num, number_above, number_in, override

K = ConfigKey


def _expectile(v: Any) -> Any:
    # At 1 the loss weighs only Q above V, so V would grow without bound (at 0, fall).
    if not is_num(v) or not 0.0 < v < 1.0:
        raise InvalidValue("a number in (0, 1), e.g. 0.7")
    return v


ALGO_KEYS: List[ConfigKey] = [
    K("expectile", 0.7, "Expectile of Q(s, a) over the logged actions that V(s) learns (0.5: the mean; towards "
      "1: the best logged action's value).", _expectile),
    K("beta", 3.0, "Inverse temperature of the policy extraction: a logged action's weight is "
      "min(exp(beta * A), max_weight); 0 would be behaviour cloning.", number_above(0)),
    K("max_weight", 100.0, "The largest weight exp(beta * A) of a logged action.", number_above(0)),
    K("value_lr", 3e-4, "Learning rate of the value network V(s).", number_in(0)),
    *OFFLINE_AC_KEYS,
    override("train_batch_size", 256),
]

DEFAULT_CONFIG = algorithm_config(ALGO_KEYS)


class IQLTrainer(OfflineActorCriticTrainer):
    """Implicit Q-Learning, on offline `input`; Box and Discrete actions.

    V(s) learns an upper `expectile` of Q(s, a) over the logged actions (expectile
    regression), Q(s, a) learns r + gamma V(s'), and the policy regresses the logged
    actions weighted by min(exp(beta * (Q(s, a) - V(s))), max_weight): no Q-value is ever
    asked of an action outside the data.

    Defaults are the paper's for locomotion (appendix B: expectile 0.7, beta 3.0, tau 0.005,
    learning rates 3e-4, batch 256, weights clipped at 100). Departures:

    - RLlib 2.x's IQL (`IQLConfig`) writes beta as a temperature dividing the advantage
      (default 0.1, so exp(10 A)), with expectile 0.8 and hard target copies (tau 1.0); here
      beta multiplies it as in the paper.
    - Box actions: the policy is SAC's tanh-squashed Gaussian with a state-dependent
      standard deviation (the paper's code: a Gaussian with a tanh mean and a state-independent
      one); `explore: False` acts with the squashed mean. No dropout, no cosine schedule of
      the actor's learning rate, and no reward normalisation (the paper scales MuJoCo rewards
      by 1000 / (max return - min return)): scale rewards in the data if needed.
    - Discrete actions are supported (Q-nets with one output per action, a categorical
      policy): the paper covers only continuous control.
    - The value and Q-nets share `critic_hiddens` / `critic_hidden_activation`.
    - The update rate: one update per row read (`training_intensity` None); `learning_starts`
      (rows) should cover the dataset when its lines come ordered by quality (see the tuned
      example).

    Measured on mixed Pendulum-v1 data (`python benchmarks/offline_pendulum.py --algos IQL
    --updates 20000 40000`; per seed 100 episodes of `write_mixed_pendulum_dataset`, half a
    scripted expert with noise on its torque, half random torques; score (R - R_random) /
    (R_expert - R_random) over 20 greedy episodes; the Pendulum tuned example's settings; one
    core): 1.02 / 1.01 / 0.94 on seeds 0-2 after 20k updates, 1.02 / 0.81 / 0.97 after 40k; BC
    on the same data scores 0.11 (0.04-0.23). docs/benchmarks.md, "CRR and IQL against BC".
    """

    _name = "IQL"
    _default_config = DEFAULT_CONFIG
    _algo_keys = ALGO_KEYS
    _policy_class = IQLTorchPolicy
