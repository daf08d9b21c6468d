"""``rlpilot train adapt PLANT --controller mod:Class --param k=lo:hi[:log] [--set ...]``: the command line read into
:func:`rlpilot.adapt.train_adapt`, and the result printed. ``--set adapt.KEY=VALUE`` sets
:class:`rlpilot.adapt.settings.AdaptSettings`; every other ``--set`` goes to the PPO run's config. ``rlpilot train
PRESET`` of a preset with an ``adapt`` section (``ppo-reacher-track-adaptive``) is the same command with the plant, the
controller, its ``--param`` and the ``adapt.*`` settings the preset's (``--set`` goes over them)."""

from __future__ import annotations

import argparse
import json

from rlpilot.common.errors import UserError

USAGE = "rlpilot train adapt PLANT --controller package.module:Class --param KEY=LOW:HIGH[:log] ..."


def run(args: argparse.Namespace, preset: str | None = None) -> int:
    """``rlpilot train adapt ...``, or ``rlpilot train PRESET`` where ``preset`` names one with an ``adapt`` section."""
    from rlpilot.adapt.settings import read_settings
    from rlpilot.arguments import controller_kwargs
    from rlpilot.registry import resolve_env
    from rlpilot.runs import train_origin

    verb = f"train {preset}" if preset else "train adapt"
    if args.resume or args.config or args.frames is not None or args.ray:
        raise UserError(
            f"{verb} builds its own run: no --resume, --config, --frames or --ray (its budget is adapt.iterations; "
            "refine the result with rlpilot train --resume RUN --frames N)"
        )
    preset_items, origin = [], None
    if preset is not None:
        from rlpilot.config.load import load_preset_data, preset_adapt

        if args.env or args.controller or args.param or args.controller_kwargs:
            raise UserError(
                f"{verb}: the preset names its plant, controller and --param; for others: rlpilot train adapt PLANT "
                "--controller NAME --param KEY=LOW:HIGH[:log]"
            )
        section = preset_adapt(preset)
        args.env, args.controller = load_preset_data(preset).get("env", {}).get("id"), section["controller"]
        args.param = section["params"]
        preset_items = [f"adapt.{key}={json.dumps(value)}" for key, value in section.get("settings", {}).items()]
    if not args.env or not args.controller:
        raise UserError(f"train adapt needs a plant and your controller: {USAGE}")
    given = [item for item in args.set if item.strip().startswith("adapt.")]
    settings = read_settings([*preset_items, *given])
    chosen = frozenset(item.partition("=")[0].strip().removeprefix("adapt.") for item in given)
    overrides = [item for item in args.set if not item.strip().startswith("adapt.")]
    overrides += [f"train.seed={args.seed}"] * (args.seed is not None)
    overrides += [f"train.device={args.device}"] * (args.device is not None)
    if preset is not None:  # how the run was asked for, as rlpilot train records it (meta.json's origin)
        adapt_items = [item for item in args.set if item.strip().startswith("adapt.")]
        origin = train_origin(preset=preset, overrides=[*adapt_items, *overrides])
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
        origin=origin,
        preset=preset,
        chosen=chosen,
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
