"""Time to solve: rlpilot against Stable-Baselines3 with RL Zoo's tuned hyperparameters, paired per seed.

Tasks (RL Zoo's budgets): PPO and DQN on CartPole-v1 (solved: greedy mean >= 475), SAC and TD3 on
Pendulum-v1 (solved: greedy mean >= -200); and the MuJoCo locomotion presets to a return threshold
(``sac-halfcheetah``, ``td3-halfcheetah``: 5,000 within 300k frames; ``sac-hopper``, ``td3-hopper``: 2,500;
docs/locomotion.md), the peers with the Zoo's ``mujoco-defaults`` (``MUJOCO_ZOO``), 10 greedy episodes
every 10k frames. Peers, all with the Zoo's hyperparameters (``--peers``):

- ``sb3``: Stable-Baselines3 2.9.2 (PyTorch), the reference: the Zoo's settings were tuned on it;
- ``sbx``: SBX 0.28.0, Stable-Baselines3 in JAX (``worker_sb3`` with ``library="sbx"``), in its own virtualenv: ``make
  bench-sbx-venv`` builds .venv-sbx (``--sbx-python``); its rows are skipped when that is missing;
- ``cleanrl``: single-file PyTorch PPO and DQN in CleanRL's style (benchmarks/peers/cleanrl_*.py; PPO and
  DQN only).

Three arms for every task (docs/benchmarks.md):

- ``preset``: rlpilot's preset against SB3 with the Zoo's settings: what a user of each gets;
- ``same``: rlpilot run with the Zoo's exact hyperparameters, network and env count (``SAME_SETTINGS``),
  against the same SB3 run: implementation speed, nothing else (a locomotion preset is the Zoo's settings but for
  collecting 8 frames between learning phases of 8 updates; its ``same`` arm collects 1 and learns 1);
- ``sbx``: the same settings and SBX's computation where SBX's implementation differs from SB3's
  (``SBX_COMPUTATION``: Flax's init; TD3's every-update targets and min-of-twins actor): the arm to read against
  SBX.

Both sides use one evaluation rule: the greedy policy, 20 episodes side by side, every ``eval_every``
frames, evaluation time counted, evaluated AFTER the update that follows the frames collected (SB3: in
``_on_rollout_start``, which runs after ``train()``; its ``_on_step`` fires before the update). Seeds
start at 100: no preset was tuned on them (tuning seeds are listed in each preset's header). Each run is
its own child process, one after another (never two at once), on one torch thread and pinned to one CPU
(``one_core``: every thread any library starts shares that core, rlpilot's curve helper included; ``--cores N``:
pinned to N CPUs, rlpilot's learner, SB3's torch and SBX's XLA on N threads each: the whole machine); the training clock
runs from the start of training to the solved evaluation, the process clock from the command to exit.
rlpilot's rows run its CLI (``python -m rlpilot.cli train PRESET --set ...``), so their whole process is
what a user of the command waits for: imports, training, the curve, doctor's lines, exit (the CLI skips
Python's module teardown, ~0.5-1.5 s here: ``rlpilot.cli.entry``); the peers' rows run their library
from a script, as their users do, and exit normally.
Per seed, ratio = peer time / rlpilot time (above 1: rlpilot is faster); reported as the median over the
seeds both solved, with a 95% percentile-bootstrap interval, for every rlpilot arm against every peer.

    python benchmarks/time_to_solve.py --algos ppo,dqn --seeds 10 --out benchmarks/results/FILE.txt
    python benchmarks/time_to_solve.py --algos sac-halfcheetah --arms preset --seeds 2 \
        --out benchmarks/results/time_to_solve_mujoco-DATE.txt
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import stamp  # noqa: E402

THRESHOLD = 475.0  # CartPole-v1 (lunarlander.py reuses the workers with its own thresholds)
BOOTSTRAP_SAMPLES = 10_000

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


@dataclass(frozen=True)
class Task:
    algo: str
    env_id: str
    preset: str
    threshold: float
    budget: int
    eval_every: int
    sb3: dict = field(default_factory=dict)
    key: str = ""  # its name in TASKS, --algos and the row names (the algorithm's for the CartPole/Pendulum tasks)
    episodes: int = 20  # greedy episodes an evaluation plays (--episodes overrides)

    @property
    def name(self) -> str:
        return self.key or self.algo


def _mujoco(algo: str, env: str, threshold: float) -> Task:
    """A locomotion preset to ``threshold`` within 300k frames, its greedy return every 10k frames (10 episodes, as
    the presets evaluate)."""
    preset = f"{algo}-{env.removesuffix('-v5').lower()}"
    return Task(algo, env, preset, threshold, 300_000, 10_000, MUJOCO_ZOO[algo], key=preset, episodes=10)


TASKS = {
    "ppo": Task("ppo", "CartPole-v1", "ppo-cartpole", 475.0, 100_000, 2048, SB3_PPO_ZOO),
    "dqn": Task("dqn", "CartPole-v1", "dqn-cartpole", 475.0, 50_000, 2048, SB3_DQN_ZOO),
    "sac": Task("sac", "Pendulum-v1", "sac-pendulum", -200.0, 20_000, 1000, SB3_SAC_ZOO),
    "td3": Task("td3", "Pendulum-v1", "td3-pendulum", -200.0, 20_000, 1000, SB3_TD3_ZOO),
    **{
        task.key: task
        for task in (
            _mujoco("sac", "HalfCheetah-v5", 5000.0),
            _mujoco("td3", "HalfCheetah-v5", 5000.0),
            _mujoco("sac", "Hopper-v5", 2500.0),
            _mujoco("td3", "Hopper-v5", 2500.0),
        )
    },
}


def same_settings(task: Task) -> list[str]:
    """The ``same`` arm's settings: the Zoo's exact ones (a locomotion preset has them but for its 8-frame learning
    phases: the Zoo collects one frame, then updates once)."""
    if task.key:
        return [f"{task.algo}.steps_per_env=1"]
    return SAME_SETTINGS[task.algo]


def rlpilot_settings(
    seed: int,
    eval_every: int,
    budget: int,
    episodes: int,
    *,
    threshold: float,
    max_seconds: float | None = None,
    overrides: tuple[str, ...] = (),
    threads: int = 1,
) -> list[str]:
    settings = [
        *overrides,
        f"train.seed={seed}",
        f"train.eval_every_frames={eval_every}",
        f"train.total_frames={budget}",
        f"train.eval_episodes={episodes}",
        f"train.solved_at={threshold}",
        "train.stop_when_solved=true",  # the locomotion presets go on past their threshold; timed here to it
        f"train.num_threads={threads}",
    ]
    if max_seconds is not None:
        settings.append(f"train.max_seconds={max_seconds}")
    return settings


def run_result(meta: dict, path: str) -> dict:
    """A finished run's ``meta.json`` as a benchmark result."""
    return {
        "solved": meta["status"] == "solved",
        "frames": meta.get("solved_at_frames") or meta["frames"],
        "train_s": meta["elapsed_s"],
        "startup_s": meta.get("startup_s"),
        "last_eval": meta.get("last_eval"),
        "run": path,
    }


def worker_rlpilot(
    preset: str,
    seed: int,
    eval_every: int,
    budget: int,
    episodes: int,
    *,
    threshold: float = THRESHOLD,
    max_seconds: float | None = None,
    overrides: tuple[str, ...] = (),
) -> dict:
    """rlpilot through its Python API in this process (lunarlander.py's runs)."""
    from rlpilot.config import load_config
    from rlpilot.loop.trainer import train

    settings = rlpilot_settings(
        seed, eval_every, budget, episodes, threshold=threshold, max_seconds=max_seconds, overrides=overrides
    )
    result = train(load_config(preset, overrides=settings), run_root="runs/bench", show_progress=False)
    return run_result(result.meta(), str(result.path))


def rlpilot_cli(task: Task, arm: str, seed: int, args) -> tuple[list[str], Path]:
    """The command a user types, ``rlpilot train PRESET --set ...`` (as ``python -m rlpilot.cli``, the
    same entry point), and the run directory it writes: the whole process is the user's whole wait."""
    overrides = {
        "preset": (),
        "same": tuple(same_settings(task)),
        "sbx": (*same_settings(task), *SBX_COMPUTATION[task.algo]),
    }[arm]
    overrides = (*overrides, *args.set)
    settings = rlpilot_settings(
        seed,
        args.eval_every,
        args.budget,
        args.episodes,
        threshold=task.threshold,
        overrides=overrides,
        threads=getattr(args, "cores", 1),
    )
    run_dir = Path("runs/bench") / f"{task.preset}-{arm}-s{seed}-{time.strftime('%Y%m%d-%H%M%S')}"
    command = [sys.executable, "-m", "rlpilot.cli", "train", task.preset, "--run-dir", str(run_dir), "-q"]
    for setting in settings:
        command += ["--set", setting]
    return command, run_dir


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


def jax_on_one_cpu_thread(threads: int = 1) -> None:
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
        jax_on_one_cpu_thread(threads)
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


CLEANRL_ALGOS = ("ppo", "dqn")
PEERS = ("sb3", "sbx", "cleanrl")
SBX_PYTHON = Path(__file__).resolve().parents[1] / ".venv-sbx" / "bin" / "python"  # make bench-sbx-venv


def peer_names(algo: str, peers: tuple[str, ...] = PEERS) -> list[str]:
    """The peer workers of a task (its name in TASKS), in running order (CleanRL-style peers exist for PPO and DQN
    on CartPole only)."""
    return [f"{peer}-{algo}-zoo" for peer in peers if peer != "cleanrl" or algo in CLEANRL_ALGOS]


def workers(task: Task) -> dict:
    # the peers' workers (``--worker NAME`` in a child process); rlpilot's rows run its CLI (``rlpilot_cli``)
    found = {
        f"{library}-{task.name}-zoo": partial(
            worker_sb3, task.algo, env_id=task.env_id, hyperparams=task.sb3, threshold=task.threshold, library=library
        )
        for library in ("sb3", "sbx")
    }
    if task.algo in CLEANRL_ALGOS and not task.key:
        found[f"cleanrl-{task.name}-zoo"] = partial(
            worker_cleanrl, task.algo, hyperparams=task.sb3, threshold=task.threshold
        )
    return found


WORKERS = {name: fn for task in TASKS.values() for name, fn in workers(task).items()}


PINNED_CPU = 0


def pin_cores(cores: int):
    """A ``preexec_fn`` pinning the child to CPUs ``PINNED_CPU`` .. ``PINNED_CPU + cores - 1`` (``one_core`` for 1)."""
    if cores == 1:
        return one_core

    def pin() -> None:
        if hasattr(os, "sched_setaffinity"):
            os.sched_setaffinity(0, set(range(PINNED_CPU, PINNED_CPU + cores)))

    return pin


def one_core() -> None:
    """Every child (rlpilot and each peer) runs pinned to one CPU: the same thread budget on both sides, whatever
    threads a library starts (XLA's runtime and Eigen pools, torch's inter-op pool, Ray's and gymnasium's none
    here). Without the pin SBX's runs used 1.4x their wall time in CPU seconds on this 2-core machine (2026-12-01)."""
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {PINNED_CPU})


def run_child(
    name: str,
    seed: int,
    args,
    script: str = __file__,
    timeout: float | None = None,
    extra: tuple = (),
    python: str | None = None,
    cli: tuple[list[str], Path] | None = None,
) -> dict:
    """``python script --worker name [extra...]`` in a fresh process (``python``: this interpreter unless
    given, e.g. .venv-sbx's for SBX); its last stdout line is the JSON result. ``cli``: a command and the
    run directory it writes instead (rlpilot's own CLI); the result is read from its ``meta.json``."""
    cmd = (
        cli[0]
        if cli
        else [
            python or sys.executable,
            script,
            "--worker",
            name,
            "--seed",
            str(seed),
            "--eval-every",
            str(args.eval_every),
            "--budget",
            str(args.budget),
            "--episodes",
            str(args.episodes),
            *(["--cores", str(args.cores)] if getattr(args, "cores", 1) != 1 else []),
            *extra,
        ]
    )
    start, cpu_start = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run(
        cmd,
        capture_output=True,
        text=True,
        check=False,
        timeout=timeout,
        preexec_fn=pin_cores(getattr(args, "cores", 1)),
    )
    process_s = time.perf_counter() - start
    cpu_end = resource.getrusage(resource.RUSAGE_CHILDREN)  # CPU seconds: robust to other load on the machine
    cpu_s = (cpu_end.ru_utime - cpu_start.ru_utime) + (cpu_end.ru_stime - cpu_start.ru_stime)
    if out.returncode != 0:  # recorded, not fatal: one crashed run must not cost the whole benchmark
        error = (out.stderr.strip().splitlines() or ["(no output)"])[-1]
        print(f"{name} seed {seed} failed (exit {out.returncode}): {error}", file=sys.stderr, flush=True)
        return {
            "solved": False,
            "frames": 0,
            "train_s": float("nan"),
            "process_s": process_s,
            "process_cpu_s": cpu_s,
            "error": error,
        }
    if cli:
        result = run_result(json.loads((cli[1] / "meta.json").read_text()), str(cli[1]))
    else:
        result = json.loads(out.stdout.strip().splitlines()[-1])
    result["process_s"] = process_s
    result["process_cpu_s"] = cpu_s
    return result


def median_ratio(peer: list[float], ours: list[float], seed: int = 0) -> tuple[float, float, float]:
    """Median of per-seed ratios peer/ours and its 95% percentile-bootstrap interval."""
    ratios = np.array(peer) / np.array(ours)
    if len(ratios) == 0:
        return float("nan"), float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    samples = rng.choice(ratios, size=(BOOTSTRAP_SAMPLES, len(ratios)), replace=True)
    low, high = np.percentile(np.median(samples, axis=1), [2.5, 97.5])
    return float(np.median(ratios)), float(low), float(high)


CLOCKS = (("train_s", "training clock"), ("process_s", "whole process"), ("frames", "frames"))


def compare(results: dict[str, list[dict]], ours: str, peer: str, seeds: list[int]) -> dict:
    """Paired over the seeds both solved: median ratio peer/ours and its interval, per clock."""
    both = [i for i in range(len(seeds)) if results[ours][i]["solved"] and results[peer][i]["solved"]]
    out = {"ours": ours, "peer": peer, "both_solved": len(both), "seeds": len(seeds)}
    for key, _ in CLOCKS:
        out[key] = median_ratio([results[peer][i][key] for i in both], [results[ours][i][key] for i in both])
    return out


def comparison_lines(c: dict) -> list[str]:
    lines = [f"{c['ours']} vs {c['peer']}: {c['both_solved']}/{c['seeds']} seeds solved by both"]
    for key, what in CLOCKS:
        mid, low, high = c[key]
        lines.append(f"  ratio {c['peer']} / {c['ours']}, {what}: median {mid:.2f}x [95% CI {low:.2f}-{high:.2f}]")
    return lines


def summary(values: list[float]) -> str:
    if not values:
        return "n/a"
    return f"{statistics.median(values):8.2f}  [{min(values):.2f}-{max(values):.2f}]"


def fastest_peer(results: dict[str, list[dict]], peers: list[str]) -> str:
    """The peer with the lowest median training clock over the seeds it solved (fewer solved seeds: says so)."""
    timed = {name: [r["train_s"] for r in results[name] if r["solved"]] for name in peers if name in results}
    timed = {name: times for name, times in timed.items() if times}
    if not timed:
        return "fastest peer: none solved"
    name = min(timed, key=lambda n: statistics.median(timed[n]))
    return (
        f"fastest peer (median training clock over the seeds it solved): {name}, "
        f"{statistics.median(timed[name]):.2f} s, {len(timed[name])}/{len(results[name])} solved"
    )


def report(
    task: Task,
    results: dict[str, list[dict]],
    seeds: list[int],
    comparisons: dict,
    episodes: int,
    peers: list[str] | None = None,
) -> list[str]:
    lines = [
        "",
        f"## {task.name} on {task.env_id}: seeds {seeds[0]}-{seeds[-1]}, greedy eval of {episodes} episodes every "
        f"{task.eval_every} frames (after the update; eval time counted), solved at {task.threshold:g}, "
        f"budget {task.budget:,} frames",
        "",
        f"{'peer':<22} {'solved':>6}  {'train s to solve: median [range]':>34}  "
        f"{'frames to solve: median [range]':>34}  {'process s median':>16}",
    ]
    for name, runs in results.items():
        solved = [r for r in runs if r["solved"]]
        lines.append(
            f"{name:<22} {len(solved):>3}/{len(runs):<2}  {summary([r['train_s'] for r in solved]):>34}  "
            f"{summary([float(r['frames']) for r in solved]):>34}  "
            f"{statistics.median(r['process_s'] for r in runs):>16.2f}"
        )
    if peers and len(peers) > 1:
        lines += ["", fastest_peer(results, peers)]
    for comparison in comparisons.values():
        lines += ["", *comparison_lines(comparison)]
    return lines


def comparison_key(arm: str, peer: str) -> str:
    """SB3 comparisons keep their old key (the arm: result files before the other peers read the same)."""
    return arm if peer.startswith("sb3-") else f"{arm}/{peer}"


def interpreter_line(python: Path, cores: int = 1) -> str:
    """The SBX interpreter, its package versions (the stamp's are this interpreter's) and JAX's settings."""
    names = ("sbx-rl", "jax", "jaxlib", "flax", "optax", "stable-baselines3", "torch", "gymnasium", "numpy")
    code = (
        "import importlib.metadata as m, platform; "
        f"print(', '.join(['python ' + platform.python_version()] + [n + ' ' + m.version(n) for n in {names!r}]))"
    )
    out = subprocess.run([str(python), "-c", code], capture_output=True, text=True, check=False)
    versions = out.stdout.strip() or f"versions unknown ({out.stderr.strip()[-200:]})"
    flags = " ".join(f"{key}={value}" for key, value in jax_cpu_settings(cores).items())
    return f"# sbx interpreter: {python} ({versions}); {flags}"


def carried_rows(earlier: dict, path: str, tasks: dict) -> list[dict]:
    """Copies into ``tasks`` the earlier file's tasks this run did not measure; returns, per file that measured them,
    ``{"from", "algos", "stamp"}``: the earlier file's own rows under its stamp, and the rows it had itself carried
    under theirs (each row keeps the stamp it was measured under). A file written before carries were lists holds
    one entry, as a dict."""
    inherited = earlier.get("carried") or []
    inherited = [inherited] if isinstance(inherited, dict) else inherited
    entries = []
    for source, algos, source_stamp in (
        *((e["from"], e["algos"], e["stamp"]) for e in inherited),
        (path, [a for a in earlier["tasks"] if not any(a in e["algos"] for e in inherited)], earlier["stamp"]),
    ):
        kept = [algo for algo in algos if algo not in tasks]
        if kept:
            entries.append({"from": source, "algos": kept, "stamp": source_stamp})
    for entry in entries:
        for algo in entry["algos"]:
            tasks[algo] = earlier["tasks"][algo]
    return entries


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--algos", default="ppo,dqn", help=f"comma-separated: {', '.join(TASKS)}")
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--first-seed", type=int, default=100, help="seeds no preset was tuned on start at 100")
    parser.add_argument("--arms", default="preset,same", help="comma-separated: preset, same, sbx")
    parser.add_argument("--peers", default=",".join(PEERS), help="comma-separated: sb3, sbx, cleanrl")
    parser.add_argument(
        "--sbx-python",
        help=f"interpreter with SBX installed (default: {SBX_PYTHON.relative_to(SBX_PYTHON.parents[2])} "
        "when it exists: make bench-sbx-venv); the SBX rows are skipped without one",
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a setting added to every rlpilot arm (e.g. train.compile=off); repeatable",
    )
    parser.add_argument(
        "--episodes", type=int, help="greedy episodes per evaluation (default: the task's, 20; locomotion 10)"
    )
    parser.add_argument("--out", help="result file (stamped); default: print only")
    parser.add_argument(
        "--carry",
        help="an earlier result file (.json): its tasks not run now are copied into --out with their own stamp "
        "(re-measure one task without re-running the others)",
    )
    parser.add_argument(
        "--cores",
        type=int,
        default=1,
        help="CPUs each run is pinned to and threads it computes on (rlpilot's train.num_threads, SB3's torch "
        "threads, SBX's XLA client); default 1",
    )
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--budget", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--eval-every", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        threads = {"threads": args.cores} if args.cores != 1 else {}  # only SB3's and SBX's workers take more
        print(json.dumps(WORKERS[args.worker](args.seed, args.eval_every, args.budget, args.episodes, **threads)))
        return
    earlier = json.loads(Path(args.carry).read_text()) if args.carry else {}
    header = stamp.header()
    lines = list(header)
    data: dict = {"tasks": {}}
    seeds = list(range(args.first_seed, args.first_seed + args.seeds))
    arms = args.arms.split(",")
    peers = tuple(args.peers.split(","))
    sbx_python = Path(args.sbx_python) if args.sbx_python else SBX_PYTHON
    if args.cores < 1 or args.cores > (os.cpu_count() or 1):
        parser.error(f"--cores {args.cores}: this machine has {os.cpu_count()} CPUs; give 1 to {os.cpu_count()}")
    if args.cores != 1 and "cleanrl" in peers:
        parser.error("--cores: the CleanRL-style peers compute on one thread; leave cleanrl out of --peers")
    data["cores"] = args.cores
    lines.append(
        f"# cores: {args.cores} (each run pinned to CPUs {PINNED_CPU}-{PINNED_CPU + args.cores - 1}; "
        f"train.num_threads={args.cores}, SB3's torch threads {args.cores}, SBX's XLA client {args.cores})"
    )
    if "sbx" in peers:
        if sbx_python.exists():
            lines.append(interpreter_line(sbx_python, args.cores))
            data["sbx_interpreter"] = lines[-1].removeprefix("# ")
        else:
            skip = f"SBX rows skipped: no interpreter at {sbx_python} (make bench-sbx-venv, or --sbx-python PATH)"
            print(skip, flush=True)
            lines.append(f"# {skip}")
            peers = tuple(peer for peer in peers if peer != "sbx")
    episodes = args.episodes
    for algo in args.algos.split(","):
        if algo not in TASKS:
            parser.error(f"--algos: no task {algo!r} (the tasks: {', '.join(TASKS)})")
        task = TASKS[algo]
        args.budget, args.eval_every, args.episodes = task.budget, task.eval_every, episodes or task.episodes
        peer_rows = peer_names(algo, peers)
        names = [*(f"rlpilot-{algo}-{arm}" for arm in arms), *peer_rows]
        results: dict[str, list[dict]] = {name: [] for name in names}
        for seed in seeds:
            for name in names:
                arm = name.removeprefix(f"rlpilot-{algo}-") if name.startswith("rlpilot-") else None
                r = run_child(
                    name,
                    seed,
                    args,
                    python=str(sbx_python) if name.startswith("sbx-") else None,
                    cli=rlpilot_cli(task, arm, seed, args) if arm else None,
                )
                results[name].append(r)
                row = (
                    f"  {name:<22} seed {seed}: solved={r['solved']} frames={r['frames']:>7} "
                    f"train {r['train_s']:.2f} s  process {r['process_s']:.2f} s  cpu {r['process_cpu_s']:.2f} s"
                )
                print(row, flush=True)
                lines.append(row)
        comparisons = {
            comparison_key(arm, peer): compare(results, f"rlpilot-{algo}-{arm}", peer, seeds)
            for arm in arms
            for peer in peer_rows
        }
        block = report(task, results, seeds, comparisons, args.episodes, peer_rows)
        print("\n".join(block), flush=True)
        lines += block
        data["tasks"][algo] = {
            "algo": task.algo,
            "env_id": task.env_id,
            "episodes": args.episodes,
            "threshold": task.threshold,
            "budget": task.budget,
            "eval_every": task.eval_every,
            "seeds": seeds,
            "peers": peer_rows,
            "results": results,
            "comparisons": comparisons,
        }
    if args.carry:
        data["carried"] = carried_rows(earlier, str(args.carry), data["tasks"])
        for entry in data["carried"]:
            lines.append(f"# carried from {entry['from']} (its own stamp in the JSON): {', '.join(entry['algos'])}")
    if args.out:
        stamp.write_result(args.out, header, lines[len(header) :], data)


if __name__ == "__main__":
    main()
