"""``rlpilot eval RUN|ARTIFACT|ENV``: greedy episodes of a run, an exported policy or a controller (a multi-agent
group's, an LLM run's held-out answers), printed as the mean, the spread and each measure, and where the files went."""

from __future__ import annotations

import argparse

from rlpilot.arguments import check_seed_range, controller_kwargs
from rlpilot.common.errors import UserError
from rlpilot.common.torchrl_import import import_torchrl
from rlpilot.play.trust import allow_code, require_trust


def evaluate(args: argparse.Namespace) -> int:
    from rlpilot.play.llm import is_llm_run

    if is_llm_run(args.target):  # greedy answers to the held-out prompts, not episodes
        from rlpilot.play.llm import eval_llm_run

        print(eval_llm_run(args.target, checkpoint=args.checkpoint, csv_path=args.csv))
        return 0
    check_seed_range("--seed", args.seed, "--episodes", args.episodes)  # episode i plays seed + i
    require_trust(args.target, trusted=args.trust_code, verb="eval")
    allow_code(args.trust_code)
    import_torchrl()  # before rlpilot.play.group, which imports TorchRL
    from rlpilot.play.group import is_group_target

    if is_group_target(args.target):
        return _evaluate_group(args)
    from rlpilot.play.episodes import evaluate_target

    result, csv_path, video = evaluate_target(
        args.target,
        **_episodes_asked(args),
        backend=args.backend,
        controller=args.controller,
        controller_kwargs=controller_kwargs(args),
        condition=args.condition,
    )
    if result.condition:
        from rlpilot.conditions import OUTSIDE

        values = "  ".join(k if isinstance(v, str) else f"{k}={v:g}" for k, v in result.condition.items())
        flagged = f"  ({', '.join(result.outside)}: {OUTSIDE})" if result.outside else ""
        print(f"condition: {values}{flagged}")
    _print_episodes(args, "mean", result.returns, list(result.per_episode().items()), {})
    return _print_files(csv_path, video)


def _print_episodes(args: argparse.Namespace, what: str, returns, columns: list, task: dict) -> None:
    who = f"controller {args.controller}" if args.controller else "greedy"
    print(
        f"{args.episodes} {who} episodes: {what} {returns.mean():.2f}  std {returns.std():.2f}  "
        f"min {returns.min():.2f}  max {returns.max():.2f}"
    )
    for name, values in columns:
        print(f"  {name:<18} mean {values.mean():.4g}  std {values.std():.4g}")
    for name, value in task.items():
        print(f"  {name:<18} {value:.4g} (end of episode)")


def _print_files(csv_path, video) -> int:
    if csv_path is not None:
        print(f"episodes: {csv_path}")
    if video is not None:
        print(f"video:    {video}")
    return 0


def _episodes_asked(args: argparse.Namespace) -> dict:
    """What ``rlpilot eval`` asks of a run's, an artifact's or a group's episodes alike."""
    return {
        "episodes": args.episodes,
        "seed": args.seed,
        "csv_path": args.csv,
        "video": args.video,
        "checkpoint": args.checkpoint,
        "step_limit_s": args.step_limit,
    }


def _evaluate_group(args: argparse.Namespace) -> int:
    """A multi-agent run, group artifact or env id: the group's mean return and each agent's."""
    if args.backend is not None:
        raise UserError("--backend: a multi-agent run is evaluated on its own env (env.backend in its config)")
    from rlpilot.play.group import evaluate_group

    per_agent, task, csv_path, video = evaluate_group(
        args.target, **_episodes_asked(args), controller_name=args.controller
    )
    columns = [(f"agent {i}", values) for i, values in enumerate(per_agent.T)]
    _print_episodes(args, "mean return (over agents)", per_agent.mean(1), columns, task)
    return _print_files(csv_path, video)
