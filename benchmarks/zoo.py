"""The RL Zoo's tuned settings for each time-to-solve task, in SB3's keys and in rlpilot's (the ``same`` and ``sbx``
arms), and the peers' workers that run them: SB3 or SBX learning until a greedy threshold (``worker_sb3``), the
CleanRL-style single files (``worker_cleanrl``). benchmarks/time_to_solve.py runs them, each in its own process;
lunarlander.py, locomotion_peers.py, reacher_sb3.py and peer_update_cost.py reuse them.
"""

from __future__ import annotations

import time

import numpy as np

THRESHOLD = 475.0  # CartPole-v1 (lunarlander.py reuses the workers with its own thresholds)

# RL Baselines3 Zoo, hyperparams/ppo.yml, CartPole-v1
SB3_PPO_ZOO = dict(
    n_steps=32,
    batch_size=256,
    gae_lambda=0.8,
    gamma=0.98,
    n_epochs=20,
    ent_coef=0.0,
    learning_rate=1e-3,
    clip_range=0.2,
    n_envs=8,
    schedule="linear",  # Zoo's lin_1e-3 / lin_0.2: learning rate and clip range decay to 0
)
# hyperparams/dqn.yml, CartPole-v1 (one env)
SB3_DQN_ZOO = dict(
    learning_rate=2.3e-3,
    batch_size=64,
    buffer_size=100_000,
    learning_starts=1000,
    gamma=0.99,
    target_update_interval=10,
    train_freq=256,
    gradient_steps=128,
    exploration_fraction=0.16,
    exploration_final_eps=0.04,
    policy_kwargs=dict(net_arch=[256, 256]),
)
# hyperparams/sac.yml, Pendulum-v1: lr 1e-3, SB3's defaults otherwise (buffer 1M, batch 256, tau 0.005,
# gamma 0.99, learning_starts 100, train_freq 1, gradient_steps 1, 256-256 ReLU, ent_coef auto)
SB3_SAC_ZOO = dict(learning_rate=1e-3)
# hyperparams/td3.yml, Pendulum-v1
SB3_TD3_ZOO = dict(
    gamma=0.98,
    buffer_size=200_000,
    learning_starts=10_000,
    noise_std=0.1,  # NormalActionNoise(0, 0.1) on the [-1, 1]-scaled action
    gradient_steps=1,
    train_freq=1,
    learning_rate=1e-3,
    policy_kwargs=dict(net_arch=[400, 300]),
)

# rlpilot with the Zoo's settings: the "same" arm (what each Zoo key maps to)
SAME_SETTINGS = {
    "ppo": [
        "env.num_envs=8",
        "ppo.steps_per_env=32",
        "ppo.minibatch_size=256",
        "ppo.epochs=20",
        "ppo.lr=1e-3",
        "ppo.lr_schedule=linear",
        "ppo.clip_epsilon=0.2",
        "ppo.clip_schedule=linear",
        "ppo.gamma=0.98",
        "ppo.gae_lambda=0.8",
        "ppo.entropy_coef=0.0",
        "ppo.value_coef=0.5",
        "ppo.max_grad_norm=0.5",
        "ppo.value_loss=l2",
        "model.hidden_sizes=[64, 64]",
        "model.activation=tanh",
    ],
    "dqn": [
        "env.num_envs=1",
        "dqn.steps_per_env=256",  # train_freq 256
        "dqn.updates_per_frame=0.5",  # 128 gradient steps per 256 frames
        "dqn.lr=2.3e-3",
        "dqn.batch_size=64",
        "dqn.buffer_size=100000",
        "dqn.learning_starts=1000",
        "dqn.gamma=0.99",
        "dqn.exploration_fraction=0.16",
        "dqn.eps_init=1.0",
        "dqn.eps_end=0.04",
        "dqn.double_dqn=false",  # SB3's DQN is not double DQN
        "dqn.loss=huber",
        "dqn.max_grad_norm=10",
        "dqn.n_step=1",
        "dqn.target_update=hard",
        # SB3 copies every 10 env steps, checked while collecting: with train_freq 256 that is one copy per
        # learning phase (no update happens between copies); rlpilot counts updates: 128 per phase
        "dqn.target_update_interval=128",
        "model.hidden_sizes=[256, 256]",
        "model.activation=relu",
    ],
    "sac": [
        "env.num_envs=1",
        "sac.steps_per_env=1",
        "sac.updates_per_frame=1",
        "sac.lr=1e-3",
        "sac.batch_size=256",
        "sac.buffer_size=1000000",
        "sac.learning_starts=100",
        "sac.tau=0.005",
        "sac.gamma=0.99",
        "sac.alpha_init=1.0",
        "model.hidden_sizes=[256, 256]",
        "model.activation=relu",
    ],
    "td3": [
        "env.num_envs=1",
        "td3.steps_per_env=1",
        "td3.updates_per_frame=1",
        "td3.lr=1e-3",
        "td3.batch_size=256",
        "td3.buffer_size=200000",
        "td3.learning_starts=10000",
        "td3.gamma=0.98",
        "td3.tau=0.005",
        "td3.exploration_noise=0.1",
        "td3.policy_delay=2",
        "td3.target_noise=0.2",
        "td3.target_noise_clip=0.5",
        "model.hidden_sizes=[400, 300]",
        "model.activation=relu",
    ],
}


# The "sbx" arm: the same settings, and SBX's computation where SBX's implementation differs from SB3's (sbx 0.28):
# Flax's default init (lecun normal, zero biases) for every network it builds itself, and TD3's actor ascending the
# twins' minimum (its targets moving after every critic update is rlpilot's default). SBX's PPO keeps SB3's
# orthogonal init (the peer sets it, make_sb3). rlpilot's rows against SBX then time the same computation.
SBX_COMPUTATION = {
    "ppo": [],
    "dqn": ["model.init=lecun"],
    "sac": ["model.init=lecun"],
    "td3": ["model.init=lecun", "td3.actor_q=min"],
}

# The Zoo's mujoco-defaults (hyperparams/sac.yml, td3.yml) as SB3 keys, for the locomotion tasks here and
# locomotion_peers.py's 300k-frame curves
MUJOCO_ZOO = {
    "sac": dict(learning_starts=10_000),
    "td3": dict(
        learning_starts=10_000,
        noise_std=0.1,
        learning_rate=1e-3,
        batch_size=256,
        train_freq=1,
        gradient_steps=1,
        policy_kwargs=dict(net_arch=[400, 300]),
    ),
}


def make_sb3(
    algo: str,
    seed: int,
    *,
    env_id: str = "CartPole-v1",
    hyperparams: dict | None = None,
    library: str = "sb3",
    device: str = "cpu",
):
    """SB3 PPO, DQN, SAC or TD3 with RL Zoo's hyperparameters (``hyperparams``; default: the CartPole ones);
    ``library="sbx"``: SBX's class of the same name, with the same keys (see ``worker_sb3``). ``device``: SB3's torch
    device (SBX's networks live where JAX puts them)."""
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.utils import LinearSchedule

    if library == "sbx":
        from sbx import DQN, PPO, SAC, TD3
    else:
        from stable_baselines3 import DQN, PPO, SAC, TD3

    if algo == "ppo":
        hp = dict(hyperparams or SB3_PPO_ZOO)
        env = make_vec_env(env_id, n_envs=hp.pop("n_envs"), seed=seed)
        if hp.pop("schedule", "constant") == "linear":
            hp["learning_rate"] = LinearSchedule(hp["learning_rate"], 0.0, 1.0)
            hp["clip_range"] = LinearSchedule(hp["clip_range"], 0.0, 1.0)
        if library == "sbx":
            # SB3's MlpPolicy initialises its last policy layer orthogonally with gain 0.01 (a near-uniform
            # first policy); SBX does that with ortho_init=True (its hidden layers keep Flax's default init)
            hp["policy_kwargs"] = {"ortho_init": True, **hp.get("policy_kwargs", {})}
        return PPO("MlpPolicy", env, seed=seed, verbose=0, device=device, **hp)
    env = make_vec_env(env_id, n_envs=1, seed=seed)
    if algo == "dqn":
        hp = dict(hyperparams or SB3_DQN_ZOO)
        if library == "sbx":
            # SB3's DQN clips the gradient norm at 10 (max_grad_norm); SBX's DQN has no such parameter
            hp["policy_kwargs"] = {"optimizer_class": _adam_clipped_10, **hp.get("policy_kwargs", {})}
        return DQN("MlpPolicy", env, seed=seed, verbose=0, device=device, **hp)
    if algo == "sac":
        return SAC("MlpPolicy", env, seed=seed, verbose=0, device=device, **(hyperparams or SB3_SAC_ZOO))
    from stable_baselines3.common.noise import NormalActionNoise

    hp = dict(hyperparams or SB3_TD3_ZOO)
    dim = env.action_space.shape[-1]
    noise = NormalActionNoise(np.zeros(dim), hp.pop("noise_std") * np.ones(dim))
    return TD3("MlpPolicy", env, seed=seed, verbose=0, device=device, action_noise=noise, **hp)


def _adam_clipped_10(learning_rate, **kwargs):
    """SBX DQN's optimizer: Adam after clipping the global gradient norm at 10, as SB3's DQN."""
    import optax

    return optax.chain(optax.clip_by_global_norm(10.0), optax.adam(learning_rate, **kwargs))


def learn_until_solved(
    model, eval_env, eval_every: int, budget: int, episodes: int, threshold: float, max_seconds: float | None
) -> dict:
    """``model`` (SB3's API: an SB3 or SBX algorithm) learning until its greedy evaluation on ``eval_env``
    reaches ``threshold``, the budget, or ``max_seconds``.

    Evaluations run in ``_on_rollout_start``: after ``train()`` has used the frames collected so far (the
    same point rlpilot evaluates at, after ``learn``). ``_on_step`` runs before the update of the frames
    it counts, which would judge a policy one update behind."""
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.evaluation import evaluate_policy

    class EvalAfterUpdate(BaseCallback):
        def __init__(self):
            super().__init__()
            self.next_eval = eval_every
            self.solved_frames = self.solved_s = self.last_eval = None
            self.stop = False
            self.curve: list[dict] = []  # every evaluation: frames, greedy mean

        def _on_rollout_start(self) -> None:
            if self.num_timesteps < self.next_eval or self.stop:
                return
            while self.next_eval <= self.num_timesteps:
                self.next_eval += eval_every
            mean, _ = evaluate_policy(self.model, eval_env, n_eval_episodes=episodes, deterministic=True)
            self.last_eval = float(mean)
            self.curve.append({"frames": int(self.num_timesteps), "eval": float(mean)})
            if mean >= threshold:
                self.solved_frames, self.solved_s = self.num_timesteps, time.perf_counter() - start
                self.stop = True

        def _on_step(self) -> bool:
            if max_seconds is not None and time.perf_counter() - start > max_seconds:
                return False  # wall cap, checked every step (SB3 DQN can take minutes between evaluations)
            return not self.stop

    callback = EvalAfterUpdate()
    start = time.perf_counter()
    model.learn(total_timesteps=budget, callback=callback)
    elapsed = time.perf_counter() - start
    return {
        "solved": callback.solved_frames is not None,
        "frames": callback.solved_frames or model.num_timesteps,
        "train_s": callback.solved_s if callback.solved_s is not None else elapsed,
        "last_eval": callback.last_eval,
        "curve": callback.curve,
    }


# JAX on the CPU, one thread: set before jax is imported. JAX_PLATFORMS=cpu; NPROC=1 sizes the intra-op
# thread pool of XLA's CPU client (jaxlib 0.10.2: without it a jitted matmul runs on both cores, CPU time
# ~1.8x wall time; with it, 1.0x). --xla_cpu_multi_thread_eigen=false, the usual recipe, made no
# measurable difference alone; "intra_op_parallelism_threads=1" of older recipes is no XLA flag (ignored).
JAX_ONE_CPU_THREAD = {"JAX_PLATFORMS": "cpu", "NPROC": "1", "XLA_FLAGS": "--xla_cpu_multi_thread_eigen=false"}


def jax_cpu_settings(threads: int = 1) -> dict[str, str]:
    """:data:`JAX_ONE_CPU_THREAD`, or for ``threads`` > 1 XLA's CPU client sized to that many (Eigen's pool left on)."""
    if threads == 1:
        return dict(JAX_ONE_CPU_THREAD)
    return {"JAX_PLATFORMS": "cpu", "NPROC": str(threads)}


def jax_on_cpu_threads(threads: int = 1) -> None:
    """:func:`jax_cpu_settings` into the environment (before jax is imported), keeping any XLA flags already set."""
    import os

    for key, value in jax_cpu_settings(threads).items():
        if key == "XLA_FLAGS":
            flags = os.environ.get(key, "")
            os.environ[key] = flags if value in flags else f"{flags} {value}".strip()
        else:
            os.environ.setdefault(key, value)


def worker_sb3(
    algo: str,
    seed: int,
    eval_every: int,
    budget: int,
    episodes: int,
    *,
    env_id: str = "CartPole-v1",
    hyperparams: dict | None = None,
    threshold: float = THRESHOLD,
    max_seconds: float | None = None,
    library: str = "sb3",
    threads: int = 1,
) -> dict:
    """SB3 (or, ``library="sbx"``, SBX) learning until its greedy evaluation reaches ``threshold``, the budget,
    or ``max_seconds`` (``learn_until_solved``).

    SBX is Stable-Baselines3 in JAX, with the same Zoo keys, evaluation and clocks; it runs under
    .venv-sbx's interpreter. Each Zoo key maps to SBX's parameter of the same name (SBX's classes
    take SB3's signature): PPO's linear schedules are SB3's ``LinearSchedule`` callables, which SBX applies
    (the learning rate through ``optax.inject_hyperparams``, the clip range per ``train()``); 64-64 tanh
    actor and critic are SBX PPO's defaults; DQN's ``net_arch=[256, 256]`` gives SBX's two-layer ReLU
    QNetwork 256 units; SAC's 256-256 ReLU and TD3's ``[400, 300]`` ReLU are set as in SB3. Where SBX's
    defaults differ from SB3's for a key the Zoo leaves unset, ``make_sb3`` sets SB3's where SBX can: the
    PPO policy head's small orthogonal init, DQN's gradient clipping at 10.

    JAX compiles each jitted function on its first call (action selection, each update, the batch-of-20
    evaluation): that happens inside ``learn`` and the evaluations, so it counts in the training clock,
    what a user waits. Building the model (Flax's parameter init) is outside it, as SB3's model
    construction is; the process clock counts everything, importing JAX included."""
    if library == "sbx":
        jax_on_cpu_threads(threads)
    import torch
    from stable_baselines3.common.env_util import make_vec_env

    torch.set_num_threads(threads)  # as rlpilot's learner (SBX's buffers are PyTorch too)
    model = make_sb3(algo, seed, env_id=env_id, hyperparams=hyperparams, library=library)
    eval_env = make_vec_env(env_id, n_envs=episodes, seed=seed + 10_000)
    return learn_until_solved(model, eval_env, eval_every, budget, episodes, threshold, max_seconds)


def worker_cleanrl(
    algo: str, seed: int, eval_every: int, budget: int, episodes: int, *, hyperparams: dict, threshold: float
) -> dict:
    """benchmarks/peers/cleanrl_{algo}.py: single-file PyTorch in CleanRL's style, the Zoo's settings."""
    import importlib

    module = importlib.import_module(f"peers.cleanrl_{algo}")
    return module.run(seed, eval_every, budget, episodes, threshold, hyperparams=hyperparams)
