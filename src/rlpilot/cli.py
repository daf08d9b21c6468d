"""The ``rlpilot`` command: verbs -> library calls; known errors -> one line and exit code 2.

Only argparse, the config module and the registry (no torch) are imported at start, so ``--help``, ``presets``,
unknown names and argument errors answer in well under a second; each verb imports what it needs.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import os
import signal
import sys
import threading
from typing import NoReturn

from rlpilot.arguments import (
    EXIT_BAD_INPUT,
    MAX_ERROR_CHARS,
    build_parser,
    check_seed_range,
    controller_kwargs,
    one_line,
)
from rlpilot.common import stopping
from rlpilot.common.errors import UserError, os_error_line
from rlpilot.common.files import file_name
from rlpilot.common.redact import redact
from rlpilot.common.torchrl_import import import_torchrl  # TorchRL without the Ray and MuJoCo it loads for nothing
from rlpilot.play.trust import require_trust


def _cmd_presets(args: argparse.Namespace) -> int:
    from rlpilot.config.load import load_config, preset_adapt, preset_names  # torch-free (rlpilot.adapt is not)

    rows = []
    for name in preset_names():
        config = load_config(name)
        threshold = _preset_threshold(config)
        solved = "-" if threshold is None else f"{threshold:g}"
        budget = f"{config.train.total_frames:,}"
        if (section := preset_adapt(name)) is not None:  # trains by train adapt: its budget is DAgger's iterations
            algo, budget = (
                f"adapt ({config.algo})",
                f"{section.get('settings', {}).get('iterations', 'default')} DAgger it.",
            )
        rows.append((name, algo if section else config.algo, config.subject, budget, solved))
    header = ("preset", "algo", "env / task", "budget (frames)", "solved at")
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        cells = [cell.ljust(width) if i < 3 else cell.rjust(width) for i, (cell, width) in enumerate(zip(row, widths))]
        print("  ".join(cells))
    return 0


def _preset_threshold(config) -> float | None:
    """``train.solved_at``, else the env's registered ``reward_threshold`` (what training will use)."""
    if config.train.solved_at is not None or config.kind != "control":
        return config.train.solved_at
    from rlpilot.registry import registered_spec

    try:
        spec = registered_spec(config.env.id)
    except UserError:  # an optional extra is missing: the threshold is unknown until it is installed
        return None
    return spec.reward_threshold if spec is not None else None


def _cmd_check(args: argparse.Namespace) -> int:
    from rlpilot.check import env_config

    env_cfg = env_config(args.target, args.set)
    from rlpilot.registry import is_multiagent_env

    if is_multiagent_env(env_cfg.id):
        return _check_group(env_cfg, args)
    from rlpilot.registry import resolve_env

    resolve_env(env_cfg.id)  # bad ids fail here, before torch is imported
    import_torchrl()
    from rlpilot.check.env import check_env

    with _env_failures(env_cfg.id):
        report = check_env(
            env_cfg, episodes=args.episodes, seed=args.seed, frame_png=args.frame, max_seconds=args.max_seconds
        )
    print(report.render())
    return 0 if report.healthy else 1


@contextlib.contextmanager
def _env_failures(env_id: str):
    """``check`` runs the env's own code (and a multi-agent library's): what it raises is one line naming the
    env (``--debug``: the traceback, through the UserError's cause)."""
    try:
        yield
    except (UserError, OSError, KeyboardInterrupt):
        raise
    except Exception as exc:
        raise UserError(
            f"env '{env_id}' failed during the check: {type(exc).__name__}: {_first_line(exc)} (add --debug "
            "for the traceback)"
        ) from exc


def _check_group(env_cfg, args: argparse.Namespace) -> int:
    from rlpilot.registry import env_kwargs_problem, resolve_multiagent_env

    if problem := env_kwargs_problem(env_cfg.id, env_cfg.kwargs):  # N=1000 agents: one line, not minutes
        raise UserError(problem)
    resolve_multiagent_env(env_cfg.id)  # a typo'd module or a missing extra: one line, before torch
    from rlpilot.check.group import check_group_env

    with _env_failures(env_cfg.id):
        report = check_group_env(env_cfg, episodes=args.episodes, seed=args.seed)
    print(report.render())
    return 0 if report.healthy else 1


def _train_config(args: argparse.Namespace):
    """The config ``rlpilot train`` was asked for, and how it was asked (:func:`rlpilot.runs.train_origin`)."""
    from rlpilot.config.load import load_config
    from rlpilot.registry import ALGORITHMS, is_config_file
    from rlpilot.runs import train_origin

    overrides = list(args.set)
    if args.seed is not None:
        overrides.append(f"train.seed={args.seed}")
    if args.device is not None:
        overrides.append(f"train.device={args.device}")
    if args.frames is not None:
        overrides.append(f"train.total_frames={args.frames}")
    if args.config is not None:
        if args.target:
            raise UserError("--config FILE is the whole config: give no preset or ALGO ENV with it")
        if not is_config_file(args.config):
            raise UserError(f"--config {args.config}: no such .yaml file")
        config = load_config(config_file=args.config, overrides=overrides)
        print(f"config file: {args.config}", file=sys.stderr)  # after loading: a bad file is one line
        return config, train_origin(config_file=args.config, overrides=overrides)
    if args.target in ALGORITHMS and ALGORITHMS[args.target].kind == "llm":
        raise UserError(
            f"{args.target} fine-tunes a language model, not an env: start from a preset: rlpilot train grpo-reverse"
        )
    if args.env is not None:
        if args.target not in ALGORITHMS:
            raise UserError(
                f"'{args.target} {args.env}': the first word must be an algorithm ({', '.join(ALGORITHMS)})"
            )
        config = load_config(algo=args.target, env_id=args.env, overrides=overrides)
        return config, train_origin(algo=args.target, env=args.env, overrides=overrides)
    if args.target in ALGORITHMS:
        raise UserError(f"'rlpilot train {args.target}' needs an env too, e.g. rlpilot train {args.target} CartPole-v1")
    return load_config(args.target, overrides=overrides), train_origin(preset=args.target, overrides=overrides)


def _cmd_train(args: argparse.Namespace) -> int:
    if args.target == "adapt":  # learned adaptation of a controller (docs/adapt.md)
        from rlpilot.adapt.command import run as train_adapt

        return train_adapt(args)
    from rlpilot.config.load import preset_adapt

    if args.target and not args.env and preset_adapt(args.target) is not None:  # a preset of train adapt
        from rlpilot.adapt.command import run as train_adapt

        return train_adapt(args, preset=args.target)
    config = origin = None
    if args.resume:
        if args.target or args.seed is not None or args.device or args.run_dir or args.config:
            raise UserError(
                "--resume RUN continues a run with its own config: no preset, ALGO ENV, --config, --seed, --device "
                "or --run-dir with it; --frames N, --set train.* (budget, stop rule, intervals) and --ray may change"
            )
    else:
        if not args.target and not args.config:
            raise UserError("rlpilot train needs a preset (rlpilot presets), ALGO ENV, --config FILE or --resume RUN")
        config, origin = _train_config(args)
        if config.kind == "control":
            from rlpilot.registry import resolve_env

            resolve_env(config.env.id)  # a bad env id fails here, before torch is imported
        elif config.kind == "multiagent":
            from rlpilot.registry import resolve_multiagent_env

            resolve_multiagent_env(config.env.id, config.env.backend)
    if args.resume:
        require_trust(args.resume, trusted=args.trust_code, verb="train --resume")
    import_torchrl()
    from rlpilot.loop.trainer import resume, train

    if config is None:
        run = resume(
            args.resume,
            total_frames=args.frames,
            overrides=args.set,
            show_progress=not args.quiet,
            verbose=args.verbose,
            ray=args.ray,
        )
    else:
        run = train(
            config,
            run_root=args.runs,
            run_dir=args.run_dir,
            show_progress=not args.quiet,
            verbose=args.verbose,
            ray=args.ray,
            origin=origin,
        )
    meta = run.meta()
    evaluation = "-" if run.last_eval is None else f"{run.last_eval:.1f}"
    solved = f" (solved at {run.solved_at_frames:,} frames)" if run.solved_at_frames else ""
    reason = f": {meta['reason']}" if meta.get("reason") else ""
    print(f"status: {run.status}{solved}{reason}")
    startup = f" (after {meta['startup_s']:.1f} s of start-up)" if meta.get("startup_s") is not None else ""
    print(f"frames: {run.frames:,}  wall: {run.elapsed_s:.1f} s{startup}  last greedy eval: {evaluation}")
    print(f"run:    {run.path}")
    print(f"curve:  {run.curve_path}")
    from rlpilot.doctor import diagnose

    print(diagnose(run.path).render(short=True))
    if run.status == "interrupted":
        print(f"resume: rlpilot train --resume {run.path}")
        return 143 if "SIGTERM" in meta.get("reason", "") else 130
    return 1 if run.status == "failed" else 0


def _cmd_doctor(args: argparse.Namespace) -> int:
    from rlpilot.common.files import dumps
    from rlpilot.doctor import diagnose

    diagnosis = diagnose(args.run)
    print(dumps(diagnosis.to_json(), indent=2) if args.json else diagnosis.render())
    return 1 if diagnosis.errors else 0


def _not_adapt(preset: str, verb: str) -> None:
    """One line where ``preset`` trains by ``train adapt`` (an ``adapt`` section): its PPO sections alone, which the
    verb would train, are not what the preset means."""
    from rlpilot.config.load import preset_adapt

    if preset_adapt(preset) is not None:
        raise UserError(
            f"rlpilot {verb} {preset}: the preset trains by train adapt (a teacher, then DAgger), which {verb} does "
            f"not run; train it with rlpilot train {preset} and measure it with rlpilot compare --run RUN"
        )


def _cmd_sweep(args: argparse.Namespace) -> int:
    from rlpilot.registry import preset_text

    preset_text(args.preset)  # an unknown preset: one line with close matches
    _not_adapt(args.preset, "sweep")
    check_seed_range("--seed-start", args.seed_start, "--seeds", args.seeds)
    from rlpilot.sweep import run_sweep

    out = args.out or f"runs/sweep-{args.preset}"
    result = run_sweep(
        args.preset,
        seeds=args.seeds,
        grid=args.grid,
        out=out,
        workers=args.workers,
        overrides=args.set,
        seed_start=args.seed_start,
    )
    print(result["table"])
    print(f"table: {out}/summary.md   figure: {out}/curves.png")
    return 0


def _cmd_bench(args: argparse.Namespace) -> int:
    from rlpilot.sweep import run_bench

    check_seed_range("--seed-start", args.seed_start, "--seeds", args.seeds)

    presets = None
    if args.presets:
        from rlpilot.config.load import preset_names

        presets = [name.strip() for name in args.presets.split(",") if name.strip()]
        unknown = [name for name in presets if name not in preset_names()]
        if unknown:
            raise UserError(f"--presets: unknown preset(s) {', '.join(unknown)} (see rlpilot presets)")
    print(
        run_bench(
            seeds=args.seeds,
            out=args.out,
            workers=args.workers,
            results=args.results or None,
            ray=args.ray,
            presets=presets,
            seed_start=args.seed_start,
            overrides=args.overrides,
        )
    )
    return 0


def _cmd_tune(args: argparse.Namespace) -> int:
    if args.controller:
        return _tune_controller(args)
    from rlpilot.registry import preset_text

    preset_text(args.preset)  # an unknown preset: one line with close matches
    _not_adapt(args.preset, "tune")
    check_seed_range("--seed-start", args.seed_start, "--seeds-per-trial", args.seeds_per_trial)
    check_seed_range("--check-seed-start", args.check_seed_start, "--check-seeds", args.check_seeds)
    try:
        import optuna  # noqa: F401
    except ImportError:
        raise UserError("rlpilot tune needs Optuna: pip install 'rlpilot[tune]'") from None
    from pathlib import Path

    from rlpilot.config.load import load_config
    from rlpilot.tune import TuneSpec, parse_space, tune

    load_config(args.preset, overrides=args.set)  # the starting configuration must be valid
    spec = TuneSpec(
        preset=args.preset,
        space=parse_space(args.preset, args.param, args.space, args.set),
        overrides=list(args.set),
        seeds_per_trial=args.seeds_per_trial,
        seed_start=args.seed_start,
        objective=args.objective or _default_objective(args.preset, args.set),
        aggregate=args.aggregate,
        pruner=args.pruner,
    )
    out = Path(args.out or f"runs/tune-{args.preset}")
    result = tune(
        spec,
        trials=args.trials,
        out=out,
        storage=args.storage,
        study_name=args.study,
        workers=args.workers,
        ray=args.ray,
        check_seeds=args.check_seeds,
        check_seed_start=args.check_seed_start,
        mlflow_uri=args.mlflow,
    )
    print(result["text"].rstrip())
    print(f"\ntable: {out}/summary.md   figure: {out}/history.png")
    return 0


def _default_objective(preset: str, overrides: list[str]) -> str:
    """frames to solved when the preset has a threshold, else the final greedy return."""
    from rlpilot.config.load import load_config

    return "return" if _preset_threshold(load_config(preset, overrides=overrides)) is None else "frames"


def _cmd_eval(args: argparse.Namespace) -> int:
    from rlpilot.play.command import evaluate

    return evaluate(args)


def _tune_controller(args: argparse.Namespace) -> int:
    """``rlpilot tune ENV --controller package.module:Class --param kp=...``: classical tuning of its gains."""
    check_seed_range("--seed-start", args.seed_start, "--episodes", args.episodes)  # episode i plays seed + i
    check_seed_range("--check-seed-start", args.check_seed_start, "--check-episodes", args.check_episodes)
    try:
        import optuna  # noqa: F401
    except ImportError:
        raise UserError("rlpilot tune needs Optuna: pip install 'rlpilot[tune]'") from None
    from rlpilot.check import env_config
    from rlpilot.registry import resolve_env

    env_cfg = env_config(args.preset, args.set)
    resolve_env(env_cfg.id)
    import_torchrl()
    from rlpilot.tune import controller_space, tune_controller

    result = tune_controller(
        env_cfg,
        args.controller,
        controller_space(args.param),
        fixed=controller_kwargs(args) or {},
        trials=args.trials,
        episodes=args.episodes,
        seed_start=args.seed_start,
        check_episodes=args.check_episodes,
        check_seed_start=args.check_seed_start,
        out=args.out or f"runs/tune-{file_name(args.controller)}",
        storage=args.storage,
    )
    print(result["text"])
    return 0


def _cmd_export(args: argparse.Namespace) -> int:
    require_trust(args.run, trusted=args.trust_code, verb="export")
    from rlpilot.play.export import export_run
    from rlpilot.play.write import ExportFailed

    try:
        result = export_run(
            args.run, args.format, args.out, seed=args.seed, checkpoint=args.checkpoint, force=args.force
        )
    except ExportFailed as exc:
        print(f"rlpilot: export failed: {redact(str(exc))}", file=sys.stderr)
        return 1
    print(
        f"parity: {result.observations} observations from real rollouts, "
        f"max |exported - live| = {result.max_abs_diff:.3g}"
    )
    print(f"policy:    {result.artifact}")
    print(f"signature: {result.signature}")
    return 0


def _cmd_plot(args: argparse.Namespace) -> int:
    from pathlib import Path

    from rlpilot.plot import plot_runs
    from rlpilot.runs import load_run

    runs = [load_run(path) for path in args.runs]  # read only: nothing named in a run's config is imported
    if args.out:
        out = Path(args.out)
    else:
        from rlpilot.common.files import own_file

        out = own_file(runs[0].curve_path) if len(runs) == 1 else Path("curves.png")
    if out.suffix.lower() not in (".png", ".svg"):
        raise UserError(f"--out {out}: choose a .png or .svg file")
    if out.is_dir():
        raise UserError(f"--out {out} is a folder: give a file name ending in .png or .svg")
    data = plot_runs(runs, out, x=args.x, solved_at=runs[0].meta().get("solved_at"))
    points = len(data["train_x"]) if data["kind"] == "single" else data["n"]
    print(f"{out} ({'points' if data['kind'] == 'single' else 'runs'}: {points})")
    return 0


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [""])[0][:MAX_ERROR_CHARS]


def _cmd_compare(args: argparse.Namespace) -> int:
    from rlpilot.compare.command import run

    return run(args, args.argv)


COMMANDS = {
    "presets": _cmd_presets,
    "check": _cmd_check,
    "train": _cmd_train,
    "eval": _cmd_eval,
    "export": _cmd_export,
    "sweep": _cmd_sweep,
    "tune": _cmd_tune,
    "compare": _cmd_compare,
    "bench": _cmd_bench,
    "doctor": _cmd_doctor,
    "plot": _cmd_plot,
}
"""Each verb of :func:`rlpilot.arguments.build_parser` -> what runs it."""


def main(argv: list[str] | None = None) -> int:
    # SIGINT and SIGTERM stop any verb in one line from here on (exit 130/143), also while it imports and builds;
    # the trainer's own handlers take over around its loop (a checkpoint first)
    stopping.clear()
    try:
        with stopping.stop_on_signals(immediate=True):
            return _main(argv)
    except KeyboardInterrupt as exc:  # Ctrl-C, or a signal at any moment of start-up (common.stopping.Interrupted):
        # caught here, not in _main, so that one landing while the arguments are parsed is one line too
        name = getattr(exc, "signal", "SIGINT")
        print(f"rlpilot: interrupted ({name})", file=sys.stderr)
        return 143 if name == "SIGTERM" else 130


def _main(argv: list[str] | None) -> int:
    try:
        args = build_parser().parse_args(argv)
        args.argv = list(sys.argv[1:] if argv is None else argv)  # what was asked, for a verb that stamps it
    except SystemExit as exc:  # --help (0), or an argument error already said in one line (2)
        return exc.code if isinstance(exc.code, int) else EXIT_BAD_INPUT
    if hasattr(signal, "SIGXFSZ") and threading.current_thread() is threading.main_thread():
        # past a file-size limit (ulimit -f) a write fails with EFBIG (one line) instead of killing the process
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    # TorchRL logs INFO lines (buffer allocation, spec checks) that would interleave our output
    os.environ.setdefault("RL_LOGGING_LEVEL", "DEBUG" if args.debug else "WARNING")
    try:
        return COMMANDS[args.verb](args)
    except UserError as exc:
        if args.debug:
            raise
        print(f"rlpilot: error: {one_line(str(exc))}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except BrokenPipeError:  # `rlpilot eval RUN | head -1`: the reader left; not an error of ours
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit's flush
        return 0
    except OSError as exc:  # a file of ours could not be read or written: read-only, disk full, a size limit
        if args.debug:
            raise
        print(f"rlpilot: error: {one_line(os_error_line(exc))}", file=sys.stderr)
        return EXIT_BAD_INPUT


def entry() -> NoReturn:
    """The ``rlpilot`` command: :func:`main`, then a quick exit once torch is loaded.

    Python's teardown after a torch + TorchRL command frees thousands of modules and their C objects:
    0.5-1.5 s on this project's 2-core machine, a third of a fast ``train``'s whole process, spent after
    the last line is printed. Nothing of ours needs it: run files are written atomically and closed before
    ``main`` returns. So the exit handlers run (logging, multiprocessing children, tqdm, Ray), the streams
    are flushed, and the process leaves without the teardown. If a non-daemon thread is still alive (a
    user's env may start one), the normal exit waits for it instead."""
    code = main()
    if "torch" in sys.modules and not any(
        t.is_alive() and not t.daemon for t in threading.enumerate() if t is not threading.main_thread()
    ):
        atexit._run_exitfuncs()
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):  # a closed pipe or stream: nothing more can be written to it
                pass
        os._exit(code)
    sys.exit(code)


if __name__ == "__main__":
    entry()
