"""SlateQ's networks (Ie et al. 2019, "SlateQ: A Tractable Decomposition for Reinforcement
Learning with Recommendation Sets", IJCAI; arXiv:1905.12767): a per-item Q-network, a learned
conditional-logit user choice model, and the slate search over both.

The decomposition: Q(s, A) = sum_{i in A + null} P(i | s, A) Qbar(s, i), where the user picks
item i of slate A (or nothing, the null item) with conditional-logit probability
P(i | s, A) = v(s, i) / (v(s, null) + sum_{j in A} v(s, j)), v = exp(score).

- Qbar(s, i): one MLP (`fcnet_hiddens_per_candidate`) over [user, document, is-null]; the null
  item is an all-zero document with the flag set, so no-click has a learned long-run value
  (RLlib 1.x and RecSim fix Qbar(s, null) at 0; the paper's decomposition includes it, and in
  a session with a budget a no-click step still leads on to the rest of the session).
- score(s, i) = user^T W doc + w . doc + b . user, score(s, null) a learned scalar: the
  multinomial logit with a learned bilinear affinity (RLlib 1.x learns beta * <user, doc>, which
  needs user and document vectors of one size).
"""
from __future__ import annotations

import copy
import itertools
import math
from typing import List, Tuple

import gymnasium as gym
import torch
from torch import nn

from rlfleet.models.distributions import ActionDistribution
from rlfleet.models.fcnet import dense_net
from rlfleet.models.preprocessors import DictFlatteningPreprocessor
from rlfleet.models.torch_model import TorchModel

SLATE_SELECTIONS = ("exact", "greedy", "top_k")
# Exact search scores every set of slate_size candidates; beyond this many it is too slow to act.
MAX_EXACT_SLATES = 100_000


class ObsLayout:
    """Where `user`, `doc` and `response` sit in the flattened Dict observation.

    Raises:
        ValueError: naming what is missing when the observation is not RecSim-like.
    """

    def __init__(self, obs_space: gym.Space, action_space: gym.Space):
        original = getattr(obs_space, "original_space", obs_space)
        if not isinstance(action_space, gym.spaces.MultiDiscrete):
            raise ValueError(f"SlateQ needs a MultiDiscrete([num_candidates] * slate_size) action space (a slate of "
                             f"distinct candidate indices), as in rlfleet.env.examples.interest_evolution; "
                             f"got {action_space}")
        needed = ("user", "doc", "response")
        if not isinstance(original, gym.spaces.Dict) or any(k not in original.spaces for k in needed):
            raise ValueError(
                f"SlateQ needs a Dict observation with 'user' (a Box vector), 'doc' (a Box [num_candidates, "
                f"doc_dim]) and 'response' (a Box [slate_size, >= 1] whose first column is 1 where the user clicked), "
                f"as in rlfleet.env.examples.interest_evolution; got {action_space} actions with {original} "
                f"observations")
        user, doc, response = (original.spaces[k] for k in needed)
        if not (isinstance(user, gym.spaces.Box) and len(user.shape) == 1 and isinstance(doc, gym.spaces.Box)
                and len(doc.shape) == 2 and isinstance(response, gym.spaces.Box) and len(response.shape) == 2):
            raise ValueError(f"SlateQ needs 'user' a 1-D Box, 'doc' a 2-D Box [num_candidates, doc_dim] and "
                             f"'response' a 2-D Box [slate_size, >= 1]; got user {user}, doc {doc}, "
                             f"response {response}")
        self.num_candidates, self.doc_dim = (int(n) for n in doc.shape)
        self.user_dim = int(user.shape[0])
        nvec = getattr(action_space, "nvec", None)
        if (not isinstance(action_space, gym.spaces.MultiDiscrete) or nvec.ndim != 1
                or any(int(n) != self.num_candidates for n in nvec) or len(nvec) > self.num_candidates):
            raise ValueError(f"SlateQ needs a MultiDiscrete([num_candidates] * slate_size) action space (a slate of "
                             f"distinct candidate indices) with num_candidates {self.num_candidates} from 'doc'; "
                             f"got {action_space}")
        self.slate_size = int(len(nvec))
        if tuple(response.shape)[0] != self.slate_size:
            raise ValueError(f"SlateQ: 'response' has {response.shape[0]} rows, the slate has {self.slate_size} "
                             "positions: it needs one row per slate position")
        columns = DictFlatteningPreprocessor(original).column_slices()
        self.user, self.doc, self.response = columns["user"], columns["doc"], columns["response"]
        self.response_width = int(response.shape[1])

    def split(self, flat: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        """`(user [B, U], docs [B, N, D])` of flattened observations."""
        flat = flat.float()
        return flat[:, self.user], flat[:, self.doc].reshape(-1, self.num_candidates, self.doc_dim)

    def clicks(self, flat: torch.Tensor) -> torch.Tensor:
        """`[B]` the clicked slate position in a (next) observation's response, `slate_size`
        for no click."""
        resp = flat[:, self.response].reshape(-1, self.slate_size, self.response_width)[..., 0]
        clicked = resp > 0.5
        return torch.where(clicked.any(-1), clicked.float().argmax(-1),
                           torch.full_like(clicked[:, 0], self.slate_size, dtype=torch.long))


class ChoiceModel(nn.Module):
    """Conditional-logit scores: user^T W doc + w . doc + b . user per document, one learned
    score for no click. Starts at all zeros (every choice equally likely)."""

    def __init__(self, user_dim: int, doc_dim: int):
        super().__init__()
        self.bilinear = nn.Parameter(torch.zeros(user_dim, doc_dim))
        self.doc_weight = nn.Parameter(torch.zeros(doc_dim))
        self.user_weight = nn.Parameter(torch.zeros(user_dim))
        self.no_click = nn.Parameter(torch.zeros(()))

    def forward(self, user: torch.Tensor, docs: torch.Tensor) -> torch.Tensor:
        """`[B, n + 1]` scores of `docs [B, n, D]`, the last column no click."""
        s = torch.einsum("bu,ud,bnd->bn", user, self.bilinear, docs) + docs @ self.doc_weight
        s = s + (user @ self.user_weight).unsqueeze(-1)
        return torch.cat([s, self.no_click.expand(s.shape[0], 1)], dim=-1)


class ItemQNet(nn.Module):
    """Qbar(s, i) for every candidate and the null item: `[B, N + 1]`, the last the null item."""

    def __init__(self, user_dim: int, doc_dim: int, hiddens: List[int], activation: str):
        super().__init__()
        self.net = dense_net(user_dim + doc_dim + 1, list(hiddens), activation, 1)

    def forward(self, user: torch.Tensor, docs: torch.Tensor) -> torch.Tensor:
        b, n, d = docs.shape
        null = torch.zeros(b, 1, d, dtype=docs.dtype)
        items = torch.cat([docs, null], dim=1)
        flag = torch.zeros(b, n + 1, 1, dtype=docs.dtype)
        flag[:, n] = 1.0
        x = torch.cat([user.unsqueeze(1).expand(b, n + 1, user.shape[-1]), items, flag], dim=-1)
        return self.net(x).squeeze(-1)


def slate_values(weights: torch.Tensor, q: torch.Tensor, slates: torch.Tensor) -> torch.Tensor:
    """Q(s, A) of each slate: `weights`, `q` are `[B, N + 1]` (v(s, i) = exp(score), Qbar; the
    last column the null item), `slates` `[B, S, k]` or `[S, k]` candidate indices -> `[B, S]`."""
    b, n1 = q.shape
    if slates.dim() == 2:
        slates = slates.unsqueeze(0).expand(b, *slates.shape)
    s, k = slates.shape[1], slates.shape[2]
    idx = slates.reshape(b, s * k)
    v = weights.gather(1, idx).reshape(b, s, k)
    qv = q.gather(1, idx).reshape(b, s, k)
    v0, q0 = weights[:, -1:], q[:, -1:]
    return ((v * qv).sum(-1) + v0 * q0) / (v.sum(-1) + v0)


def best_slates(weights: torch.Tensor, q: torch.Tensor, slate_size: int, method: str,
                all_slates: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    """`(slates [B, k], Q(s, slate) [B])`: the slate search.

    - "exact": every set of `slate_size` candidates (`all_slates`), the best by Q(s, A).
    - "greedy": the paper's greedy search: add, one at a time, the candidate that most raises
      Q(s, A) of the items chosen so far.
    - "top_k": the paper's top-k: the `slate_size` candidates with the largest v(s, i) Qbar(s, i).
    """
    n = q.shape[1] - 1
    if method == "exact":
        values = slate_values(weights, q, all_slates)
        best, index = values.max(dim=1)
        return all_slates[index], best
    if method == "top_k":
        slates = (weights[:, :n] * q[:, :n]).topk(slate_size, dim=1).indices
    else:
        num, den = weights[:, n] * q[:, n], weights[:, n].clone()
        taken = torch.zeros(q.shape[0], n, dtype=torch.bool)
        picks = []
        for _ in range(slate_size):
            gain = (num.unsqueeze(1) + weights[:, :n] * q[:, :n]) / (den.unsqueeze(1) + weights[:, :n])
            pick = gain.masked_fill(taken, -math.inf).argmax(dim=1)
            rows = torch.arange(q.shape[0])
            num, den = num + weights[rows, pick] * q[rows, pick], den + weights[rows, pick]
            taken[rows, pick] = True
            picks.append(pick)
        slates = torch.stack(picks, dim=1)
    return slates, slate_values(weights, q, slates.unsqueeze(1)).squeeze(1)


class SlateQModel(TorchModel):
    """The online and target item Q-networks and the choice model.

    Args:
        obs_space: the flattened Dict observation (with `original_space`).
        action_space: `MultiDiscrete([num_candidates] * slate_size)`.
        model_config: the `model` sub-config (its `fcnet_activation` is the Q-net's).
        name: the model's name.
        hiddens: `fcnet_hiddens_per_candidate`.
        slate_selection: one of `SLATE_SELECTIONS`.
    """

    def __init__(self, obs_space: gym.Space, action_space: gym.Space, model_config: dict, name: str, *,
                 hiddens: List[int], slate_selection: str):
        super().__init__(obs_space, action_space, 0, model_config, name)
        self.layout = layout = ObsLayout(obs_space, action_space)
        num_slates = math.comb(layout.num_candidates, layout.slate_size)
        if slate_selection == "exact" and num_slates > MAX_EXACT_SLATES:
            raise ValueError(f"'slate_selection': 'exact' would score {num_slates} slates per step (choose "
                             f"{layout.slate_size} of {layout.num_candidates}); set 'slate_selection' to 'greedy' "
                             f"or 'top_k' above {MAX_EXACT_SLATES}")
        self.slate_selection = slate_selection
        activation = model_config.get("fcnet_activation", "relu")
        self.q_net = ItemQNet(layout.user_dim, layout.doc_dim, hiddens, activation)
        self.target_q_net = copy.deepcopy(self.q_net)
        self.choice_model = ChoiceModel(layout.user_dim, layout.doc_dim)
        combos = list(itertools.combinations(range(layout.num_candidates), layout.slate_size)) \
            if slate_selection == "exact" else [tuple(range(layout.slate_size))]
        self.register_buffer("all_slates", torch.tensor(combos, dtype=torch.long), persistent=False)

    def item_weights(self, user: torch.Tensor, docs: torch.Tensor) -> torch.Tensor:
        """`[B, n + 1]` v(s, i) = exp(score), scaled by the row's largest (ratios are what count)."""
        scores = self.choice_model(user, docs)
        return torch.exp(scores - scores.max(dim=1, keepdim=True).values)

    def select(self, flat_obs: torch.Tensor, target: bool = False) -> Tuple[torch.Tensor, torch.Tensor]:
        """`(slates [B, k], their Q(s, A) [B])` by the slate search, with the online (or target) Q-net."""
        user, docs = self.layout.split(flat_obs)
        q = (self.target_q_net if target else self.q_net)(user, docs)
        return best_slates(self.item_weights(user, docs), q, self.layout.slate_size, self.slate_selection,
                           self.all_slates)

    def forward(self, input_dict, state, seq_lens):
        """The greedy slate `[B, k]` as floats: the inputs of `SlateDistribution` (what an
        export traces)."""
        return self.select(input_dict["obs"])[0].float(), state


class SlateDistribution(ActionDistribution):
    """The "distribution" of a slate search: its inputs are the chosen slate, which is also
    its deterministic sample (SlateQ explores with SlateEpsilonGreedy, never by sampling this)."""

    def deterministic_sample(self) -> torch.Tensor:
        return self.inputs

    def sample(self, generator=None) -> torch.Tensor:
        return self.inputs

    def logp(self, actions: torch.Tensor) -> torch.Tensor:
        return torch.zeros(actions.shape[0])
