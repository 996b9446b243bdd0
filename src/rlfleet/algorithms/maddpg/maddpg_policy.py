"""MADDPG's policy (Lowe et al. 2017): a decentralised actor over one agent's observation and
a critic over every agent's observation and action (or, with `use_local_critic`, over its
own only: DDPG per agent, the paper's baseline).

Discrete actions as in the paper: the actor outputs logits; acting samples Gumbel-max (a
Categorical sample; `explore: False` takes the argmax), and wherever the critic needs an
action that gradients flow through (the actor loss) or a target action, the actor's output
is a relaxed Gumbel-softmax sample at temperature 1 (as RLlib 1.x's
`RelaxedOneHotCategorical`; Lowe et al. 2017, arXiv:1706.02275, use the Gumbel-softmax for
discrete actions). The critic sees stored actions one-hot.

The trainer (maddpg.py) hands every policy the same joint batch: columns `obs_i`,
`new_obs_i`, `actions_i`, `rewards_i`, `terminateds_i`, `n_steps_i` and `new_actions_i`
(agent i's target actor on `new_obs_i`) for each agent i of `critic_agents`.
"""
from __future__ import annotations

import copy
from typing import Dict, List, Tuple

import gymnasium as gym
import numpy as np
import torch
import torch.nn.functional as F

from rlfleet.algorithms.common.off_policy_common import frozen
from rlfleet.models.distributions import Categorical
from rlfleet.models.fcnet import dense_net
from rlfleet.models.target_network import soft_update
from rlfleet.models.torch_model import TorchModel
from rlfleet.policy.sample_batch import DEFAULT_POLICY_ID
from rlfleet.policy.torch_policy import TorchPolicy
from rlfleet.replay import PRIO_WEIGHTS
from rlfleet.rollout.multi_agent_settings import MultiAgentSettings


def column(name: str, agent: int) -> str:
    """The joint batch's column `name` of agent `agent` (e.g. `obs_2`)."""
    return f"{name}_{agent}"


def relaxed_one_hot(logits: torch.Tensor, generator: torch.Generator, temperature: float = 1.0) -> torch.Tensor:
    """A Gumbel-softmax sample softmax((logits + g) / temperature), g ~ Gumbel(0, 1)."""
    u = torch.rand(logits.shape, generator=generator, dtype=logits.dtype).clamp(1e-20, 1.0 - 1e-7)
    return F.softmax((logits - torch.log(-torch.log(u))) / temperature, dim=-1)


def team_spaces(config: dict, policy_id: str, obs_space: gym.Space, action_space: gym.Space
                ) -> List[Tuple[str, int, int]]:
    """`(policy_id, flat obs size, number of actions)` of every agent, in the order of
    `multiagent.policies` (this policy's own spaces for itself): the joint batch's agents."""
    specs = MultiAgentSettings.from_config(config).policies
    if policy_id not in specs:
        if specs and set(specs) != {DEFAULT_POLICY_ID}:
            raise ValueError(f"MADDPG policy {policy_id!r} is not in 'multiagent.policies' ({sorted(specs)}); "
                             "MADDPG's agents are those policies, one per agent")
        specs = {policy_id: None}
    team = []
    for pid, spec in specs.items():
        obs, act = (obs_space, action_space) if pid == policy_id else (spec.observation_space, spec.action_space)
        if obs is None or act is None:
            raise ValueError(f"MADDPG's centralised critic of policy {policy_id!r} needs the spaces of policy "
                             f"{pid!r}: give every PolicySpec in 'multiagent.policies' its observation_space and "
                             "action_space (left at its default, MADDPG makes one policy per env agent with its spaces)")
        check_spaces(pid, obs, act)
        team.append((pid, int(np.prod(obs.shape)), int(act.n)))
    return team


def check_spaces(policy_id: str, obs_space: gym.Space, action_space: gym.Space) -> None:
    """MADDPG's actors read flat Box observations and choose among Discrete actions."""
    if not isinstance(action_space, gym.spaces.Discrete):
        raise ValueError(f"MADDPG needs a Discrete action space (policy {policy_id!r}), got {action_space}; "
                         "use DDPG, TD3 or SAC for Box actions")
    if not isinstance(obs_space, gym.spaces.Box):
        raise ValueError(f"MADDPG needs a Box observation space (policy {policy_id!r}), got {obs_space}; "
                         "flatten the observations in the env")


class MADDPGModel(TorchModel):
    """Actor `obs -> logits`, critic `(obs_j, one-hot a_j for each agent j it sees) -> Q`,
    and target copies of both.

    Args:
        critic_in: the critic's input size (the observations and actions it sees).
        actor_hiddens, actor_hidden_activation: the actor's hidden layers.
        critic_hiddens, critic_hidden_activation: the critic's hidden layers.
    """

    def __init__(self, obs_space, action_space, num_outputs, model_config, name, *, critic_in: int,
                 actor_hiddens: List[int], actor_hidden_activation: str, critic_hiddens: List[int],
                 critic_hidden_activation: str):
        super().__init__(obs_space, action_space, num_outputs, model_config, name)
        self.actor = dense_net(int(np.prod(obs_space.shape)), list(actor_hiddens), actor_hidden_activation,
                               num_outputs)
        self.critic = dense_net(critic_in, list(critic_hiddens), critic_hidden_activation, 1)
        self.target_actor = copy.deepcopy(self.actor)
        self.target_critic = copy.deepcopy(self.critic)
        for p in [*self.target_actor.parameters(), *self.target_critic.parameters()]:
            p.requires_grad_(False)

    def forward(self, input_dict, state, seq_lens):
        obs = input_dict["obs"]
        return self.actor(obs.reshape(obs.shape[0], -1).float()), state


def maddpg_losses(policy: "MADDPGTorchPolicy", model: MADDPGModel, batch: Dict[str, torch.Tensor]
                  ) -> Tuple[Dict[str, torch.Tensor], Dict[str, torch.Tensor]]:
    """The critic and actor losses of agent `policy.agent_index` on one joint batch.

    critic: E[(Q(o, a) - y)^2], y = r + gamma^n (1 - terminated) Q'(o', a'), with a'_j the
        agents' relaxed target actions (`new_actions_j`).
    actor: -E[Q(o, a with a_me <- gumbel_softmax(mu(o_me)))] + actor_feature_reg * E[logits^2].
    """
    cfg = policy.config
    me, agents, sizes = policy.agent_index, policy.critic_agents, policy.action_sizes

    def flat(name: str, j: int) -> torch.Tensor:
        x = batch[column(name, j)]
        return x.reshape(x.shape[0], -1).float()

    obs = [flat("obs", j) for j in agents]
    actions = [F.one_hot(batch[column("actions", j)].long(), sizes[j]).float() for j in agents]
    rewards = batch[column("rewards", me)].float()
    discounts = cfg["gamma"] ** batch[column("n_steps", me)].float() * (1.0 - batch[column("terminateds", me)].float())
    with torch.no_grad():
        next_in = torch.cat([flat("new_obs", j) for j in agents] + [flat("new_actions", j) for j in agents], -1)
        target = rewards + discounts * model.target_critic(next_in).squeeze(-1)
    q_t = model.critic(torch.cat(obs + actions, -1)).squeeze(-1)
    td = q_t - target
    critic_loss = (batch[PRIO_WEIGHTS].float() * td.pow(2)).mean()

    logits = model.actor(obs[agents.index(me)])
    policy_actions = list(actions)
    policy_actions[agents.index(me)] = relaxed_one_hot(logits, policy.generator)
    # The actor's gradient reaches the critic's input, never the critic's weights.
    with frozen(list(model.critic.parameters())):
        q_pi = model.critic(torch.cat(obs + policy_actions, -1)).squeeze(-1)
    actor_loss = -q_pi.mean() + cfg["actor_feature_reg"] * logits.pow(2).mean()
    stats = {"critic_loss": critic_loss.detach(), "actor_loss": actor_loss.detach(),
             "mean_q": q_t.mean().detach(), "mean_td_error": td.abs().mean().detach(), "td_error": td.detach()}
    return {"critic": critic_loss, "actor": actor_loss}, stats


class MADDPGTorchPolicy(TorchPolicy):
    """One agent's actor and (centralised or local) critic.

    Attributes:
        agent_index: this agent's place in the joint batch (`multiagent.policies` order).
        critic_agents: the agents whose observations and actions the critic sees.
        action_sizes: every agent's number of actions.
    """

    def __init__(self, observation_space, action_space, config, **kwargs):
        policy_id = kwargs.get("policy_id", DEFAULT_POLICY_ID)
        check_spaces(policy_id, observation_space, action_space)
        config = dict(config, grad_clip=config["grad_norm_clipping"])  # torch_step clips with `grad_clip`
        team = team_spaces(config, policy_id, observation_space, action_space)
        self.agent_index = [pid for pid, _, _ in team].index(policy_id)
        if config.get("agent_id") is not None and config["agent_id"] != self.agent_index:
            raise ValueError(f"'agent_id': {config['agent_id']!r} of policy {policy_id!r}: it is agent "
                             f"{self.agent_index} of 'multiagent.policies' (the order of the critic's inputs); "
                             f"set agent_id to {self.agent_index} or leave it None")
        self.critic_agents = ([self.agent_index] if local_critic(config, policy_id)
                              else list(range(len(team))))
        self.action_sizes = [n for _, _, n in team]
        self._critic_in = sum(team[j][1] + team[j][2] for j in self.critic_agents)
        me = self.agent_index
        self.loss_columns = (*[column(c, j) for j in self.critic_agents
                               for c in ("obs", "new_obs", "actions", "new_actions")],
                             column("rewards", me), column("terminateds", me), column("n_steps", me), PRIO_WEIGHTS)
        super().__init__(observation_space, action_space, config, **kwargs)

    def make_model_and_action_dist(self):
        cfg = self.config
        if cfg["model"].get("custom_model") is not None:
            raise ValueError("MADDPG builds its own networks: set 'actor_hiddens' and 'critic_hiddens' instead of "
                             "'model.custom_model'")
        model = MADDPGModel(self.observation_space, self.action_space, int(self.action_space.n), cfg["model"],
                            f"{self.policy_id}_maddpg", critic_in=self._critic_in,
                            actor_hiddens=cfg["actor_hiddens"], actor_hidden_activation=cfg["actor_hidden_activation"],
                            critic_hiddens=cfg["critic_hiddens"],
                            critic_hidden_activation=cfg["critic_hidden_activation"])
        return Categorical, model

    def make_optimizers(self) -> Dict[str, torch.optim.Optimizer]:
        return {"critic": self.make_adam(self.model.critic.parameters(), lr=self.config["critic_lr"]),
                "actor": self.make_adam(self.model.actor.parameters(), lr=self.config["actor_lr"])}

    def loss(self, model, dist_class, train_batch):
        return maddpg_losses(self, model, train_batch)

    def target_actions(self, new_obs: np.ndarray) -> np.ndarray:
        """The target actor's relaxed (Gumbel-softmax) actions on `new_obs`, `[B, n]`."""
        with torch.no_grad():
            x = torch.as_tensor(np.asarray(new_obs)).reshape(len(new_obs), -1).float()
            return relaxed_one_hot(self.model.target_actor(x), self.generator).numpy()

    def update_target(self, tau: float = None) -> None:
        """Polyak-averages actor and critic into their targets with `tau` (default: config `tau`)."""
        tau = self.config["tau"] if tau is None else tau
        soft_update(self.model.target_actor, self.model.actor, tau)
        soft_update(self.model.target_critic, self.model.critic, tau)


def is_adversary(policy_id: str) -> bool:
    """Adversaries are the policies whose id starts with "adversary" (MPE's agent names)."""
    return str(policy_id).startswith("adversary")


def local_critic(config: dict, policy_id: str) -> bool:
    """Whether `policy_id` learns with a local critic (DDPG): `use_local_critic`, or "ddpg"
    as `adv_policy` (for adversaries) or `good_policy` (for the others)."""
    algo = config["adv_policy"] if is_adversary(policy_id) else config["good_policy"]
    return bool(config["use_local_critic"]) or algo == "ddpg"
