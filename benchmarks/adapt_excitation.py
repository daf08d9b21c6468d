"""How an episode's first steps decide it, for a ``rlpilot train adapt`` run on one named plant of its table: the
robust controller with every gain multiplied by ``M`` for the first ``K`` steps and by ``A`` after (each
``--schedule M:K:A``; ``M`` or ``A`` may give one multiplier per gain, ``7.3/3.1``), against the robust gains
throughout, on the same evaluation episodes; and the multipliers the run's student itself reaches (averaged as the
run averages them) at a few early steps. On the arm under a one-step delay this shows why the student fails there:
its first estimates, made before the history shows the delay, raise the gains, and a few such steps leave an
oscillation the robust gains do not damp.

    python benchmarks/adapt_excitation.py runs/adapt-arm --plant delay --schedule 2.82:5:1 --schedule 1.41:15:1 \\
        --episodes 20 --out benchmarks/results/adapt_excitation-arm-2026-12-06.txt
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import stamp  # noqa: E402

from rlpilot.control.evaluate import evaluate  # noqa: E402
from rlpilot.envs.residual import AveragedGains  # noqa: E402
from rlpilot.play.episodes import playable  # noqa: E402
from rlpilot.stats import bootstrap  # noqa: E402

EARLY = (1, 5, 15, 40)
"""After how many steps the student's averaged multipliers are shown."""


def held(policy, condition: dict, schedule: tuple, episodes: int, seed: int) -> np.ndarray:
    """Per episode, the tracking error of the robust gains times ``M`` for ``K`` steps, then times ``A`` (each a
    multiplier for every gain, or a tuple of one per gain)."""
    multiplier, steps, after = schedule
    config = replace(policy.env_config, gain_average=1, gain_weights=False, condition=condition)  # each step's own
    scale = float(config.residual_scale)
    env = replace(policy, env_config=config).make_env(num_envs=episodes, seed=seed)
    width = env.base_env.vector_env.single_action_space.shape[0]
    step = [0]

    def action(value) -> torch.Tensor:
        values = value if isinstance(value, tuple) else (value,) * width
        return torch.tensor(values, dtype=torch.float32).log10() / scale

    first, then = action(multiplier), action(after)

    def act(observation: torch.Tensor) -> torch.Tensor:
        value = first if step[0] < steps else then
        step[0] += 1
        return value.expand(observation.shape[0], width)

    result = evaluate(env, act, episodes=episodes, seed=seed)
    env.close()
    return np.asarray(result.per_episode()["tracking_error"], dtype=np.float64)


def student_multipliers(policy, condition: dict, episodes: int, seed: int) -> tuple[np.ndarray, dict[int, dict]]:
    """The student's per-episode tracking error on the plant, and its averaged multipliers (mean over episodes, per
    gain) at the steps of :data:`EARLY`."""
    env = replace(policy, env_config=replace(policy.env_config, condition=condition)).make_env(
        num_envs=episodes, seed=seed
    )
    residual = env.base_env.vector_env
    seen: dict[int, dict] = {}
    step = [0]

    def act(observation: torch.Tensor) -> torch.Tensor:
        action = policy.act(observation)
        controller = residual.controller  # AveragedGains under env.gain_average (train adapt's default)
        multipliers = controller.multipliers() if isinstance(controller, AveragedGains) else None
        if step[0] in EARLY and multipliers is not None:
            seen[step[0]] = dict(zip(controller.gain_names, (round(float(x), 2) for x in multipliers.mean(0))))
        step[0] += 1
        return action

    result = evaluate(env, act, episodes=episodes, seed=seed)
    env.close()
    return np.asarray(result.per_episode()["tracking_error"], dtype=np.float64), seen


def _multiplier(text: str) -> float | tuple[float, ...]:
    values = tuple(float(part) for part in text.split("/"))
    return values[0] if len(values) == 1 else values


def _shown(value: float | tuple[float, ...]) -> str:
    return "/".join(f"{x:g}" for x in value) if isinstance(value, tuple) else f"{value:g}"


def parse(text: str) -> tuple:
    multiplier, steps, after = text.split(":")
    return _multiplier(multiplier), int(steps), _multiplier(after)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path)
    parser.add_argument("--plant", required=True, help="a named plant of the run's teacher table")
    parser.add_argument("--schedule", action="append", type=parse, default=[], metavar="M:K:A")
    parser.add_argument("--episodes", type=int, default=20)
    parser.add_argument("--seed", type=int, default=10_000)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    head = stamp.header()
    condition = dict(json.loads((args.run / "teacher.json").read_text())["conditions"][args.plant])
    policy = playable(args.run)

    def row(label: str, errors: np.ndarray) -> str:
        low, high = bootstrap(errors, np.mean)
        return f"| {label} | {errors.mean():.5f} [{low:.5f}, {high:.5f}] |"

    lines = [f"Plant `{args.plant}` ({condition}); {args.episodes} episodes from seed {args.seed}.", ""]
    lines += ["| gains (multipliers of the robust ones) | tracking error [95% interval] |", "|---|---|"]
    rows = {"robust throughout": held(policy, condition, (1.0, 0, 1.0), args.episodes, args.seed)}
    for schedule in args.schedule:
        multiplier, steps, after = schedule
        rows[f"{_shown(multiplier)}x for {steps} steps, then {_shown(after)}x"] = held(
            policy, condition, schedule, args.episodes, args.seed
        )
    errors, seen = student_multipliers(policy, condition, args.episodes, args.seed)
    rows["the student"] = errors
    lines += [row(label, values) for label, values in rows.items()]
    lines += ["", "The student's averaged multipliers, mean over the episodes, after this many steps:"]
    lines += [f"- {step}: {values}" for step, values in sorted(seen.items())]
    print("\n".join(lines))
    if args.out:
        data = {"plant": args.plant, "condition": condition, "episodes": args.episodes, "seed": args.seed}
        data.update(rows={label: values.tolist() for label, values in rows.items()}, student_multipliers=seen)
        stamp.write_result(args.out, head, lines, data)


if __name__ == "__main__":
    main()
