"""``rlpilot compare ENV --controller ... --param ...``: the command line read into a :class:`~rlpilot.compare.Plan`
and the answer printed (the table, where the files went)."""

from __future__ import annotations

import argparse
from pathlib import Path

from rlpilot.common.errors import UserError
from rlpilot.common.files import file_name


def run(args: argparse.Namespace, argv: list[str] | None = None) -> int:
    from rlpilot.arguments import controller_kwargs
    from rlpilot.check import env_config
    from rlpilot.common.redact import redact_command
    from rlpilot.play.trust import allow_code, require_trust
    from rlpilot.registry import resolve_env

    for target in [*args.run, *args.artifact]:
        if not Path(target).exists():
            raise UserError(f"--run/--artifact {target}: no such run directory or file")
        require_trust(target, trusted=args.trust_code, verb="compare")
    allow_code(args.trust_code)
    if not args.param:
        raise UserError(
            "compare: name the controller arguments the references search, --param kp=0.1:100:log (repeatable)"
        )
    env_cfg = env_config(args.env, args.set)
    resolve_env(env_cfg.id)
    from rlpilot.common.torchrl_import import import_torchrl

    import_torchrl()
    from rlpilot.compare import Plan, compare, conditions_of
    from rlpilot.compare.report import answer_table
    from rlpilot.envs.make import declaration
    from rlpilot.reference.play import Objective
    from rlpilot.reference.search import BUDGETS
    from rlpilot.tune.controller import controller_space

    declared = declaration(env_cfg)
    space = controller_space(args.param)
    fixed = controller_kwargs(args) or {}
    if clash := sorted({p.key for p in space} & set(fixed)):
        raise UserError(f"--param {clash[0]} is searched: leave it out of --controller-kwargs")
    batch, rounds, refine = BUDGETS[args.search]
    plan = Plan(
        env=env_cfg,
        controller=args.controller,
        space=space,
        fixed=fixed,
        conditions=conditions_of(declared, args.condition),
        runs=list(args.run),
        artifacts=list(args.artifact),
        others=list(args.also),
        episodes=args.episodes,
        seed=args.seed,
        workers=args.workers,
        tuning_episodes=args.tuning_episodes,
        tuning_seed=args.tuning_seed,
        objective=Objective(args.score, args.effort_weight),
        bar=args.bar,
        effort_bar=args.effort_bar,
        batch=batch,
        rounds=rounds,
        refine_rounds=refine,
        command=redact_command(["rlpilot", *argv]) if argv else "rlpilot compare",
    )
    out = Path(args.out or f"runs/compare-{file_name(env_cfg.id)}")
    summary = compare(plan, declared, out)
    print(answer_table(summary))
    edges = [f"{name}: {', '.join(ref['edge'])}" for name, ref in summary["references"].items() if ref["edge"]]
    if edges:
        print(f"on the search's edge (widen --param): {'; '.join(edges)}")
    print(f"answer:  {out / 'answer.md'}\nnumbers: {out / 'compare.json'}")
    return 0
