"""Start-up (issue 16): a fresh process that trains PPO locally imports neither torch._dynamo
(sympy) nor Ray, and the policies of workers that only act build no optimizer. Timings vary
with the machine's load, so this checks what costs the time, not seconds
(benchmarks/startup.py measures those)."""
from __future__ import annotations

import json
import os
import subprocess
import sys

SCRIPT = r"""
import json, sys
from rlfleet.algorithms.ppo import PPOTrainer
trainer = PPOTrainer(env="CartPole-v1", config={
    "seed": 0, "num_envs_per_worker": 2, "rollout_fragment_length": 50, "train_batch_size": 200,
    "sgd_minibatch_size": 50, "num_sgd_iter": 2, "model": {"fcnet_hiddens": [16]},
    "evaluation_interval": 1, "evaluation_num_episodes": 1, "evaluation_config": {"horizon": 20}})
result = trainer.train()
evaluation = trainer.evaluator.workers.local_worker().policy_map["default_policy"]
out = {
    "heavy": sorted(m for m in ("torch._dynamo", "sympy", "ray", "torch._inductor") if m in sys.modules),
    "learner_adam": type(trainer.get_policy().optimizer).__module__,
    "evaluation_optimizers_built": evaluation._optimizers is not None,
}
trainer.stop()
print("RESULT " + json.dumps(out))
"""


def test_local_ppo_imports_no_dynamo_and_acting_workers_build_no_optimizer(tmp_path):
    env = dict(os.environ, RLFLEET_RESULTS_DIR=str(tmp_path))
    proc = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=240, env=env,
                          cwd=str(tmp_path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")][-1]
    out = json.loads(line[len("RESULT "):])
    assert out["heavy"] == [], f"imported during start-up and the first train(): {out['heavy']}"
    assert out["learner_adam"] == "rlfleet.policy.optim"
    assert out["evaluation_optimizers_built"] is False
