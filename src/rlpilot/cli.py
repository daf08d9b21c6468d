"""The ``rlpilot`` command: verbs -> library calls; known errors -> one line and exit code 2.

Only argparse, the config module and the registry (no torch) are imported at start, so ``--help``,
``presets``, unknown names and argument errors answer in well under a second; each verb imports what
it needs.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import errno
import os
import signal
import sys
import threading
from typing import NoReturn

from rlpilot import stopping
from rlpilot.errors import UserError
from rlpilot.play.trust import allow_code, require_trust
from rlpilot.redact import redact
from rlpilot.torchrl_import import import_torchrl  # TorchRL without the Ray and MuJoCo it loads for nothing

EXIT_BAD_INPUT = 2
DESCRIPTION = (
    "From a gymnasium environment to a trained, checked, diagnosed and exported policy, on TorchRL: "
    "check an env, train a preset or ALGO ENV, evaluate, plot, diagnose (doctor), export, sweep seeds."
)


def _cmd_presets(args: argparse.Namespace) -> int:
    from rlpilot.config.load import load_config, preset_names

    rows = []
    for name in preset_names():
        config = load_config(name)
        threshold = _preset_threshold(config)
        solved = "-" if threshold is None else f"{threshold:g}"
        rows.append((name, config.algo, config.subject, f"{config.train.total_frames:,}", solved))
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
    if args.episodes is not None and args.episodes <= 0:
        raise UserError(f"--episodes {args.episodes}: give a positive number of random-policy episodes")
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
    if args.episodes is not None and args.episodes <= 0:
        raise UserError(f"--episodes {args.episodes}: give a positive number of episodes")
    from rlpilot.check.group import check_group_env

    with _env_failures(env_cfg.id):
        report = check_group_env(env_cfg, episodes=args.episodes, seed=args.seed)
    print(report.render())
    return 0 if report.healthy else 1


def _train_config(args: argparse.Namespace):
    from rlpilot.config.load import load_config
    from rlpilot.registry import ALGORITHMS, is_config_file

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
        return config
    if args.target in ALGORITHMS and ALGORITHMS[args.target].kind == "llm":
        raise UserError(
            f"{args.target} fine-tunes a language model, not an env: start from a preset: rlpilot train grpo-reverse"
        )
    if args.env is not None:
        if args.target not in ALGORITHMS:
            raise UserError(
                f"'{args.target} {args.env}': the first word must be an algorithm ({', '.join(ALGORITHMS)})"
            )
        return load_config(algo=args.target, env_id=args.env, overrides=overrides)
    if args.target in ALGORITHMS:
        raise UserError(f"'rlpilot train {args.target}' needs an env too, e.g. rlpilot train {args.target} CartPole-v1")
    return load_config(args.target, overrides=overrides)


def _cmd_train(args: argparse.Namespace) -> int:
    config = None
    if args.resume:
        if args.target or args.seed is not None or args.device or args.run_dir or args.config:
            raise UserError(
                "--resume RUN continues a run with its own config: no preset, ALGO ENV, --config, --seed, --device "
                "or --run-dir with it; --frames N, --set train.* (budget, stop rule, intervals) and --ray may change"
            )
    else:
        if not args.target and not args.config:
            raise UserError("rlpilot train needs a preset (rlpilot presets), ALGO ENV, --config FILE or --resume RUN")
        config = _train_config(args)
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
    from rlpilot.doctor import diagnose
    from rlpilot.files import dumps

    diagnosis = diagnose(args.run)
    print(dumps(diagnosis.to_json(), indent=2) if args.json else diagnosis.render())
    return 1 if diagnosis.errors else 0


def _cmd_sweep(args: argparse.Namespace) -> int:
    from rlpilot.registry import preset_text

    preset_text(args.preset)  # an unknown preset: one line with close matches
    if args.seeds <= 0 or args.workers <= 0:
        raise UserError(f"--seeds and --workers must be positive (got {args.seeds} and {args.workers})")
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
    for flag in ("trials", "seeds_per_trial", "workers"):
        if getattr(args, flag) <= 0:
            raise UserError(f"--{flag.replace('_', '-')} must be positive (got {getattr(args, flag)})")
    if args.check_seeds < 0:
        raise UserError(f"--check-seeds must be 0 (no check) or more (got {args.check_seeds})")
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
        space=parse_space(args.preset, args.param, args.space),
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
    from rlpilot.play.llm import is_llm_run

    if is_llm_run(args.target):  # greedy answers to the held-out prompts, not episodes
        from rlpilot.play.llm import eval_llm_run

        print(eval_llm_run(args.target, checkpoint=args.checkpoint, csv_path=args.csv))
        return 0
    if args.episodes <= 0:
        raise UserError(f"--episodes {args.episodes}: give a positive number of episodes")
    if not 0 < args.step_limit <= 86_400:
        raise UserError(f"--step-limit {args.step_limit}: give seconds within (0, 86400]")
    require_trust(args.target, trusted=args.trust_code, verb="eval")
    allow_code(args.trust_code)
    import_torchrl()  # before rlpilot.play.group, which imports TorchRL
    from rlpilot.play.group import is_group_target

    if is_group_target(args.target):
        return _eval_group(args)
    from rlpilot.play.episodes import evaluate_target

    result, csv_path, video = evaluate_target(
        args.target,
        episodes=args.episodes,
        seed=args.seed,
        csv_path=args.csv,
        video=args.video,
        checkpoint=args.checkpoint,
        backend=args.backend,
        controller=args.controller,
        controller_kwargs=_controller_kwargs(args),
        step_limit_s=args.step_limit,
    )
    _print_episodes(args, "mean", result.returns, list(result.per_episode().items()), {})
    return _print_files(csv_path, video)


def _tune_controller(args: argparse.Namespace) -> int:
    """``rlpilot tune ENV --controller package.module:Class --param kp=...``: classical tuning of its gains."""
    for flag in ("trials", "episodes"):
        if getattr(args, flag) <= 0:
            raise UserError(f"--{flag} must be positive (got {getattr(args, flag)})")
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
        fixed=_controller_kwargs(args) or {},
        trials=args.trials,
        episodes=args.episodes,
        seed_start=args.seed_start,
        check_episodes=args.check_episodes,
        check_seed_start=args.check_seed_start,
        out=args.out or f"runs/tune-{args.controller.replace(':', '-')}",
        storage=args.storage,
    )
    print(result["text"])
    return 0


def _controller_kwargs(args: argparse.Namespace) -> dict | None:
    """``--controller-kwargs`` as a mapping (parsed within the YAML bounds); None when not given."""
    if args.controller_kwargs is None:
        return None
    if args.controller is None:
        raise UserError("--controller-kwargs builds the controller named by --controller: add --controller NAME")
    import yaml

    from rlpilot.config import field_problems
    from rlpilot.config.safe_yaml import load

    try:
        kwargs = load(args.controller_kwargs, source="--controller-kwargs")
    except yaml.YAMLError as exc:
        raise UserError(f"--controller-kwargs is not YAML ({str(exc).splitlines()[0]})") from None
    if not isinstance(kwargs, dict):
        raise UserError(f"--controller-kwargs: a YAML mapping such as '{{kp: 2.0}}' (got {args.controller_kwargs!r})")
    if problems := field_problems("--controller-kwargs", kwargs, {"finite_items": True}):
        raise UserError(problems[0])  # NaN or inf: every action would be NaN
    return kwargs


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


def _eval_group(args: argparse.Namespace) -> int:
    """A multi-agent run, group artifact or env id: the group's mean return and each agent's."""
    if args.backend is not None:
        raise UserError("--backend: a multi-agent run is evaluated on its own env (env.backend in its config)")
    from rlpilot.play.group import evaluate_group

    per_agent, task, csv_path, video = evaluate_group(
        args.target,
        episodes=args.episodes,
        seed=args.seed,
        csv_path=args.csv,
        video=args.video,
        checkpoint=args.checkpoint,
        controller_name=args.controller,
        step_limit_s=args.step_limit,
    )
    columns = [(f"agent {i}", values) for i, values in enumerate(per_agent.T)]
    _print_episodes(args, "mean return (over agents)", per_agent.mean(1), columns, task)
    return _print_files(csv_path, video)


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
        from rlpilot.files import own_file

        out = own_file(runs[0].curve_path) if len(runs) == 1 else Path("curves.png")
    if out.suffix.lower() not in (".png", ".svg"):
        raise UserError(f"--out {out}: choose a .png or .svg file")
    if out.is_dir():
        raise UserError(f"--out {out} is a folder: give a file name ending in .png or .svg")
    data = plot_runs(runs, out, x=args.x, solved_at=runs[0].meta().get("solved_at"))
    points = len(data["train_x"]) if data["kind"] == "single" else data["n"]
    print(f"{out} ({'points' if data['kind'] == 'single' else 'runs'}: {points})")
    return 0


MAX_ERROR_CHARS = 300


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [""])[0][:MAX_ERROR_CHARS]


def _one_line(message: str) -> str:
    """An error is one readable line even when it quotes input with line breaks (shown escaped), a huge
    value (cut to ``MAX_ERROR_CHARS``: its start and its end, which says how to fix it) or a URL with a
    password (hidden)."""
    if len(message) > 50 * MAX_ERROR_CHARS:  # a multi-megabyte message: no need to scan all of it
        message = message[: 50 * MAX_ERROR_CHARS]
    line = redact("\\n".join(message.strip().splitlines()))  # every line boundary str.splitlines knows
    if len(line) <= MAX_ERROR_CHARS:
        return line
    tail = MAX_ERROR_CHARS // 3  # the end usually says how to fix it: kept
    return line[: MAX_ERROR_CHARS - tail - 5] + " ... " + line[-tail:]


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (what is wrong, where to look) and exit code 2."""

    def error(self, message: str) -> None:
        print(f"rlpilot: error: {_one_line(message)} (see {self.prog} --help)", file=sys.stderr)
        sys.exit(EXIT_BAD_INPUT)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="rlpilot", description=DESCRIPTION)
    parser.add_argument("--debug", action="store_true", help="show full tracebacks on errors")
    verbs = parser.add_subparsers(dest="verb", required=True, metavar="VERB")

    p = verbs.add_parser("presets", help="list presets: algorithm, env, budget, solved threshold")
    p.set_defaults(func=_cmd_presets)

    p = verbs.add_parser("check", help="preflight of an environment: specs, rollout statistics, pitfalls")
    p.add_argument("target", metavar="ENV|PRESET", help="gymnasium id, package.module:Class, or a preset name")
    p.add_argument(
        "--episodes", type=int, help="random-policy episodes (default: 20, fewer if they would take over --max-seconds)"
    )
    p.add_argument(
        "--max-seconds",
        type=float,
        default=30.0,
        help="time for the random-policy episodes when --episodes is not given (default 30)",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="config override (env.*)")
    p.add_argument("--frame", metavar="PNG", help="image observations: where to write the sample frame")
    p.set_defaults(func=_cmd_check)

    p = verbs.add_parser("train", help="train a preset, or an algorithm on any env")
    p.add_argument("target", nargs="?", metavar="PRESET|ALGO", help="a preset (rlpilot presets) or an algorithm name")
    p.add_argument("env", nargs="?", metavar="ENV", help="env id when the first argument is an algorithm")
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="config override, e.g. --set ppo.lr=1e-3 (repeatable)",
    )
    p.add_argument("--seed", type=int, help="shortcut for --set train.seed=N")
    p.add_argument("--device", choices=["auto", "cpu", "cuda"], help="shortcut for --set train.device=...")
    p.add_argument("--frames", type=int, help="shortcut for --set train.total_frames=N")
    p.add_argument("--config", metavar="FILE", help="train a config file (YAML, as a run's config.yaml)")
    p.add_argument("--runs", default="runs", help="folder for new run directories (default runs/)")
    p.add_argument("--run-dir", help="exact run directory to create")
    p.add_argument(
        "--resume",
        metavar="RUN",
        help="continue RUN from its last checkpoint (same config and curve; from frame 0 if killed before its first); "
        "--frames and --set train.* may change its budget, stop rule and intervals",
    )
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    p.add_argument(
        "--trust-code",
        action="store_true",
        help="with --resume: the run's env names a Python module (module:Class) and you trust the run: import it",
    )
    p.add_argument("-v", "--verbose", action="store_true", help="a status line every train.milestone_every_frames")
    p.add_argument(
        "--ray",
        metavar="ADDRESS",
        help="collect on collect.workers Ray actors: a cluster address (host:port) or 'local' (docs/distributed.md)",
    )
    p.set_defaults(func=_cmd_train)

    p = verbs.add_parser("eval", help="greedy episodes of a trained run, an exported policy or a baseline controller")
    p.add_argument(
        "target",
        metavar="RUN|ARTIFACT|ENV",
        help="run directory, a file written by rlpilot export, or (with --controller) an env id",
    )
    p.add_argument(
        "--controller",
        metavar="NAME",
        help="play a controller instead of the policy, on the run's env or ENV: your own package.module:Class "
        "(rlpilot.controllers.Controller; docs/your-controller.md), the arm's pd (IK + PD), pid (with an "
        "anti-windup integral; on Reacher-v5 the same PD) or adaptive-pd (the tracking arm's PD retuned online "
        "from an identification of the arm), random; multi-agent simple_spread: heuristic "
        "(each agent to its landmark in the least-distance assignment), random",
    )
    p.add_argument(
        "--controller-kwargs",
        metavar="YAML",
        help="what --controller is built with, as a YAML mapping ('{kp: 2.0, ki: 0.5}'); default: none, or a run's "
        "env.base_controller_kwargs for its own base controller",
    )
    p.add_argument("--episodes", type=int, default=20)
    p.add_argument("--seed", type=int, default=12345, help="episode i uses seed + i")
    p.add_argument(
        "--csv",
        help="per-episode rows (default RUN/eval.csv, ARTIFACT.eval.csv or RUN/eval-CONTROLLER.csv; a controller "
        "on an env id writes rows only here)",
    )
    p.add_argument("--video", help="record one greedy episode to FILE (.gif, or .mp4 with the [video] extra)")
    p.add_argument("--checkpoint", default="last", help="last (default) or best (the best greedy evaluation)")
    p.add_argument(
        "--backend", help="env backend for these episodes (default: the run's env.backend): auto, numpy, sync, native"
    )
    p.add_argument(
        "--step-limit",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="an artifact's step that runs longer is stopped, in one line (default 10: a policy's step takes ms)",
    )
    p.add_argument(
        "--trust-code",
        action="store_true",
        help="you trust this run or artifact: import the Python module its env names (module:Class), load TorchScript",
    )
    p.set_defaults(func=_cmd_eval)

    p = verbs.add_parser("export", help="export the greedy policy (onnx, pt2, torchscript), parity-checked")
    p.add_argument("run", help="run directory")
    p.add_argument("--format", default="onnx", help="onnx (default), pt2 or torchscript")
    p.add_argument("--out", help="output folder (default RUN/export)")
    p.add_argument("--seed", type=int, default=0, help="seed of the parity rollouts")
    p.add_argument("--checkpoint", default="last", help="last (default) or best (the best greedy evaluation)")
    p.add_argument(
        "--trust-code",
        action="store_true",
        help="you trust this run: import the Python module its env names (module:Class)",
    )
    p.add_argument("--force", action="store_true", help="replace another run's export in --out")
    p.set_defaults(func=_cmd_export)

    p = verbs.add_parser("sweep", help="a preset over a grid x seeds, several runs at once; a results table")
    p.add_argument("preset")
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--grid", action="append", default=[], metavar="KEY=V1,V2", help="repeatable")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override for every run")
    p.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="runs at once (default: cores)")
    p.add_argument("--out", help="sweep folder (default runs/sweep-PRESET); rerun to resume")
    p.add_argument("--ray", metavar="ADDRESS", help="run on a Ray cluster (host:port), or 'local' to start one here")
    p.add_argument("--seed-start", type=int, default=0, help="seeds SEED_START .. SEED_START+SEEDS-1 (default 0)")
    p.set_defaults(func=_cmd_sweep)

    p = verbs.add_parser(
        "tune", help="hyperparameter search on Optuna: K seeds a trial, resumable, checked on fresh seeds"
    )
    p.add_argument(
        "preset",
        metavar="PRESET|ENV",
        help="a preset; with --controller, the env (--set env.kwargs=... for its dynamics)",
    )
    p.add_argument("--trials", type=int, default=20, help="trials to complete or prune, all workers together")
    p.add_argument("--seeds-per-trial", type=int, default=3, help="seeds each configuration trains on (default 3)")
    p.add_argument("--param", action="append", default=[], metavar="KEY=LOW:HIGH[:log]|KEY=A,B,C", help="repeatable")
    p.add_argument("--space", metavar="FILE", help="YAML: key: low:high[:log] | [a, b] | {low, high, log}")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="the starting configuration")
    p.add_argument(
        "--objective",
        choices=["frames", "time", "return"],
        help="frames (default when the preset has a threshold) or wall s to solved, or final greedy return",
    )
    p.add_argument("--aggregate", choices=["iqm", "median", "mean"], default="iqm", help="over a trial's seeds")
    p.add_argument("--pruner", choices=["percentile", "none"], default="percentile")
    p.add_argument("--seed-start", type=int, default=0, help="tuning seeds: SEED_START .. SEED_START+K-1")
    p.add_argument("--check-seeds", type=int, default=5, help="fresh seeds for the closing check (0: none)")
    p.add_argument("--check-seed-start", type=int, default=1000)
    p.add_argument("--out", help="study folder (default runs/tune-PRESET); the same command again continues it")
    p.add_argument("--storage", help="Optuna storage URL (default sqlite:///OUT/study.db; postgresql://... to share)")
    p.add_argument("--study", help="study name in the storage (default rlpilot-PRESET)")
    p.add_argument("--workers", type=int, default=1, help="processes working on the study (default 1)")
    p.add_argument("--ray", metavar="ADDRESS", help="workers as Ray tasks on a cluster (host:port), or 'local'")
    p.add_argument("--mlflow", metavar="URI", help="log each trial as an MLflow run (e.g. sqlite:///mlflow.db)")
    p.add_argument(
        "--controller",
        metavar="package.module:Class",
        help="tune this controller's constructor arguments (--param kp=0.1:100:log) on ENV (the positional "
        "argument) instead of a preset's hyperparameters; each trial plays --episodes episodes",
    )
    p.add_argument("--controller-kwargs", metavar="YAML", help="with --controller: the arguments not searched")
    p.add_argument("--episodes", type=int, default=32, help="with --controller: tuning episodes a trial plays")
    p.add_argument(
        "--check-episodes", type=int, default=100, help="with --controller: fresh episodes of the closing check"
    )
    p.set_defaults(func=_cmd_tune)

    p = verbs.add_parser("bench", help="every preset over seeds; a results table (also into docs/results.md)")
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    p.add_argument("--out", default="runs/bench-presets", help="folder of the sweeps (rerun to resume)")
    p.add_argument("--results", default="docs/results.md", help="markdown file to update ('' to skip)")
    p.add_argument("--presets", help="comma-separated presets (default: control presets of at most 500k frames)")
    p.add_argument(
        "--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE", help="override for every run"
    )
    p.add_argument("--ray", metavar="ADDRESS", help="run on a Ray cluster, or 'local'")
    p.add_argument(
        "--seed-start", type=int, default=100, help="seeds SEED_START.. (default 100: no preset was tuned on them)"
    )
    p.set_defaults(func=_cmd_bench)

    p = verbs.add_parser("doctor", help="diagnose a run: findings with evidence, cause and a fix")
    p.add_argument("run", help="run directory")
    p.add_argument("--json", action="store_true", help="machine-readable output (schema in docs/doctor.md)")
    p.set_defaults(func=_cmd_doctor)

    p = verbs.add_parser("plot", help="training curves: one run, or several (seeds) as a mean with a 95%% band")
    p.add_argument("runs", nargs="+", metavar="RUN", help="run directories")
    p.add_argument("--out", help="output image (.png or .svg); default RUN/curve.png, or curves.png for several")
    p.add_argument("--x", choices=["frames", "time"], default="frames", help="x axis: frames or wall time")
    p.set_defaults(func=_cmd_plot)
    return parser


def main(argv: list[str] | None = None) -> int:
    # SIGINT and SIGTERM stop any verb in one line from here on (exit 130/143), also while it imports and builds;
    # the trainer's own handlers take over around its loop (a checkpoint first)
    stopping.clear()
    with stopping.stop_on_signals(immediate=True):
        return _main(argv)


def _main(argv: list[str] | None) -> int:
    args = build_parser().parse_args(argv)
    if hasattr(signal, "SIGXFSZ") and threading.current_thread() is threading.main_thread():
        # past a file-size limit (ulimit -f) a write fails with EFBIG (one line) instead of killing the process
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    # TorchRL logs INFO lines (buffer allocation, spec checks) that would interleave our output
    os.environ.setdefault("RL_LOGGING_LEVEL", "DEBUG" if args.debug else "WARNING")
    try:
        return args.func(args)
    except UserError as exc:
        if args.debug:
            raise
        print(f"rlpilot: error: {_one_line(str(exc))}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt as exc:  # Ctrl-C, or a signal during a run's start-up (rlpilot.stopping.Interrupted)
        name = getattr(exc, "signal", "SIGINT")
        print(f"rlpilot: interrupted ({name})", file=sys.stderr)
        return 143 if name == "SIGTERM" else 130
    except BrokenPipeError:  # `rlpilot eval RUN | head -1`: the reader left; not an error of ours
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit's flush
        return 0
    except OSError as exc:  # a file of ours could not be read or written: read-only, disk full, a size limit
        if args.debug:
            raise
        print(f"rlpilot: error: {_one_line(_os_error(exc))}", file=sys.stderr)
        return EXIT_BAD_INPUT


_OS_ADVICE = {
    errno.ENOSPC: "free disk space",
    errno.EDQUOT: "free space in your quota",
    errno.EFBIG: "lift the file-size limit (ulimit -f)",
    errno.EROFS: "choose a writable folder (or copy the run to one)",
    errno.EACCES: "make it writable, or choose another folder",
    errno.EPERM: "make it writable, or choose another folder",
    errno.EISDIR: "a folder is where a file belongs: move it away",
    errno.ENOTDIR: "a file is where a folder belongs: move it away",
    errno.EEXIST: "a file is where a folder belongs: move it away",
}


def _os_error(exc: OSError) -> str:
    """An OSError as what the user can act on: the file, what the system said, what to do."""
    where = f" {exc.filename}" if exc.filename else ""
    what = exc.strerror or str(exc) or type(exc).__name__
    advice = _OS_ADVICE.get(exc.errno, "check the path and its permissions")
    return f"cannot read or write{where}: {what}; {advice}, then run the command again"


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
