"""How much an episode's first steps tell about the plant, for a ``rlpilot train adapt`` run: can any regressor of
the student's inputs find the teacher's label there, and how close does the run's student come?

Every plant of the run's teacher table plays ``--train-episodes`` episodes (seeds from 300,000) and, apart,
``--episodes`` evaluation episodes (from ``--seed``), all with the robust gains (action 0), so that the inputs differ
by the plant alone (played with the oracle's gains they would carry the label in the commands). At each of the first
``--steps`` steps (fewer than an episode's) the student's inputs (normalised as the run normalises them) are recorded
with the plant's label.
A fresh network of the student's layers is regressed on the training episodes' inputs (mean squared error), and on
the evaluation episodes, per step, the mean absolute error of: the table's mean label (what a student that learns
nothing from its history can do), the fresh fit, and the run's own student. Where the fresh fit is little better
than the mean label, the history does not yet tell the plants apart, whatever the student.

    python benchmarks/adapt_identify.py runs/adapt-arm --steps 8 --out benchmarks/results/adapt_identify-arm-DATE.txt
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
from rlpilot.envs.residual import gain_multipliers  # noqa: E402
from rlpilot.play.episodes import playable  # noqa: E402
from rlpilot.play.load import load_policy  # noqa: E402

TRAIN_SEED = 300_000
"""The fresh fit's episodes play seeds from here: apart from DAgger's (200,000..) and compare's (10,000..)."""


def record(policy, table: dict, steps: int, episodes: int, seed: int) -> dict[str, torch.Tensor]:
    """Per plant of the table, in its order, the inputs of its episodes' first ``steps`` steps under the robust
    gains: ``inputs`` (samples, width), ``labels``, ``steps`` (the step of each sample) and ``plants`` (its index)."""
    found: dict[str, list] = {"inputs": [], "labels": [], "steps": [], "plants": []}
    for index, (plant, label) in enumerate(table["labels"].items()):
        config = replace(policy.env_config, condition=dict(table["conditions"][plant]), condition_sampled=False)
        env = replace(policy, env_config=config).make_env(num_envs=episodes, seed=seed)
        width = env.base_env.vector_env.single_action_space.shape[0]  # two columns a gain under env.gain_weights
        robust = torch.zeros(episodes, width)
        step = [0]

        def act(observation: torch.Tensor, robust=robust, label=label, index=index, step=step) -> torch.Tensor:
            if step[0] < steps:  # the vector env steps every episode alike: its first steps are the loop's
                found["inputs"].append(observation.clone())
                found["labels"].append(torch.tensor(label).expand(len(observation), len(label)))
                found["steps"].append(torch.full((len(observation),), step[0]))
                found["plants"].append(torch.full((len(observation),), index))
            step[0] += 1
            return robust[: len(observation)]

        evaluate(env, act, episodes=episodes, seed=seed)
        env.close()
    return {key: torch.cat(values) for key, values in found.items()}


def fresh_fit(run: Path, train: dict, updates: int, seed: int) -> torch.nn.Module:
    """A network of the student's layers and activation, regressed on ``train`` (Adam, minibatches of 256)."""
    model = load_policy(run).run.config().model
    sizes, activation = (
        list(model.hidden_sizes),
        {"relu": torch.nn.ReLU, "elu": torch.nn.ELU}.get(model.activation, torch.nn.Tanh),
    )
    torch.manual_seed(seed)
    widths = [train["inputs"].shape[1], *sizes]
    layers: list[torch.nn.Module] = []
    for width, size in zip(widths, sizes):
        layers += [torch.nn.Linear(width, size), activation()]
    net = torch.nn.Sequential(*layers, torch.nn.Linear(widths[-1], train["labels"].shape[1]))
    optimizer = torch.optim.Adam(net.parameters(), lr=1e-3)
    generator = torch.Generator().manual_seed(seed)
    for _ in range(updates):
        index = torch.randint(len(train["inputs"]), (256,), generator=generator)
        loss = (net(train["inputs"][index]) - train["labels"][index]).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return net


def measure(run: Path, steps: int, train_episodes: int, episodes: int, seed: int, updates: int) -> dict:
    """Per step: the mean absolute label error of the mean label, the fresh fit and the student (``errors``); and
    per named plant, the mean multipliers each gives at steps 1 and ``steps - 1`` (``named``)."""
    table = json.loads((run / "teacher.json").read_text())
    policy = playable(run)
    student = load_policy(run).algo.greedy_module
    train = record(policy, table, steps, train_episodes, TRAIN_SEED)
    test = record(policy, table, steps, episodes, seed)
    net = fresh_fit(run, train, updates, seed)
    gains = train["labels"].shape[1]
    with torch.no_grad():
        estimates = {
            "mean label": train["labels"].mean(0).expand_as(test["labels"]),
            "fresh fit": net(test["inputs"]).clamp(-1, 1),
            "student": student(test["inputs"])[:, :gains].clamp(-1, 1),
        }
    errors = {
        name: [
            float((value[test["steps"] == s] - test["labels"][test["steps"] == s]).abs().mean()) for s in range(steps)
        ]
        for name, value in estimates.items()
    }
    scale = float(policy.env_config.residual_scale)
    plants = list(table["labels"])
    named = {}
    for plant in named_plants(table["conditions"]):
        where = test["plants"] == plants.index(plant)
        row = {"label": gain_multipliers(torch.tensor(table["labels"][plant]), scale).tolist()}
        for name, value in estimates.items():
            for s in sorted({1, steps - 1}):
                chosen = value[where & (test["steps"] == s)]
                row[f"{name} @{s}"] = gain_multipliers(chosen, scale).mean(0).tolist()
        named[plant] = row
    return {"errors": errors, "named": named, "samples": len(train["inputs"])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path)
    parser.add_argument("--steps", type=int, default=8, help="the first steps of every episode looked at")
    parser.add_argument("--train-episodes", type=int, default=24, help="the fresh fit's episodes per plant")
    parser.add_argument("--episodes", type=int, default=10, help="evaluation episodes per plant")
    parser.add_argument("--updates", type=int, default=4000, help="the fresh fit's Adam steps")
    parser.add_argument("--seed", type=int, default=10_000)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    if args.steps < 2:
        parser.error("--steps: at least 2 (it shows step 1 and the last)")
    head = stamp.header()
    found = measure(args.run, args.steps, args.train_episodes, args.episodes, args.seed, args.updates)
    errors, named = found["errors"], found["named"]
    lines = [
        f"Run `{args.run}`: every plant of its teacher table under the robust gains; the fresh fit regressed on "
        f"{found['samples']:,} samples ({args.train_episodes} episodes a plant, their first {args.steps} steps), all "
        f"measured on {args.episodes} other episodes a plant from seed {args.seed}. Mean absolute error against the "
        "plant's label, in actions (1 = the schedule's whole scale):",
        "",
        "| step | " + " | ".join(errors) + " | fresh fit / mean label |",
        "|---|" + "---|" * (len(errors) + 1),
    ]
    for s in range(args.steps):
        cells = [f"{errors[name][s]:.3f}" for name in errors]
        lines.append(f"| {s} | " + " | ".join(cells) + f" | {errors['fresh fit'][s] / errors['mean label'][s]:.2f} |")
    lines += ["", "Mean multipliers of the robust gains on the named plants (per gain):"]
    for plant, row in named.items():
        parts = [f"{key} {'/'.join(f'{x:.2f}' for x in value)}" for key, value in row.items()]
        lines.append(f"- {plant}: " + "; ".join(parts))
    print("\n".join(lines))
    if args.out:
        data = {"run": str(args.run), "steps": args.steps, "train_episodes": args.train_episodes}
        data.update(episodes=args.episodes, seed=args.seed, updates=args.updates, **found)
        stamp.write_result(args.out, head, lines, data)


if __name__ == "__main__":
    main()
