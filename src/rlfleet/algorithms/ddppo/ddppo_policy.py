"""DD-PPO's policy: PPO whose gradients are averaged over every worker before each step
(Wijmans et al. 2020, "DD-PPO: Learning Near-Perfect PointGoal Navigators from 2.5 Billion
Frames"), and the worker-side pieces: joining the process group, sampling and learning."""
from __future__ import annotations

import datetime
import os
import socket
from typing import Any, Dict, List, Optional

import torch
import torch.distributed as dist

from rlfleet.algorithms.ppo.ppo_policy import PPOTorchPolicy
from rlfleet.policy.sample_batch import SampleBatch
from rlfleet.rollout.postprocessing import standardized


class DDPPOTorchPolicy(PPOTorchPolicy):
    """PPO; inside a process group (a DD-PPO worker), each update's gradient is the mean of
    all workers' gradients (one all-reduce of the flattened gradients per SGD step), so
    that every worker takes the same step and their weights stay identical."""

    def reduce_gradients(self, names: List[str]) -> None:
        if not (dist.is_available() and dist.is_initialized()):
            return  # the trainer's own worker: it never learns
        params = [p for name in names for group in self.optimizers[name].param_groups for p in group["params"]]
        for p in params:
            if p.grad is None:  # every worker must send the same layout
                p.grad = torch.zeros_like(p)
        flat = torch.cat([p.grad.reshape(-1) for p in params])
        dist.all_reduce(flat)
        flat /= dist.get_world_size()
        offset = 0
        for p in params:
            n = p.numel()
            p.grad.copy_(flat[offset:offset + n].view_as(p.grad))
            offset += n


# --- worker side (run on the remote workers through WorkerSet.foreach_worker_with_index) ---
def free_loopback_port() -> int:
    """A TCP port free on 127.0.0.1 now (the process group's rendezvous)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _loopback_interface() -> Optional[str]:
    for _, name in socket.if_nameindex():
        if name.startswith("lo"):
            return name
    return None


def join_process_group(worker, worker_index: int, *, ranks: Dict[int, int], port: int, backend: str,
                       timeout_s: float) -> Optional[int]:
    """Joins the workers' process group (rendezvous on 127.0.0.1:`port`); the trainer's
    own worker (index 0) is no member. Returns the rank (None on the trainer's worker)."""
    if worker_index not in ranks:
        return None
    if backend == "gloo" and "GLOO_SOCKET_IFNAME" not in os.environ:
        # Loopback only: never open the collective on a network interface.
        name = _loopback_interface()
        if name:
            os.environ["GLOO_SOCKET_IFNAME"] = name
    if dist.is_initialized():  # a process reused by Ray
        dist.destroy_process_group()
    dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=ranks[worker_index],
                            world_size=len(ranks), timeout=datetime.timedelta(seconds=timeout_s))
    return ranks[worker_index]


def leave_process_group(worker, worker_index: int) -> None:
    if worker_index > 0 and dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


def _common_count(count: int) -> int:
    """The smallest of every worker's `count` (all workers must take the same SGD steps)."""
    t = torch.tensor([count], dtype=torch.int64)
    dist.all_reduce(t, op=dist.ReduceOp.MIN)
    return int(t.item())


def sample_and_learn(worker, worker_index: int, *, num_sgd_iter: int, minibatch_size: int, shuffle: bool,
                     global_vars: Dict[str, Any], send_weights: bool) -> Optional[Dict[str, Any]]:
    """One DD-PPO step on a remote worker: sample one batch, then minibatch SGD on it with
    gradients averaged over all workers. Returns the learner info, the steps sampled and
    trained, and (when `send_weights` and this is rank 0) the new weights."""
    if worker_index == 0 or not dist.is_initialized():
        return None
    worker.set_global_vars(global_vars)
    # === sample ===
    batch = worker.sample().as_multi_agent()
    # === learn (every worker in the same order: each all-reduce pairs up) ===
    info: Dict[str, Any] = {}
    trained = 0
    for pid in sorted(worker.policies_to_train):
        policy = worker.get_policy(pid)
        policy_batch = batch.policy_batches.get(pid)
        count = _common_count(policy_batch.count if policy_batch is not None else 0)
        if count == 0:
            continue
        if policy_batch.count > count:  # equal batches: every worker takes the same SGD steps
            policy_batch = policy_batch.slice(0, count)
        policy_batch[SampleBatch.ADVANTAGES] = standardized(policy_batch[SampleBatch.ADVANTAGES])
        info[pid] = policy.multi_epoch_sgd(policy_batch, num_sgd_iter, minibatch_size, shuffle=shuffle)
        trained += count
    out = {"info": info, "env_steps": batch.env_steps(), "agent_steps": batch.agent_steps(), "trained": trained}
    if send_weights and dist.get_rank() == 0:
        out["weights"] = worker.get_weights()
    return out
