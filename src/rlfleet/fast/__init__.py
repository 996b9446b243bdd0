"""The NumPy restatement of rlfleet's learning maths, in one place: each formula written once,
so the NumPy learners (`rlfleet.algorithms.*.numpy_learner`) and the NumPy actor share it
rather than restating it per algorithm.

For the small fully connected nets most RL runs train, a torch call costs more in per-op
dispatch and autograd bookkeeping than in arithmetic; these modules compute the same
numbers in NumPy: `mlp` (one linear-stack forward / backward), `distributions` (log-probs,
entropies, KLs and their gradients, sampling), `adam` (Adam's flat-buffer arithmetic),
`blas` (BLAS thread control) and `inference` (the NumPy actor's forward pass), plus per
algorithm a function returning losses and gradients (`ppo`, `dqn`, `sac`, `ddpg`).

This package sits on the models' layer: it imports NumPy, torch's module types and
`rlfleet.utils` only, never a policy, an algorithm or a model class. A model hands its
layers over through `linear_stacks()`; a distribution class names its NumPy kind in
`numpy_kind`.
"""
