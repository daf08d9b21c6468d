"""Students of ``rlpilot train adapt`` side by side on their table's named plants: each run's tracking error over
the same evaluation episodes (seeds 10,000..), and how far its per-step gains sit from the teacher's label, early
and late in the episode. A quick look between variants (the weighted average against the plain one, a second
training seed) before ``rlpilot compare`` measures the chosen one with intervals.

    PYTHONPATH=examples python benchmarks/adapt_students.py runs/tank-avg-s1 runs/tank-w-s1 --episodes 20

``--teacher COMPARE_JSON``: instead, the first run's teacher itself, each named plant's oracle from its table
played with its gains as tuned and with each gain moved 19% (0.075 decades) either way, against the fine oracle
of an ``rlpilot compare`` answer on the same episodes: how close the labels are, and how sharp the optimum is.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import stamp  # noqa: E402

from rlpilot.adapt.teacher import named_plants  # noqa: E402
from rlpilot.control.evaluate import evaluate  # noqa: E402
from rlpilot.play.episodes import playable  # noqa: E402


def student_rows(run: Path, episodes: int, seed: int) -> list[dict]:
    teacher = json.loads((run / "teacher.json").read_text())
    named = named_plants(teacher["conditions"])
    policy = playable(run)
    rows = []
    for name in named:
        target = replace(policy, env_config=replace(policy.env_config, condition=dict(teacher["conditions"][name])))
        env = target.make_env(num_envs=episodes, seed=seed)
        actions = []

        def act(observation, record=actions):
            action = policy.act(observation)
            record.append(action.detach().clone())
            return action

        result = evaluate(env, act, episodes=episodes, seed=seed)
        env.close()
        label = torch.tensor(teacher["labels"][name])
        gains = torch.stack(actions)[..., : len(label)]
        error = (gains - label).abs().mean(1).mean(-1)  # per step, mean over envs and gains
        rows.append(
            {
                "run": run.name,
                "plant": name,
                "tracking_error": float(result.per_episode()["tracking_error"].mean()),
                "label_error_first_40": float(error[:40].mean()),
                "label_error_after_100": float(error[min(100, len(error) // 2) :].mean()),  # short ones: 2nd half
            }
        )
    return rows


SHIFT = 0.075
"""Decades each gain is moved in the teacher's sharpness rows (19%: 0.05 of a student's action at the default
``env.residual_scale`` of 1.5)."""


def teacher_rows(run: Path, answer: Path, episodes: int, seed: int) -> list[str]:
    from rlpilot.config.sections import EnvConfig
    from rlpilot.reference.play import play_candidates

    teacher = json.loads((run / "teacher.json").read_text())
    fine = json.loads(answer.read_text())["references"]
    config = playable(run).env_config
    seeds = list(range(seed, seed + episodes))
    moves = " | ".join(f"{g} {d}" for g in teacher["robust"] for d in ("-", "+"))
    lines = [f"| plant | teacher / fine oracle | {moves} |"]
    lines.append("|---" * (2 + 2 * len(teacher["robust"])) + "|")
    for name in named_plants(teacher["conditions"]):
        condition = teacher["conditions"][name]
        if f"oracle/{name}" not in fine:
            continue
        plant = EnvConfig(id=config.id, kwargs=config.kwargs, condition=dict(condition))
        oracle = teacher["oracles"][name]
        moved = [{**oracle, g: oracle[g] * 10 ** (sign * SHIFT)} for g in oracle for sign in (-1, 1)]
        played = play_candidates(
            plant, config.base_controller, [fine[f"oracle/{name}"]["kwargs"], oracle, *moved], seeds=seeds
        )
        error = [result.per_episode()["tracking_error"].mean() for result in played]
        cells = " | ".join(f"{e / error[1]:.2f}" for e in error[2:])
        lines.append(f"| {name} | {error[1] / error[0]:.2f} | {cells} |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path)
    parser.add_argument("--episodes", type=int, default=20)
    parser.add_argument("--seed", type=int, default=10_000)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--teacher", type=Path, metavar="COMPARE_JSON")
    args = parser.parse_args()
    head = stamp.header()
    if args.teacher:
        lines = teacher_rows(args.runs[0], args.teacher, args.episodes, args.seed)
        print("\n".join(lines))
        if args.out:
            stamp.write_result(args.out, head, lines, {"episodes": args.episodes, "seed": args.seed})
        return
    rows = [row for run in args.runs for row in student_rows(run, args.episodes, args.seed)]
    lines = ["| run | plant | tracking error | label error, steps 0-40 | after step 100 |", "|---|---|---|---|---|"]
    lines += [
        f"| {r['run']} | {r['plant']} | {r['tracking_error']:.4f} | {r['label_error_first_40']:.3f} | "
        f"{r['label_error_after_100']:.3f} |"
        for r in rows
    ]
    print("\n".join(lines))
    if args.out:
        stamp.write_result(args.out, head, lines, {"rows": rows, "episodes": args.episodes, "seed": args.seed})


if __name__ == "__main__":
    main()
