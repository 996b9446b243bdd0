"""The common config keys, each declared once as ``ConfigKey(name, default, doc, check)``.

``COMMON_CONFIG``, ``MODEL_DEFAULTS`` and ``KEY_INDEX`` (every key by dotted path) are
derived from these declarations, and so are the validation messages and the docs page.
"""
from __future__ import annotations

import copy
from typing import Any, Dict, List, NamedTuple, Optional, Tuple

from rlfleet.callbacks import DefaultCallbacks
from rlfleet.config.checks import (Check, activation, boolean, dict_value, int_at_least, not_available, number_in,
                                   one_of, optional, positive_int_list)
from rlfleet.config.fragments import fragment_length
from rlfleet.config.key_checks import (batch_wait_ms, callable_or_none, callbacks_class, clip_rewards,
                                       conv_filters, dict_obs_key, environ, evaluation_duration,
                                       evaluation_duration_unit, exploration_type, framework,
                                       input_evaluation, input_spec, logger_config, name_or_class,
                                       vectorize_mode,
                                       optimizer_options, output_spec, path_or_none, policies, policy_ids,
                                       record_env, sampler_class_or_none, space_or_none, str_list)


class ConfigKey(NamedTuple):
    """One config key: dotted ``name`` for nested keys, its default, one line of meaning."""

    name: str
    default: Any
    doc: str
    check: Optional[Check] = None


K = ConfigKey

MODEL_KEYS: List[ConfigKey] = [
    K("fcnet_hiddens", [256, 256], "Hidden layer sizes of the fully connected network.", positive_int_list),
    K("fcnet_activation", "tanh", "Activation of the fully connected layers.", activation),
    K("conv_filters", None, "CNN layers as [out_channels, kernel, stride(, 'same'|'valid')]; None picks by image "
      "size.",
      conv_filters),
    K("conv_activation", "relu", "Activation of the CNN layers.", activation),
    K("post_fcnet_hiddens", [], "Extra dense layers after the conv/LSTM stack.", positive_int_list),
    K("post_fcnet_activation", "relu", "Activation of the post_fcnet layers.", activation),
    K("free_log_std", False, "Learn Gaussian log-std as free parameters, not as network outputs.", boolean),
    K("no_final_linear", False, "Let the last hidden layer emit the action outputs directly.", boolean),
    K("vf_share_layers", True, "Value head shares the policy's hidden layers.", boolean),
    K("use_lstm", False, "Wrap the model with an LSTM.", boolean),
    K("max_seq_len", 20, "Longest sequence an RNN is trained on.", int_at_least(1)),
    K("lstm_cell_size", 256, "LSTM state size.", int_at_least(1)),
    K("lstm_use_prev_action", False, "Feed the previous action into the LSTM.", boolean),
    K("lstm_use_prev_reward", False, "Feed the previous reward into the LSTM.", boolean),
    K("_time_major", False, "RNN tensors are [time, batch, ...] instead of [batch, time, ...].", boolean),
    K("use_attention", False, "Wrap the model with a GTrXL attention net."),
    K("attention_num_transformer_units", 1, "Number of transformer blocks.", int_at_least(1)),
    K("attention_dim", 64, "Input/output size of each transformer block.", int_at_least(1)),
    K("attention_num_heads", 1, "Attention heads per block.", int_at_least(1)),
    K("attention_head_dim", 32, "Size of each attention head.", int_at_least(1)),
    K("attention_memory_inference", 50, "Past timesteps attended to when acting.", int_at_least(1)),
    K("attention_memory_training", 50, "Past timesteps attended to when learning.", int_at_least(1)),
    K("attention_position_wise_mlp_dim", 32, "Hidden size of the position-wise MLP.", int_at_least(1)),
    K("attention_init_gru_gate_bias", 2.0, "Initial bias of the GRU gates."),
    K("attention_use_n_prev_actions", 0, "Previous actions fed to the attention net.", int_at_least(0)),
    K("attention_use_n_prev_rewards", 0, "Previous rewards fed to the attention net.", int_at_least(0)),
    K("framestack", True, "Stack the last 4 frames in the deepmind Atari preprocessing.", boolean),
    K("dim", 84, "Side length images are resized to.", int_at_least(1)),
    K("grayscale", False, "Convert images to grayscale (deepmind preprocessing).", boolean),
    K("zero_mean", True, "Models scale uint8 image pixels to [-1, 1] (True) or to [0, 1] (False).", boolean),
    K("action_mask_key", "action_mask", "Key of the action mask in a Dict observation (1 legal, 0 illegal): "
      "the model sees the rest and illegal actions are never taken.", dict_obs_key),
    K("custom_model", None, "Registered name or class of a user model.", name_or_class("custom model")),
    K("custom_model_config", {}, "Keyword arguments passed to the custom model.", dict_value(none_as_empty=True)),
    K("custom_action_dist", None, "Registered name or class of a user action distribution.",
      name_or_class("custom action distribution")),
    K("custom_preprocessor", None, "Registered name of a user preprocessor.", name_or_class("custom preprocessor")),
]


def _build(keys: List[ConfigKey]) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    for key in keys:
        *parents, leaf = key.name.split(".")
        node = out
        for p in parents:  # a parent is declared (as {}) before its children
            node = node[p]
        node[leaf] = copy.deepcopy(key.default)
    return out


MODEL_DEFAULTS: Dict[str, Any] = _build(MODEL_KEYS)

_TF_SESSION_ARGS = {
    "intra_op_parallelism_threads": 2,
    "inter_op_parallelism_threads": 2,
    "gpu_options": {"allow_growth": True},
    "log_device_placement": False,
    "device_count": {"CPU": 1},
    "allow_soft_placement": True,
}
_LOCAL_TF_SESSION_ARGS = {"intra_op_parallelism_threads": 8, "inter_op_parallelism_threads": 8}

COMMON_KEYS: Dict[str, List[ConfigKey]] = {
    "Rollout workers": [
        K("num_workers", 0, "Remote sampling workers; 0 samples in the trainer's own process.", int_at_least(0)),
        K("num_envs_per_worker", 1, "Envs each worker steps together as one batched vector.", int_at_least(1)),
        K("create_env_on_driver", False, "Give the local worker an env even when remote workers sample.", boolean),
        K("rollout_fragment_length", 200, "Steps per sampled fragment, per env of a worker; \"auto\" (RLlib "
          "2.x): train_batch_size / (max(num_workers, 1) * num_envs_per_worker), rounded up.", fragment_length),
        K("batch_mode", "truncate_episodes", "truncate_episodes: fixed-size fragments; "
          "complete_episodes: fragments end only at episode ends.",
          one_of("truncate_episodes", "complete_episodes")),
    ],
    "Learning": [
        K("gamma", 0.99, "Discount factor.", number_in(0, 1)),
        K("lr", 0.0001, "Learning rate.", number_in(0)),
        K("train_batch_size", 200, "Steps per learning batch (fragments are concatenated up to it).", int_at_least(1)),
        K("model", MODEL_DEFAULTS, "Model options; see the model.* keys.", dict_value(none_as_empty=True)),
        K("optimizer", {}, "Extra torch.optim.Adam arguments (eps, betas, weight_decay, amsgrad, ...) for every "
          "optimizer of a policy; they override the algorithm's own (SAC's eps, DQN's adam_epsilon). Learning "
          "rates have their own keys.", optimizer_options),
    ],
    "Environment": [
        K("horizon", None, "Force an episode end after this many steps; None uses the env's time limit.",
          optional(int_at_least(1), "the env's own limit")),
        K("soft_horizon", False, "At the horizon, end the episode for learning but do not reset the env.", boolean),
        K("no_done_at_end", False, "Never mark the last step of an episode as done.", boolean),
        K("env", None, "Env name (registered or Gymnasium id), class, 'module.Class' path, or "
          "'envpool:<id>' (num_envs_per_worker envs stepped as one batch by EnvPool's C++ threads)."),
        K("observation_space", None, "Policies' observation space; None infers it from the env.", space_or_none),
        K("action_space", None, "Policies' action space; None infers it from the env.", space_or_none),
        K("env_config", {}, "Dict given to the env creator (as an EnvContext).", dict_value(none_as_empty=True)),
        K("env_task_fn", None, "fn(train_result, env, env_context) -> new task, for TaskSettableEnv.",
          callable_or_none("(train_results, task_settable_env, env_ctx) -> new_task")),
        K("render_env", False, "Render the env of the local worker (or of worker 1)."),
        K("record_env", False, "Record videos: True for the results folder, or a folder path.", record_env),
        K("_record_env_episodes", None, "record_env records the first this many episodes; None: episodes 0, 1, 8, "
          "27, ..., 1000, 2000, ... (`rlfleet evaluate --video` sets the episodes it runs).",
          optional(int_at_least(1), "Gymnasium's schedule")),
        K("clip_rewards", None, "None: sign-clip on Atari only; True: sign; False: never; "
          "x: clip to [-x, x]; (lo, hi): clip to [lo, hi].", clip_rewards),
        K("normalize_actions", True, "Learn in a normalized action space; unsquash to the env's bounds.", boolean),
        K("clip_actions", False, "Clip actions to the env's bounds before stepping.", boolean),
        K("preprocessor_pref", "deepmind", "Default observation preprocessors: 'deepmind' or 'rllib'.",
          one_of("deepmind", "rllib", None)),
    ],
    "Debugging and fault tolerance": [
        K("log_level", "WARN", "Log level of rlfleet's loggers.",
          one_of("DEBUG", "INFO", "WARN", "WARNING", "ERROR")),
        K("callbacks", DefaultCallbacks, "DefaultCallbacks subclass whose hooks run during training.",
          callbacks_class),
        K("ignore_worker_failures", False, "Keep training when a remote worker dies.", boolean),
        K("recreate_failed_workers", False, "Restart a dead remote worker and give it the current weights.", boolean),
        K("disable_env_checking", False, "Skip the per-step checks of observations (space, NaN) and rewards "
          "(finite) after the first episode; env errors still say where they happened.", boolean),
        K("max_nonfinite_updates", 5, "Gradient updates with a NaN/inf loss or gradient are skipped (counted as "
          "info/learner/<policy>/num_nonfinite_updates); more than this many in a row raise.", int_at_least(0)),
        K("fast_path", "auto", "The NumPy fast paths for acting and learning (PPO, SAC, DDPG/TD3, DQN on small fully "
          "connected nets): 'auto' where they compute the same update as torch, 'off' torch everywhere, 'require' "
          "raise where the learner cannot take it; reported as info/learner/<policy>/fast_path and "
          "fast_path_reason.", one_of("auto", "off", "require")),
        K("keep_per_episode_custom_metrics", False, "RLlib 1.x's per-episode lists of custom metrics; only "
          "False (custom_metrics hold <name>_mean/_min/_max).",
          not_available("custom metrics are summarized as <name>_mean/_min/_max", False)),
        K("log_sys_usage", True, "Add CPU/memory (and GPU) usage to the results.", boolean),
        K("fake_sampler", False, "Replay one sampled batch forever (throughput testing only)."),
    ],
    "Framework": [
        K("framework", "torch", "Deep-learning framework: 'torch'; RLlib 1.x's 'tf', 'tf2' and 'tfe' run the same "
          "model in torch (one warning).", framework),
        K("eager_tracing", False, "TensorFlow only; accepted and ignored."),
    ],
    "Exploration": [
        K("explore", True, "Explore when computing actions, unless a call says otherwise.", boolean),
        K("exploration_config", {}, "Exploration object config: 'type' plus its constructor arguments.",
          dict_value()),
        K("exploration_config.type", "StochasticSampling", "Exploration class or its name "
          "(StochasticSampling, EpsilonGreedy, PerWorkerEpsilonGreedy, SoftQ, Random, GaussianNoise, "
          "OrnsteinUhlenbeckNoise, PerWorkerGaussianNoise, PerWorkerOrnsteinUhlenbeckNoise, ParameterNoise, Curiosity, RE3) or a "
          "'package.module.Class' path; its other keys are that class's arguments (see its docstring). Curiosity (ICM, "
          "Discrete / MultiDiscrete actions; PPO, PG, A2C and other algorithms that learn in the trainer): "
          "feature_dim 288, feature_net_config None (the policy's model), inverse_net_hiddens [256], "
          "inverse_net_activation 'relu', forward_net_hiddens [256], forward_net_activation 'relu', beta 0.2, "
          "eta 1.0, lr 0.001, sub_exploration None (StochasticSampling); eta x the forward model's error is "
          "added to the rewards before advantages, reported as "
          "info/learner/<policy>/learner_stats/intrinsic_reward_mean and intrinsic_return_mean "
          "(episode_reward_mean stays extrinsic). RE3 (random-encoder state entropy, off-policy algorithms: SAC, "
          "DQN, DDPG, TD3, ...): embeds_dim 128, encoder_net_config None (the policy's model), beta 0.2, "
          "beta_schedule 'constant' or 'linear_decay' (beta x (1 - rho)^(timestep // timesteps_per_iteration)), "
          "rho 0.1, k_nn 50, random_timesteps 10000, sub_exploration None (StochasticSampling); the bonus is added "
          "to each replayed train batch, reported as intrinsic_reward_mean.", exploration_type),
    ],
    "Evaluation": [
        K("evaluation_interval", None, "Evaluate every this many train() calls; None never.",
          optional(int_at_least(1), "no evaluation")),
        K("evaluation_num_episodes", 10, "Episodes per evaluation (at least).", int_at_least(1)),
        K("evaluation_duration", None, "Later RLlib 1.x releases' name of evaluation_num_episodes (with "
          "evaluation_duration_unit 'episodes'); set, it replaces it. None: evaluation_num_episodes.",
          evaluation_duration),
        K("evaluation_duration_unit", "episodes", "Unit of evaluation_duration: only 'episodes' (evaluation runs "
          "whole episodes).", evaluation_duration_unit),
        K("always_attach_evaluation_results", False, "RLlib 1.x's copy of the last evaluation into results "
          "of iterations that do not evaluate; only False.",
          not_available("results carry 'evaluation' only on iterations that evaluate: read those", False)),
        K("evaluation_parallel_to_training", False, "Evaluate in a thread while train() runs.", boolean),
        K("in_evaluation", False, "Set internally on evaluation workers.", boolean),
        K("evaluation_config", {}, "Overrides of this config for evaluation (e.g. explore False).",
          dict_value(none_as_empty=True)),
        K("evaluation_num_workers", 0, "Remote evaluation workers; 0 evaluates in the trainer.", int_at_least(0)),
        K("custom_eval_function", None, "fn(trainer, eval_workers) -> metrics dict, replacing evaluate().",
          callable_or_none("(trainer, eval_workers) -> metrics dict")),
    ],
    "Advanced rollout settings": [
        K("sample_async", False, "Sample in a background thread (slightly off-policy).", boolean),
        K("sample_collector", None, "A class (or 'module:Class') implementing rollout.sampler_api.Sampler, "
          "built as cls(worker=, settings=); None: the built-in samplers.", sampler_class_or_none),
        K("observation_filter", "NoFilter", "Per-element observation filter: 'NoFilter' or 'MeanStdFilter'.",
          one_of("NoFilter", "MeanStdFilter", or_callable=True)),
        K("synchronize_filters", True, "Sync filter statistics across workers each iteration.", boolean),
        K("tf_session_args", _TF_SESSION_ARGS, "TensorFlow only; accepted and ignored."),
        K("local_tf_session_args", _LOCAL_TF_SESSION_ARGS, "TensorFlow only; accepted and ignored."),
        K("_disable_preprocessor_api", False, "RLlib 1.x's raw (unflattened) observations for custom models; "
          "only False.", not_available("models see the preprocessed (flattened) observations", False)),
        K("compress_observations", False, "LZ4-compress each observation in sample batches.", boolean),
        K("collect_metrics_timeout", 180, "Seconds to wait for workers' metrics; late ones count next time.",
          number_in(0)),
        K("metrics_smoothing_episodes", 100, "Episodes that reported metrics are averaged over.", int_at_least(1)),
        K("remote_worker_envs", False, "Run each of a worker's vector envs in its own process.", boolean),
        K("gym_env_vectorize_mode", None, "Step a worker's envs as one Gymnasium vector env: "
          "'vector_entry_point' (the id's batched implementation, e.g. CartPole's), 'sync' (SyncVectorEnv) or "
          "'async' (AsyncVectorEnv: one process per sub-env, shared memory); None: rlfleet's own "
          "per-env vector. An env creator may also return a gymnasium.vector.VectorEnv.", vectorize_mode),
        K("remote_env_batch_wait_ms", 0, "Milliseconds to wait for remote envs when polling; only 0: remote "
          "sub-envs step in lockstep, each step waits for all of them.", batch_wait_ms),
        K("min_iter_time_s", 0, "Least seconds one train() call takes; under a step limit (`rlfleet train`'s "
          "timesteps_total stop) an iteration ends sooner, once it sampled 1/20 of the limit.", number_in(0)),
        K("timesteps_per_iteration", 0, "Least env steps one train() call samples.", int_at_least(0)),
        K("seed", None, "Seed for envs, workers and policies; None is nondeterministic.",
          optional(int_at_least(0), "unseeded")),
        K("extra_python_environs_for_driver", {}, "Env variables set in the trainer process.", environ),
        K("extra_python_environs_for_worker", {}, "Env variables set in worker processes.", environ),
    ],
    "Resources": [
        K("num_gpus", 0, "GPUs the trainer's policies learn on (may be fractional: 0.5 is one GPU shared; 2 or "
          "more: one model copy (tower) per GPU, each minibatch split across them).", number_in(0, 256)),
        K("_fake_gpus", False, "Simulate the GPUs of num_gpus / num_gpus_per_worker with CPU towers (testing "
          "multi-GPU code on a machine without one).", boolean),
        K("num_cpus_per_worker", 1, "CPUs per remote worker.", number_in(0)),
        K("num_gpus_per_worker", 0, "GPUs per remote worker (may be fractional); its policies act and learn "
          "there.", number_in(0, 256)),
        K("custom_resources_per_worker", {}, "Custom Ray resources per remote worker.", dict_value()),
        K("num_cpus_for_driver", 1, "CPUs for the trainer process: reserved under Tune, and the cap on torch's "
          "threads (unless OMP_NUM_THREADS is set).", number_in(0)),
        K("placement_strategy", "PACK", "Ray placement-group strategy for trainer and workers.",
          one_of("PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD")),
    ],
    "Offline data": [
        K("input", "sampler", "Where experience comes from: 'sampler' (the env); a JSON-lines file, folder, glob "
          "or list of them; a mixture {source: probability}; a name given to register_input; "
          "'minari:<dataset id>'; or a callable IOContext -> reader.", input_spec),
        K("input_config", {}, "Options for a custom input reader.", dict_value()),
        K("actions_in_input_normalized", False, "Offline actions are already normalized to [-1, 1].", boolean),
        K("input_evaluation", ["is", "wis"], "Off-policy estimators run on offline input.", input_evaluation),
        K("postprocess_inputs", False, "Run postprocess_trajectory on offline batches.", boolean),
        K("shuffle_buffer_size", 0, "Shuffle offline batches through a buffer of this many.", int_at_least(0)),
        K("output", None, "Where to write sampled experience (JSON lines): None, 'logdir', a folder path, or a "
          "callable IOContext -> writer. Set in evaluation_config, it records the episodes evaluation runs "
          "(evaluation workers do not inherit the top-level one).", output_spec),
        K("output_compress_columns", ["obs", "new_obs"], "Sample batch columns LZ4-compressed in output.", str_list),
        K("output_max_file_size", 64 * 1024 * 1024, "Bytes per output file before a new one starts.", int_at_least(1)),
    ],
    "Multi-agent": [
        K("multiagent", {}, "Multi-agent settings; see the multiagent.* keys.", dict_value()),
        K("multiagent.policies", {}, "{policy_id: PolicySpec} or a set of ids; empty: one default policy.",
          policies),
        K("multiagent.policy_map_capacity", 100, "Policies kept in memory before spilling the LRU ones.",
          int_at_least(1)),
        K("multiagent.policy_map_cache", None, "Folder for spilled policies; None is the results folder.",
          path_or_none),
        K("multiagent.policy_mapping_fn", None, "fn(agent_id, episode, worker, **kwargs) -> policy_id; "
          "None maps every agent to 'default_policy' (or to the only policy).",
          callable_or_none("(agent_id, episode, worker, **kwargs) -> policy_id")),
        K("multiagent.policies_to_train", None, "Ids of the policies to train; None trains all.", policy_ids),
        K("multiagent.observation_fn", None, "fn(agent_obs, worker, base_env, policies, episode) -> new "
          "{agent_id: obs}, applied before the policies see the observations.",
          callable_or_none("(agent_obs, worker, base_env, policies, episode) -> {agent_id: obs}")),
        K("multiagent.replay_mode", "independent", "Replay transitions per policy ('independent') or "
          "all agents of a timestep together ('lockstep').", one_of("independent", "lockstep")),
        K("multiagent.count_steps_by", "env_steps", "Batch size counts env steps or agent steps.",
          one_of("env_steps", "agent_steps")),
    ],
    "Logging": [
        K("logger_config", None, "Result loggers: {'type': a logger class or a list of them (default: result.json, "
                                 "progress.csv and TensorBoard events), **their options}; 'MLflowLogger' and "
                                 "'WandbLogger' track runs (rlfleet[mlflow], rlfleet[wandb]), their options under "
                                 "'mlflow' and 'wandb'.", logger_config),
    ],
}

COMMON_CONFIG: Dict[str, Any] = _build([k for keys in COMMON_KEYS.values() for k in keys])

# Every declared key by dotted path, the model's under "model.".
KEY_INDEX: Dict[str, ConfigKey] = {
    **{k.name: k for keys in COMMON_KEYS.values() for k in keys},
    **{f"model.{k.name}": k._replace(name=f"model.{k.name}") for k in MODEL_KEYS},
}

# Top-level keys whose dict values may take sub-keys that are not declared.
ALLOW_UNKNOWN_SUBKEYS: List[str] = [
    "tf_session_args", "local_tf_session_args", "env_config", "model", "optimizer",
    "multiagent", "custom_resources_per_worker", "evaluation_config", "exploration_config",
    "extra_python_environs_for_driver", "extra_python_environs_for_worker", "input_config",
]

# Top-level keys whose dict value is replaced whole when its "type" changes.
OVERRIDE_ALL_SUBKEYS_IF_TYPE_CHANGES: List[str] = ["exploration_config"]

# Keys kept only so TensorFlow-era configs still load.
IGNORED_KEYS: Tuple[str, ...] = ("tf_session_args", "local_tf_session_args", "eager_tracing")
