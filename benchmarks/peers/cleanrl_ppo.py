"""CleanRL-style PPO (the single-file loop of CleanRL's `ppo.py`) on CartPole-v1, written here
against torch and Gymnasium only, with rlfleet's tuned-example hyperparameters.

8-env setting: `gymnasium.vector.SyncVectorEnv` of 8 envs, as CleanRL steps them. Batched
setting: Gymnasium's own batched CartPole (`make_vec(..., vectorization_mode=
"vector_entry_point")`), CleanRL's loop unchanged. Both vector envs reset a finished sub-env on
the following step (Gymnasium 1.x's next-step autoreset,
https://farama.org/Vector-Autoreset-Mode): that step's transition is dropped from the loss.
As in CleanRL, a truncated episode is not bootstrapped.
"""
from __future__ import annotations

import gymnasium as gym
import numpy as np
import torch
import torch.nn as nn

import _common

args = _common.parse_args()
hp = args.hp
_common.pin_one_thread()
torch.manual_seed(args.seed)
np.random.seed(args.seed)
N, T = hp["num_envs"], hp["n_steps"]
if hp["batched"]:
    envs = gym.make_vec("CartPole-v1", num_envs=N, vectorization_mode="vector_entry_point")
else:
    envs = gym.vector.SyncVectorEnv([lambda: gym.make("CartPole-v1") for _ in range(N)])
envs = gym.wrappers.vector.RecordEpisodeStatistics(envs)
act = {"tanh": nn.Tanh, "relu": nn.ReLU}[hp["activation"]]


def mlp(sizes: list, out: int, gain: float) -> nn.Sequential:
    layers: list = []
    for a, b in zip(sizes[:-1], sizes[1:]):
        layers += [nn.Linear(a, b), act()]
    layers.append(nn.Linear(sizes[-1], out))
    for layer in layers:  # CleanRL's orthogonal init
        if isinstance(layer, nn.Linear):
            nn.init.orthogonal_(layer.weight, np.sqrt(2) if layer is not layers[-1] else gain)
            nn.init.zeros_(layer.bias)
    return nn.Sequential(*layers)


obs_dim, n_act = envs.single_observation_space.shape[0], envs.single_action_space.n
actor = mlp([obs_dim, *hp["hiddens"]], n_act, 0.01)
critic = mlp([obs_dim, *hp["hiddens"]], 1, 1.0)
params = list(actor.parameters()) + list(critic.parameters())
opt = torch.optim.Adam(params, lr=hp["lr"], eps=hp["adam_eps"])

# ---- storage, preallocated [T, N] ----
obs_buf = torch.zeros((T, N, obs_dim))
act_buf = torch.zeros((T, N), dtype=torch.long)
logp_buf, rew_buf, done_buf, val_buf = (torch.zeros((T, N)) for _ in range(4))
valid_buf = torch.zeros((T, N), dtype=torch.bool)

progress = _common.Progress(hp)
next_obs = torch.tensor(envs.reset(seed=args.seed)[0], dtype=torch.float32)
next_done = torch.zeros(N)
autoreset = np.zeros(N, dtype=bool)
progress.begin()
while not progress.done():
    # ---- rollout ----
    for t in range(T):
        obs_buf[t], done_buf[t] = next_obs, next_done
        valid_buf[t] = torch.from_numpy(~autoreset)
        with torch.no_grad():
            dist = torch.distributions.Categorical(logits=actor(next_obs))
            a = dist.sample()
            logp_buf[t], val_buf[t] = dist.log_prob(a), critic(next_obs).squeeze(-1)
        act_buf[t] = a
        o, r, term, trunc, info = envs.step(a.numpy())
        autoreset = term | trunc
        rew_buf[t] = torch.as_tensor(r, dtype=torch.float32)
        next_obs, next_done = torch.as_tensor(o, dtype=torch.float32), torch.as_tensor(autoreset, dtype=torch.float32)
        if "episode" in info:
            progress.add_returns(info["episode"]["r"][info["_episode"]])
    progress.steps += T * N
    # ---- GAE ----
    with torch.no_grad():
        next_value = critic(next_obs).squeeze(-1)
        adv = torch.zeros((T, N))
        last = torch.zeros(N)
        for t in reversed(range(T)):
            nonterminal = 1.0 - (next_done if t == T - 1 else done_buf[t + 1])
            nv = next_value if t == T - 1 else val_buf[t + 1]
            delta = rew_buf[t] + hp["gamma"] * nv * nonterminal - val_buf[t]
            last = delta + hp["gamma"] * hp["gae_lambda"] * nonterminal * last
            adv[t] = last
        ret = adv + val_buf
    # ---- update: epochs of shuffled minibatches over the valid rows ----
    keep = valid_buf.reshape(-1)
    b_obs, b_act, b_logp = obs_buf.reshape(-1, obs_dim)[keep], act_buf.reshape(-1)[keep], logp_buf.reshape(-1)[keep]
    b_adv, b_ret = adv.reshape(-1)[keep], ret.reshape(-1)[keep]
    rows = b_obs.shape[0]
    for _ in range(hp["epochs"]):
        perm = torch.randperm(rows)
        for start in range(0, rows, hp["minibatch"]):
            mb = perm[start:start + hp["minibatch"]]
            dist = torch.distributions.Categorical(logits=actor(b_obs[mb]))
            ratio = (dist.log_prob(b_act[mb]) - b_logp[mb]).exp()
            mb_adv = b_adv[mb]
            if hp["norm_adv"]:
                mb_adv = (mb_adv - mb_adv.mean()) / (mb_adv.std() + 1e-8)
            pg = torch.max(-mb_adv * ratio, -mb_adv * ratio.clamp(1 - hp["clip"], 1 + hp["clip"])).mean()
            v_loss = 0.5 * ((critic(b_obs[mb]).squeeze(-1) - b_ret[mb]) ** 2).mean()
            loss = pg + hp["vf_coef"] * v_loss - hp["ent_coef"] * dist.entropy().mean()
            opt.zero_grad()
            loss.backward()
            if hp["max_grad_norm"] is not None:
                nn.utils.clip_grad_norm_(params, hp["max_grad_norm"])
            opt.step()
progress.emit()
