"""The NumPy restatement of rlfleet's learning maths, in one place (issue 25).

For the small fully connected nets most RL runs train, a torch call costs more in per-op
dispatch and autograd bookkeeping than in arithmetic; these modules compute the same
numbers in NumPy: `mlp` (one linear-stack forward / backward), `distributions` (log-probs,
entropies, KLs and their gradients, sampling), `adam` (Adam's flat-buffer arithmetic),
`blas` (BLAS thread control) and `inference` (the sampler's NumPy acting).

This package sits on the models' layer: it imports NumPy, torch's module types and
`rlfleet.utils` only, never a policy, an algorithm or a model class. A model hands its
layers over through `linear_stacks()`; a distribution class names its NumPy kind in
`numpy_kind`.
"""
