"""A first look at the adaptive arm's student (issue 37, Build 3), as an experiment: can the true dynamics be
inferred from what the arm measures, well enough for the privileged teacher to act on the estimate?

The teacher (``ppo-reacher-track-teacher``, a run given with ``--teacher``) sets the PD's gains from the 6 true
dynamics parameters (``obs_privileged``). The student here is the same teacher acting on an estimate of those
parameters, made by an MLP from the last ``--history`` steps of measured joint velocities and commands and the
current observation (the env's ``obs_last_action`` + ``obs_history``): RMA's adaptation module with the
dynamics themselves as the latent. The estimator is trained by regression on the true parameters, DAgger-style:
first on rollouts of the teacher, then on rollouts of the student itself (its own estimates acting), aggregated.
Training episodes use seeds from 100,000 on; the evaluation plays the named conditions on ``--episodes``
episodes from ``--seed`` (0: the tuning episodes) for the PD, the teacher (true parameters) and the student.

Not a shipped controller yet (no preset, no export): a measurement that says whether identification is the hard
part. Prints a table of tracking RMSE (mm) per condition and writes a stamped result file.

    python benchmarks/arm_student.py --teacher runs/arm-teacher/s0 --out benchmarks/results/arm_student-DATE.txt
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))
from arm_gains import CONDITIONS  # noqa: E402
from stamp import header, write_result  # noqa: E402

from rlpilot.envs import make_env  # noqa: E402
from rlpilot.envs.arm.disturbances import NOMINAL, PRIVILEGED  # noqa: E402
from rlpilot.play.load import load_policy  # noqa: E402

BASE = 12  # the arm's measured observation (what the PD reads)


class Setup:
    """The teacher, and the env layout the student sees: base, last command, history, then the true dynamics."""

    def __init__(self, teacher_run: str, history: int):
        self.policy = load_policy(teacher_run)
        self.config = self.policy.run.config()
        norm = self.policy.obs_norm
        width = BASE + len(PRIVILEGED)
        self.loc = norm["loc"].float() if norm else torch.zeros(width)
        self.scale = norm["scale"].float() if norm else torch.ones(width)
        self.greedy = self.policy.algo.greedy_module
        self.history = history
        self.measured = BASE + 2 + 4 * history  # what the student reads
        self.truth = slice(self.measured, self.measured + len(PRIVILEGED))

    def env(self, kwargs: dict, num_envs: int, seed: int):
        env_kwargs = {**kwargs, "obs_last_action": True, "obs_history": self.history, "obs_privileged": True}
        env_cfg = replace(self.config.env, kwargs=env_kwargs, normalize_obs=False)
        return make_env(env_cfg, num_envs=num_envs, seed=seed)

    @torch.no_grad()
    def act(self, observation: torch.Tensor, dynamics: torch.Tensor) -> torch.Tensor:
        """The teacher's gain-schedule action for these (true or estimated) dynamics."""
        teacher_view = torch.cat([observation[:, :BASE], dynamics], dim=-1)
        return self.greedy((teacher_view - self.loc) / self.scale)


class Estimator(nn.Module):
    def __init__(self, inputs: int, outputs: int, hidden: int = 128):
        super().__init__()
        self.register_buffer("loc", torch.zeros(inputs))
        self.register_buffer("scale", torch.ones(inputs))
        self.net = nn.Sequential(
            nn.Linear(inputs, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, outputs)
        )

    def forward(self, measured: torch.Tensor) -> torch.Tensor:
        return self.net((measured - self.loc) / self.scale)


def rollout(
    setup: Setup,
    estimator: Estimator | None,
    kwargs: dict,
    episodes: int,
    envs: int,
    seed: int,
    smooth: float = 0.0,
    *,
    pd: bool = False,
):
    """``episodes`` episodes (``envs`` at a time): the measured inputs and true dynamics of every step, and each
    episode's tracking RMSE. ``estimator`` None: the teacher acts on the true dynamics; else on its estimates,
    averaged over the episode so far with weight ``smooth`` on the previous average (the dynamics do not change
    within an episode: 0 acts on each step's estimate alone). ``pd``: a schedule of zeros, the PD's nominal gains
    throughout. Returns the acted-on estimates too."""
    inputs, truths, acted, rmse = [], [], [], []
    for start in range(0, episodes, envs):
        count = min(envs, episodes - start)
        env = setup.env(kwargs, count, seed + start)
        vector_env = env.base_env.vector_env
        raw, _ = vector_env.reset(seed=seed + start)
        done = np.zeros(count, dtype=bool)
        average = None
        while not done.all():
            observation = torch.as_tensor(raw, dtype=torch.float32)
            measured, truth = observation[:, : setup.measured], observation[:, setup.truth]
            inputs.append(measured)
            truths.append(truth)
            with torch.no_grad():
                if estimator is None:
                    dynamics = truth
                else:
                    estimate = estimator(measured)
                    average = estimate if average is None else smooth * average + (1 - smooth) * estimate
                    dynamics = average
            acted.append(dynamics)
            action = torch.zeros(count, 2) if pd else setup.act(observation, dynamics)
            raw, _, terminated, truncated, info = vector_env.step(action.numpy())
            done = np.asarray(terminated) | np.asarray(truncated)
        rmse += list(np.asarray(info["track_rmse"]) * 1000.0)
        env.close()
    return torch.cat(inputs), torch.cat(truths), torch.cat(acted), np.array(rmse)


def fit(estimator: Estimator, inputs: torch.Tensor, truths: torch.Tensor, steps: int, seed: int) -> float:
    generator = torch.Generator().manual_seed(seed)
    estimator.loc.copy_(inputs.mean(0))
    estimator.scale.copy_(inputs.std(0).clamp_min(1e-3))
    optimizer = torch.optim.Adam(estimator.net.parameters(), lr=1e-3)
    for _ in range(steps):
        index = torch.randint(len(inputs), (512,), generator=generator)
        loss = nn.functional.mse_loss(estimator(inputs[index]), truths[index])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    with torch.no_grad():
        return float(nn.functional.mse_loss(estimator(inputs), truths))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--teacher", required=True, help="a ppo-reacher-track-teacher run")
    parser.add_argument("--history", type=int, default=16, help="steps of measured history the student reads")
    parser.add_argument("--iterations", type=int, default=4, help="DAgger rounds (the first: teacher rollouts)")
    parser.add_argument("--train-episodes", type=int, default=64, help="episodes per round")
    parser.add_argument("--fit-steps", type=int, default=3000)
    parser.add_argument("--hidden", type=int, default=128, help="units in each of the estimator's 2 hidden layers")
    parser.add_argument("--smooth", type=float, default=0.0, help="weight of the running estimate (0: none)")
    parser.add_argument("--episodes", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out")
    args = parser.parse_args()
    stamp = header()
    torch.manual_seed(0)
    setup = Setup(args.teacher, args.history)
    training = {"randomize": "all", "randomize_prob": 0.5}
    estimator = Estimator(setup.measured, len(PRIVILEGED), args.hidden)
    inputs = truths = None
    started = time.perf_counter()
    log = []
    for round_ in range(args.iterations):
        new_inputs, new_truths, _, rmse = rollout(
            setup,
            None if round_ == 0 else estimator,
            training,
            args.train_episodes,
            16,
            100_000 + 1000 * round_,
            args.smooth,
        )
        inputs = new_inputs if inputs is None else torch.cat([inputs, new_inputs])
        truths = new_truths if truths is None else torch.cat([truths, new_truths])
        loss = fit(estimator, inputs, truths, args.fit_steps, round_)
        acting = "teacher" if round_ == 0 else "student"
        line = f"round {round_}: {acting} rollouts RMSE {rmse.mean():.2f} mm; {len(inputs)} samples; fit MSE {loss:.4f}"
        print(line, flush=True)
        log.append(line)
    train_seconds = time.perf_counter() - started
    rows = {"PD (nominal gains)": {}, "teacher (true dynamics)": {}, "student (estimated dynamics)": {}}
    errors = {}
    for name, condition in CONDITIONS.items():
        kwargs = {key: value for key, value in condition.items() if key in NOMINAL}
        for row, acting in (("teacher (true dynamics)", None), ("student (estimated dynamics)", estimator)):
            _, truth, acted, rmse = rollout(setup, acting, kwargs, args.episodes, args.episodes, args.seed, args.smooth)
            rows[row][name] = float(rmse.mean())
            if acting is not None:
                errors[name] = (acted - truth).abs().mean(0).tolist()
        *_, rmse = rollout(setup, None, kwargs, args.episodes, args.episodes, args.seed, pd=True)
        rows["PD (nominal gains)"][name] = float(rmse.mean())
    table = ["| controller | " + " | ".join(CONDITIONS) + " |", "|---" * (len(CONDITIONS) + 1) + "|"]
    for row, values in rows.items():
        table.append(f"| {row} | " + " | ".join(f"{values[c]:.3g}" for c in CONDITIONS) + " |")
    table += [
        "",
        "mean |acted-on estimate - truth| per parameter (normalised units), over every step of the student's episodes:",
        "",
    ]
    table += ["| condition | " + " | ".join(PRIVILEGED) + " |", "|---" * (len(PRIVILEGED) + 1) + "|"]
    table += [f"| {c} | " + " | ".join(f"{v:.3f}" for v in errors[c]) + " |" for c in CONDITIONS]
    body = [
        f"teacher {args.teacher}; history {args.history} steps; estimator 2 x {args.hidden}, "
        f"{args.fit_steps} fit steps; estimate smoothing {args.smooth:g}; "
        f"{args.iterations} DAgger rounds of "
        f"{args.train_episodes} episodes; training {train_seconds:.0f} s; tracking RMSE (mm), {args.episodes} "
        f"episodes from seed {args.seed}",
        *log,
        "",
        *table,
    ]
    print("\n".join(body))
    if args.out:
        write_result(args.out, stamp, body, {"rows": rows, "estimate_errors": errors, "args": vars(args), "log": log})


if __name__ == "__main__":
    main()
