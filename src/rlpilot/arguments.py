"""The command line's arguments: every verb's parser, and the one number type its numeric arguments share.

A number on the command line is read once, by :class:`Number`, declared with its argument: a whole number (``1e6``
is read as 1,000,000) or a decimal, finite, within its range; anything else (``-5`` as a seed, ``inf`` or ``nan`` as
seconds, ``100000000`` seeds) is one line and exit 2 from argparse before any verb runs. Seeds are within what
training accepts (``train.seed``: numpy's seeding); counts that start runs, play episodes or start processes within
:mod:`rlpilot.common.bounds`. Imports no torch: ``--help`` and argument errors answer at once.
"""

from __future__ import annotations

import argparse
import math
import os
import sys

from rlpilot.common.bounds import MAX_EPISODES, MAX_RUNS, MAX_WORKERS
from rlpilot.common.errors import UserError
from rlpilot.common.redact import redact
from rlpilot.config.sections import MAX_SEED

EXIT_BAD_INPUT = 2
DESCRIPTION = (
    "From a gymnasium environment to a trained, checked, diagnosed and exported policy, on TorchRL: "
    "check an env, train a preset or ALGO ENV, evaluate, plot, diagnose (doctor), export, sweep seeds."
)


class Number:
    """An argparse ``type``: ``kind`` (int or float) within ``[low, high]`` (``high`` None: no upper bound), finite;
    ``above``: ``low`` itself excluded (seconds > 0)."""

    def __init__(self, kind: type, low: float, high: float | None = None, *, above: bool = False):
        self.kind, self.low, self.high, self.above = kind, low, high, above

    def __call__(self, text: str) -> int | float:
        value = self._parse(text.strip())
        if value is None or not self._within(value):
            raise argparse.ArgumentTypeError(f"'{text}' is not {self.describe()}")
        return value

    def _parse(self, text: str) -> int | float | None:
        try:
            return self.kind(text)  # int("12"), float("0.5")
        except ValueError:
            pass
        try:
            value = float(text)  # a whole number written as 1e6
        except ValueError:
            return None
        if self.kind is int and math.isfinite(value) and value.is_integer():
            return int(value)
        return None

    def _within(self, value: int | float) -> bool:
        if not math.isfinite(value) or value < self.low or (self.above and value == self.low):
            return False
        return self.high is None or value <= self.high

    def describe(self) -> str:
        what = "a whole number" if self.kind is int else "a finite number"
        if self.high is None:
            return f"{what} {'>' if self.above else '>='} {self.low:,}"
        return f"{what} within {'(' if self.above else '['}{self.low:,}, {self.high:,}]"


SEED = Number(int, 0, MAX_SEED)
FRAMES = Number(int, 1)
RUNS = Number(int, 1, MAX_RUNS)
RUNS_OR_NONE = Number(int, 0, MAX_RUNS)
EPISODES = Number(int, 1, MAX_EPISODES)
EPISODES_OR_NONE = Number(int, 0, MAX_EPISODES)
WORKERS = Number(int, 1, MAX_WORKERS)
SECONDS = Number(float, 0, 7 * 24 * 3600, above=True)
STEP_SECONDS = Number(float, 0, 86_400, above=True)
CORES = min(os.cpu_count() or 1, MAX_WORKERS)


def check_seed_range(start_flag: str, start: int, count_flag: str, count: int) -> None:
    """Seeds ``start`` .. ``start + count - 1`` (a sweep's, a study's, its check's) must all be seeds training takes."""
    if start + count - 1 > MAX_SEED:
        from rlpilot.common.errors import UserError

        raise UserError(
            f"{start_flag} {start} and {count_flag} {count} reach seed {start + count - 1}, past the largest seed "
            f"{MAX_SEED}: lower {start_flag}"
        )


MAX_ERROR_CHARS = 300


def one_line(message: str) -> str:
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


class Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (what is wrong, where to look) and exit code 2."""

    def error(self, message: str) -> None:
        print(f"rlpilot: error: {one_line(message)} (see {self.prog} --help)", file=sys.stderr)
        sys.exit(EXIT_BAD_INPUT)


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="rlpilot", description=DESCRIPTION)
    parser.add_argument("--debug", action="store_true", help="show full tracebacks on errors")
    verbs = parser.add_subparsers(dest="verb", required=True, metavar="VERB")

    p = verbs.add_parser("presets", help="list presets: algorithm, env, budget, solved threshold")

    p = verbs.add_parser("check", help="preflight of an environment: specs, rollout statistics, pitfalls")
    p.add_argument("target", metavar="ENV|PRESET", help="gymnasium id, package.module:Class, or a preset name")
    p.add_argument(
        "--episodes",
        type=EPISODES,
        help="random-policy episodes (default: 20, fewer if they would take over --max-seconds)",
    )
    p.add_argument(
        "--max-seconds",
        type=SECONDS,
        default=30.0,
        help="time for the random-policy episodes when --episodes is not given (default 30)",
    )
    p.add_argument("--seed", type=SEED, default=0)
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="config override (env.*)")
    p.add_argument("--frame", metavar="PNG", help="image observations: where to write the sample frame")

    p = verbs.add_parser("train", help="train a preset, or an algorithm on any env")
    p.add_argument(
        "target",
        nargs="?",
        metavar="PRESET|ALGO|adapt",
        help="a preset (rlpilot presets), an algorithm name, or adapt (learned adaptation of --controller)",
    )
    p.add_argument("env", nargs="?", metavar="ENV", help="env id when the first argument is an algorithm or adapt")
    p.add_argument("--controller", metavar="NAME", help="train adapt: your controller, package.module:Class")
    p.add_argument("--controller-kwargs", metavar="YAML", help="train adapt: its arguments that are not searched")
    p.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="KEY=LOW:HIGH[:log]",
        help="train adapt: a constructor argument the references search, and its range (repeatable)",
    )
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="config override, e.g. --set ppo.lr=1e-3 (repeatable)",
    )
    p.add_argument("--seed", type=SEED, help="shortcut for --set train.seed=N")
    p.add_argument("--device", choices=["auto", "cpu", "cuda"], help="shortcut for --set train.device=...")
    p.add_argument("--frames", type=FRAMES, help="shortcut for --set train.total_frames=N")
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
    p.add_argument("--episodes", type=EPISODES, default=20)
    p.add_argument("--seed", type=SEED, default=12345, help="episode i uses seed + i")
    p.add_argument(
        "--condition",
        action="append",
        metavar="NAME|KEY=VALUE",
        help="play every episode under this condition of the plant: a condition the env names (nominal, heavy) or "
        "a value of a parameter it declares (load=3); repeatable, later ones over earlier ones (docs/conditions.md)",
    )
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
        type=STEP_SECONDS,
        default=10.0,
        metavar="SECONDS",
        help="an artifact's step that runs longer is stopped, in one line (default 10: a policy's step takes ms)",
    )
    p.add_argument(
        "--trust-code",
        action="store_true",
        help="you trust this run or artifact: import the Python module its env names (module:Class), load TorchScript",
    )

    p = verbs.add_parser("export", help="export the greedy policy (onnx, pt2, torchscript), parity-checked")
    p.add_argument("run", help="run directory")
    p.add_argument("--format", default="onnx", help="onnx (default), pt2 or torchscript")
    p.add_argument("--out", help="output folder (default RUN/export)")
    p.add_argument("--seed", type=SEED, default=0, help="seed of the parity rollouts")
    p.add_argument("--checkpoint", default="last", help="last (default) or best (the best greedy evaluation)")
    p.add_argument(
        "--trust-code",
        action="store_true",
        help="you trust this run: import the Python module its env names (module:Class)",
    )
    p.add_argument("--force", action="store_true", help="replace another run's export in --out")

    p = verbs.add_parser("sweep", help="a preset over a grid x seeds, several runs at once; a results table")
    p.add_argument("preset")
    p.add_argument("--seeds", type=RUNS, default=5)
    p.add_argument("--grid", action="append", default=[], metavar="KEY=V1,V2", help="repeatable")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override for every run")
    p.add_argument("--workers", type=WORKERS, default=CORES, help="runs at once (default: cores)")
    p.add_argument("--out", help="sweep folder (default runs/sweep-PRESET); rerun to resume")
    p.add_argument("--ray", metavar="ADDRESS", help="run on a Ray cluster (host:port), or 'local' to start one here")
    p.add_argument("--seed-start", type=SEED, default=0, help="seeds SEED_START .. SEED_START+SEEDS-1 (default 0)")

    p = verbs.add_parser(
        "tune", help="hyperparameter search on Optuna: K seeds a trial, resumable, checked on fresh seeds"
    )
    p.add_argument(
        "preset",
        metavar="PRESET|ENV",
        help="a preset; with --controller, the env (--set env.kwargs=... for its dynamics)",
    )
    p.add_argument("--trials", type=RUNS, default=20, help="trials to complete or prune, all workers together")
    p.add_argument("--seeds-per-trial", type=RUNS, default=3, help="seeds each configuration trains on (default 3)")
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
    p.add_argument("--seed-start", type=SEED, default=0, help="tuning seeds: SEED_START .. SEED_START+K-1")
    p.add_argument("--check-seeds", type=RUNS_OR_NONE, default=5, help="fresh seeds for the closing check (0: none)")
    p.add_argument("--check-seed-start", type=SEED, default=1000)
    p.add_argument("--out", help="study folder (default runs/tune-PRESET); the same command again continues it")
    p.add_argument("--storage", help="Optuna storage URL (default sqlite:///OUT/study.db; postgresql://... to share)")
    p.add_argument("--study", help="study name in the storage (default rlpilot-PRESET)")
    p.add_argument("--workers", type=WORKERS, default=1, help="processes working on the study (default 1)")
    p.add_argument("--ray", metavar="ADDRESS", help="workers as Ray tasks on a cluster (host:port), or 'local'")
    p.add_argument("--mlflow", metavar="URI", help="log each trial as an MLflow run (e.g. sqlite:///mlflow.db)")
    p.add_argument(
        "--controller",
        metavar="package.module:Class",
        help="tune this controller's constructor arguments (--param kp=0.1:100:log) on ENV (the positional "
        "argument) instead of a preset's hyperparameters; each trial plays --episodes episodes",
    )
    p.add_argument("--controller-kwargs", metavar="YAML", help="with --controller: the arguments not searched")
    p.add_argument("--episodes", type=EPISODES, default=32, help="with --controller: tuning episodes a trial plays")
    p.add_argument(
        "--check-episodes",
        type=EPISODES_OR_NONE,
        default=100,
        help="with --controller: fresh episodes of the closing check",
    )

    p = verbs.add_parser(
        "compare",
        help="does a policy replace your controller's tuning? rows against the controller retuned per condition "
        "(the oracle) and tuned once for every condition (robust), paired, with figures",
    )
    p.add_argument("env", metavar="ENV", help="a gymnasium id or package.module:Class that declares its conditions")
    p.add_argument("--controller", required=True, metavar="NAME", help="your controller, package.module:Class (or pd)")
    p.add_argument("--controller-kwargs", metavar="YAML", help="its arguments that are not searched")
    p.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="KEY=LOW:HIGH[:log]",
        help="a constructor argument the references search, and its range (repeatable)",
    )
    p.add_argument("--run", action="append", default=[], metavar="RUN", help="a trained run as a row (repeatable)")
    p.add_argument("--artifact", action="append", default=[], metavar="FILE", help="an exported policy as a row")
    p.add_argument(
        "--also", action="append", default=[], metavar="CONTROLLER", help="another controller as a row, as built"
    )
    p.add_argument(
        "--condition",
        action="append",
        metavar="NAME|LABEL:KEY=VALUE,...|sampled",
        help="the conditions played (default: every named one, then sampled ones); repeatable",
    )
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="env settings (env.kwargs...)")
    p.add_argument("--episodes", type=EPISODES, default=100, help="evaluation episodes per condition and row")
    p.add_argument("--seed", type=SEED, default=10_000, help="evaluation episode i plays seed + i")
    p.add_argument("--tuning-episodes", type=EPISODES, default=32, help="episodes each reference is tuned on")
    p.add_argument("--tuning-seed", type=SEED, default=0, help="tuning episode i plays seed + i (apart from --seed)")
    p.add_argument("--score", default="tracking_error", help="the measure compared (default tracking_error)")
    p.add_argument("--effort-weight", type=Number(float, 0, 1e6), default=0.0, help="score + weight x effort")
    p.add_argument("--bar", type=Number(float, 1, 100), default=1.2, help="a row's error within BAR x the oracle's")
    p.add_argument("--effort-bar", type=Number(float, 0, 100, above=True), default=1.2, help="effort within x oracle's")
    p.add_argument("--search", choices=list(("quick", "fine")), default="fine", help="how long the references search")
    p.add_argument("--out", help="folder of the answer (default runs/compare-ENV); a rerun reuses its references")
    p.add_argument("--trust-code", action="store_true", help="you trust these runs and artifacts (docs/eval.md)")

    p = verbs.add_parser("bench", help="every preset over seeds; a results table (also into docs/results.md)")
    p.add_argument("--seeds", type=RUNS, default=5)
    p.add_argument("--workers", type=WORKERS, default=CORES)
    p.add_argument("--out", default="runs/bench-presets", help="folder of the sweeps (rerun to resume)")
    p.add_argument("--results", default="docs/results.md", help="markdown file to update ('' to skip)")
    p.add_argument("--presets", help="comma-separated presets (default: control presets of at most 500k frames)")
    p.add_argument(
        "--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE", help="override for every run"
    )
    p.add_argument("--ray", metavar="ADDRESS", help="run on a Ray cluster, or 'local'")
    p.add_argument(
        "--seed-start", type=SEED, default=100, help="seeds SEED_START.. (default 100: no preset was tuned on them)"
    )

    p = verbs.add_parser("doctor", help="diagnose a run: findings with evidence, cause and a fix")
    p.add_argument("run", help="run directory")
    p.add_argument("--json", action="store_true", help="machine-readable output (schema in docs/doctor.md)")

    p = verbs.add_parser("plot", help="training curves: one run, or several (seeds) as a mean with a 95%% band")
    p.add_argument("runs", nargs="+", metavar="RUN", help="run directories")
    p.add_argument("--out", help="output image (.png or .svg); default RUN/curve.png, or curves.png for several")
    p.add_argument("--x", choices=["frames", "time"], default="frames", help="x axis: frames or wall time")
    return parser


def controller_kwargs(args: argparse.Namespace) -> dict | None:
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
