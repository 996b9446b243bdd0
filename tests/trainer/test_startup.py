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
    "evaluation_optimizers_built": evaluation.learning.built is not None,
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


GC_SCRIPT = r"""
import gc, json, sys
assert "torch" not in sys.modules
collections = []
gc.callbacks.append(lambda phase, info: collections.append(1) if phase == "start" else None)
import rlfleet.algorithms.ppo  # the first torch import of the process goes through rlfleet
print("RESULT " + json.dumps({"during_import": len(collections), "enabled": gc.isenabled(),
                              "frozen": gc.get_freeze_count()}))
"""


def test_torch_is_imported_with_the_collector_paused_and_its_objects_frozen():
    proc = subprocess.run([sys.executable, "-c", GC_SCRIPT], capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads([ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")][-1][len("RESULT "):])
    # Importing torch with the collector on runs ~370 collections; what is left comes from
    # the imports after it (gymnasium, rlfleet).
    assert out["enabled"] is True
    assert out["frozen"] > 100_000, out
    assert out["during_import"] < 150, out


def test_an_earlier_torch_import_is_left_alone():
    script = ("import gc, torch\nimport rlfleet.algorithms.ppo\n"
              "print('FROZEN', gc.get_freeze_count(), gc.isenabled())")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "FROZEN 0 True" in proc.stdout
