"""DreamerV3's actor-critic, trained on rollouts imagined by the world model (paper section 3):
the actor (categorical with 1% unimix for Discrete actions; a bounded Normal for Box actions),
the two-hot critic with its slow EMA copy, the imagination itself and both losses.

Both learn by Reinforce on imagined actions, as the paper does for every action space, so no
gradient flows through the world model: imagination runs without autograd and the actor and
critic read its detached features.
"""
from __future__ import annotations

import copy
from typing import Dict, Tuple

import gymnasium as gym
import torch
import torch.nn.functional as F
from torch import nn

from rlfleet.algorithms.dreamerv3.losses import NUM_BINS, ReturnNormalizer, lambda_returns, two_hot_loss, two_hot_mean
from rlfleet.algorithms.dreamerv3.world_model import MODEL_SIZES, WorldModel, mlp

# Box actions: the Normal's standard deviation lies in [MIN_STD, MAX_STD] (paper appendix).
MIN_STD, MAX_STD = 0.1, 1.0


def action_size(space: gym.Space) -> int:
    """Width of an action as the RSSM reads it: one-hot for Discrete, the vector for Box."""
    if isinstance(space, gym.spaces.Discrete):
        return int(space.n)
    if isinstance(space, gym.spaces.Box) and len(space.shape) == 1:
        return int(space.shape[0])
    raise ValueError(f"DreamerV3 needs a Discrete or a 1-D Box action space, got {space}; "
                     "flatten MultiDiscrete / Tuple / Dict actions into one of those with a wrapper")


class Actor(nn.Module):
    """Features -> action distribution; `dist(feat)` gives `(sample_fn, log_prob_fn, entropy)`
    helpers through `sample`, `log_prob`, `entropy`, `mode`."""

    def __init__(self, space: gym.Space, feat: int, units: int, layers: int, unimix: float):
        super().__init__()
        self.discrete = isinstance(space, gym.spaces.Discrete)
        self.size = action_size(space)
        self.unimix = unimix
        self.net = mlp(feat, units, layers, self.size if self.discrete else 2 * self.size)

    def params(self, feat: torch.Tensor) -> torch.Tensor:
        return self.net(feat)

    def _logits(self, out: torch.Tensor) -> torch.Tensor:
        probs = (1.0 - self.unimix) * F.softmax(out, -1) + self.unimix / self.size
        return torch.log(probs)

    def _normal(self, out: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        mean, raw_std = out.chunk(2, -1)
        return torch.tanh(mean), (MAX_STD - MIN_STD) * torch.sigmoid(raw_std + 2.0) + MIN_STD

    def sample(self, out: torch.Tensor, generator=None, greedy: bool = False) -> torch.Tensor:
        """An action: class index (Discrete) or a vector in [-1, 1] (Box); the mode if `greedy`."""
        if self.discrete:
            logits = self._logits(out)
            if greedy:
                return logits.argmax(-1)
            return torch.multinomial(logits.exp(), 1, generator=generator).squeeze(-1)
        mean, std = self._normal(out)
        if greedy:
            return mean
        noise = torch.randn(mean.shape, generator=generator, device=mean.device)
        return (mean + std * noise).clamp(-1.0, 1.0)

    def log_prob(self, out: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        if self.discrete:
            return self._logits(out).gather(-1, action.long().unsqueeze(-1)).squeeze(-1)
        mean, std = self._normal(out)
        return torch.distributions.Normal(mean, std).log_prob(action).sum(-1)

    def entropy(self, out: torch.Tensor) -> torch.Tensor:
        if self.discrete:
            logits = self._logits(out)
            return -(logits.exp() * logits).sum(-1)
        _, std = self._normal(out)
        return torch.distributions.Normal(torch.zeros_like(std), std).entropy().sum(-1)

    def as_input(self, action: torch.Tensor) -> torch.Tensor:
        """The action as the RSSM reads it."""
        if self.discrete:
            return F.one_hot(action.long(), self.size).float()
        return action.float()


class DreamerV3Model(nn.Module):
    """Every network of DreamerV3 as one module (one set of weights to sync and checkpoint):
    `world_model`, `actor`, `critic`, `slow_critic` (an EMA of the critic, no gradients) and the
    `return_norm` statistics."""

    def __init__(self, obs_space: gym.Space, action_space: gym.Space, config: dict):
        super().__init__()
        size = config["model_size"]
        _, units, layers, _ = MODEL_SIZES[size]
        a = action_size(action_space)
        self.world_model = WorldModel(obs_space, a, size, config["num_latents"], config["num_classes"],
                                      config["unimix"])
        feat = self.world_model.rssm.feat_size
        self.actor = Actor(action_space, feat, units, layers, config["unimix"])
        self.critic = mlp(feat, units, layers, NUM_BINS, zero_last=True)
        self.slow_critic = copy.deepcopy(self.critic)
        for p in self.slow_critic.parameters():
            p.requires_grad_(False)
        self.return_norm = ReturnNormalizer(config["return_norm_decay"])

    def get_initial_state(self):
        """Acting state: h, z and the previous action (as the RSSM reads it), zeros."""
        rssm = self.world_model.rssm
        return [torch.zeros(rssm.deter), torch.zeros(rssm.num_latents * rssm.num_classes),
                torch.zeros(self.actor.size)]

    def act(self, obs: torch.Tensor, h: torch.Tensor, z: torch.Tensor, prev_action: torch.Tensor, generator=None,
            greedy: bool = False) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """One acting step: `(action, h, z, action as the RSSM reads it)`."""
        wm = self.world_model
        h, _ = wm.rssm.img_step(h, z, prev_action)
        post = wm.rssm.obs_step(h, wm.encoder(obs))
        z = wm.rssm.sample(post, generator, mode=greedy)
        action = self.actor.sample(self.actor.params(torch.cat([h, z], -1)), generator, greedy)
        return action, h, z, self.actor.as_input(action)


@torch.no_grad()
def imagine(model: DreamerV3Model, h: torch.Tensor, z: torch.Tensor, horizon: int, generator=None
            ) -> Dict[str, torch.Tensor]:
    """`horizon` steps imagined from each of the `[N]` start states with the actor's actions.

    Returns `feat [H + 1, N, F]`, `actions [H, N, ...]`, `rewards [H, N]`, `continues [H, N]`.
    """
    rssm = model.world_model.rssm
    feats, actions = [torch.cat([h, z], -1)], []
    for _ in range(horizon):
        action = model.actor.sample(model.actor.params(feats[-1]), generator)
        h, prior = rssm.img_step(h, z, model.actor.as_input(action))
        z = rssm.sample(prior, generator)
        feats.append(torch.cat([h, z], -1))
        actions.append(action)
    feat = torch.stack(feats)
    rewards = two_hot_mean(model.world_model.reward(feat[1:]))
    continues = torch.sigmoid(model.world_model.cont(feat[1:])).squeeze(-1)
    return {"feat": feat, "actions": torch.stack(actions), "rewards": rewards, "continues": continues}


def actor_critic_losses(model: DreamerV3Model, imagined: Dict[str, torch.Tensor], cfg: dict
                        ) -> Tuple[torch.Tensor, torch.Tensor, Dict[str, torch.Tensor]]:
    """`(actor_loss, critic_loss, stats)` on one imagined batch (paper eq. 7-11).

    The critic learns the lambda-returns (two-hot, symlog space) and stays close to its slow
    copy's predictions; the actor maximises the advantage, scaled by max(1, S) with S the EMA
    of the returns' 5th-95th percentile range, plus an entropy bonus.
    """
    feat = imagined["feat"]
    gamma, lam = cfg["gamma"], cfg["lambda"]
    with torch.no_grad():
        values = two_hot_mean(model.critic(feat))
        returns = lambda_returns(imagined["rewards"], values, imagined["continues"], gamma, lam)
        # Imagined steps after a predicted episode end count less: the cumulative discount.
        weight = torch.cumprod(torch.cat([torch.ones_like(imagined["continues"][:1]),
                                          gamma * imagined["continues"][:-1]]), 0)
        slow_values = two_hot_mean(model.slow_critic(feat[:-1]))
        scale = model.return_norm.update(returns)
        advantage = (returns - values[:-1]) / scale
    critic_logits = model.critic(feat[:-1])
    critic_loss = ((two_hot_loss(critic_logits, returns) + cfg["slow_critic_reg"]
                    * two_hot_loss(critic_logits, slow_values)) * weight).mean()
    out = model.actor.params(feat[:-1])
    logp = model.actor.log_prob(out, imagined["actions"])
    entropy = model.actor.entropy(out)
    actor_loss = -((logp * advantage + cfg["entropy_coeff"] * entropy) * weight).mean()
    stats = {"actor_loss": actor_loss.detach(), "critic_loss": critic_loss.detach(),
             "imagined_return_mean": returns.mean(), "imagined_reward_mean": imagined["rewards"].mean(),
             "return_scale": scale, "actor_entropy": entropy.detach().mean(), "value_mean": values.mean()}
    return actor_loss, critic_loss, stats


__all__ = ["Actor", "DreamerV3Model", "action_size", "actor_critic_losses", "imagine"]
