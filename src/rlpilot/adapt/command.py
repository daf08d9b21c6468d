"""``rlpilot train adapt PLANT --controller mod:Class --param k=lo:hi[:log] [--set ...]``: the command line read into
:func:`rlpilot.adapt.train_adapt`, and the result printed. ``--set adapt.KEY=VALUE`` sets
:class:`rlpilot.adapt.settings.AdaptSettings`; every other ``--set`` goes to the PPO run's config."""

from __future__ import annotations

import argparse

from rlpilot.common.errors import UserError

USAGE = "rlpilot train adapt PLANT --controller package.module:Class --param KEY=LOW:HIGH[:log] ..."


def run(args: argparse.Namespace) -> int:
    from rlpilot.adapt.settings import read_settings
    from rlpilot.arguments import controller_kwargs
    from rlpilot.registry import resolve_env

    if args.resume or args.config or args.frames is not None or args.ray:
        raise UserError(
            "train adapt builds its own run: no --resume, --config, --frames or --ray (its budget is adapt.iterations; "
            "refine the result with rlpilot train --resume RUN --frames N)"
        )
    if not args.env or not args.controller:
        raise UserError(f"train adapt needs a plant and your controller: {USAGE}")
    settings = read_settings([item for item in args.set if item.strip().startswith("adapt.")])
    overrides = [item for item in args.set if not item.strip().startswith("adapt.")]
    overrides += [f"train.seed={args.seed}"] * (args.seed is not None)
    overrides += [f"train.device={args.device}"] * (args.device is not None)
    fixed = controller_kwargs(args) or {}
    resolve_env(args.env)  # a bad id or module is one line before torch is imported
    from rlpilot.common.torchrl_import import import_torchrl

    import_torchrl()
    from rlpilot.adapt import train_adapt
    from rlpilot.reference.search import check_space
    from rlpilot.tune.controller import controller_space

    space = controller_space(args.param)
    check_space(space)
    if clash := sorted({p.key for p in space} & set(fixed)):
        raise UserError(f"--param {clash[0]} is searched: leave it out of --controller-kwargs")
    run = train_adapt(
        args.env,
        args.controller,
        space,
        fixed,
        overrides=overrides,
        settings=settings,
        run_root=args.runs,
        run_dir=args.run_dir,
        show_progress=not args.quiet,
    )
    meta = run.meta()
    print(f"status: {run.status}{': ' + meta['reason'] if meta.get('reason') else ''}")
    evaluation = "-" if run.last_eval is None else f"{run.last_eval:.1f}"
    print(f"frames: {run.frames:,}  wall: {run.elapsed_s:.1f} s  teacher: {meta['adapt']['teacher_s']:.1f} s")
    print(f"last greedy eval: {evaluation}  (the robust controller alone at frame 0: metrics.csv)")
    print(f"run:    {run.path}")
    params = " ".join(f"--param {p}" for p in args.param)
    print(f"compare: rlpilot compare {args.env} --controller {args.controller} {params} --run {run.path}")
    return 1 if run.status == "failed" else 0
