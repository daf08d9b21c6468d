"""The command line's arguments: every verb's parser, and the one number type its numeric arguments share.

Each verb declares its arguments in a function of its own (:data:`VERBS`); an option several verbs take (``--set``,
``--seed``, ``--episodes``, ``--controller``, ``--out``, ``--ray``, ``--trust-code``, ...) is declared once, in a
parent parser the verb takes with ``parents=[...]``, given what the option means for that verb (its help, its default).

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


# -- options several verbs share, each declared once: a verb takes them as argparse parents ------------------------
# A verb says what the option means for it (its help, its default); the flag, its type and how it is read are here.


def _parent(*flags: str, **declaration) -> Parser:
    """A parent parser (no ``--help`` of its own) declaring one option, or none."""
    parent = Parser(add_help=False)
    if flags:
        parent.add_argument(*flags, **declaration)
    return parent


def overrides(help: str, *, dest: str = "set") -> Parser:
    """``--set KEY=VALUE`` (repeatable): config overrides."""
    return _parent("--set", dest=dest, action="append", default=[], metavar="KEY=VALUE", help=help)


def seed(default: int | None, help: str | None = None) -> Parser:
    """``--seed N``: a seed training takes."""
    return _parent("--seed", type=SEED, default=default, help=help)


def seed_start(default: int, help: str | None = None) -> Parser:
    """``--seed-start N``: the first of the seeds a command's runs or episodes play."""
    return _parent("--seed-start", type=SEED, default=default, help=help)


def seeds() -> Parser:
    """``--seeds K``: runs of each preset or grid point, one a seed."""
    return _parent("--seeds", type=RUNS, default=5)


def episodes(default: int | None, help: str | None = None) -> Parser:
    """``--episodes N``: episodes a command plays."""
    return _parent("--episodes", type=EPISODES, default=default, help=help)


def workers(default: int, help: str | None = None) -> Parser:
    """``--workers N``: processes working at once."""
    return _parent("--workers", type=WORKERS, default=default, help=help)


def out(help: str, *, default: str | None = None) -> Parser:
    """``--out``: where a command writes."""
    return _parent("--out", default=default, help=help)


def ray(help: str) -> Parser:
    """``--ray ADDRESS``: a Ray cluster, or ``local``."""
    return _parent("--ray", metavar="ADDRESS", help=help)


def trust_code(help: str) -> Parser:
    """``--trust-code``: the user trusts a run's or an artifact's code (docs/eval.md)."""
    return _parent("--trust-code", action="store_true", help=help)


def checkpoint() -> Parser:
    """``--checkpoint last|best``: which of a run's checkpoints."""
    return _parent("--checkpoint", default="last", help="last (default) or best (the best greedy evaluation)")


def controller(help: str, kwargs_help: str, *, metavar: str = "NAME", required: bool = False) -> Parser:
    """``--controller NAME`` and ``--controller-kwargs YAML`` (read by :func:`controller_kwargs`)."""
    parent = _parent("--controller", required=required, metavar=metavar, help=help)
    parent.add_argument("--controller-kwargs", metavar="YAML", help=kwargs_help)
    return parent


def params(help: str, *, metavar: str = "KEY=LOW:HIGH[:log]") -> Parser:
    """``--param KEY=LOW:HIGH[:log]`` (repeatable): a range searched."""
    return _parent("--param", action="append", default=[], metavar=metavar, help=help)


def condition(metavar: str, help: str) -> Parser:
    """``--condition`` (repeatable): a condition of the plant (docs/conditions.md)."""
    return _parent("--condition", action="append", metavar=metavar, help=help)


# -- each verb's arguments ----------------------------------------------------------------------------------------


def presets_arguments(verbs) -> None:
    verbs.add_parser("presets", help="list presets: algorithm, env, budget, solved threshold")


def check_arguments(verbs) -> None:
    p = verbs.add_parser(
        "check",
        help="preflight of an environment: specs, rollout statistics, pitfalls",
        parents=[
            episodes(None, "random-policy episodes (default: 20, fewer if they would take over --max-seconds)"),
            seed(0),
            overrides("config override (env.*)"),
        ],
    )
    p.add_argument("target", metavar="ENV|PRESET", help="gymnasium id, package.module:Class, or a preset name")
    p.add_argument(
        "--max-seconds",
        type=SECONDS,
        default=30.0,
        help="time for the random-policy episodes when --episodes is not given (default 30)",
    )
    p.add_argument("--frame", metavar="PNG", help="image observations: where to write the sample frame")


def train_arguments(verbs) -> None:
    p = verbs.add_parser(
        "train",
        help="train a preset, or an algorithm on any env",
        parents=[
            controller(
                "train adapt: your controller, package.module:Class", "train adapt: its arguments that are not searched"
            ),
            params("train adapt: a constructor argument the references search, and its range (repeatable)"),
            overrides("config override, e.g. --set ppo.lr=1e-3 (repeatable)"),
            seed(None, "shortcut for --set train.seed=N"),
            trust_code(
                "with --resume: the run's env names a Python module (module:Class) and you trust the run: import it"
            ),
            ray(
                "collect on collect.workers Ray actors: a cluster address (host:port) or 'local' (docs/distributed.md)"
            ),
        ],
    )
    p.add_argument(
        "target",
        nargs="?",
        metavar="PRESET|ALGO|adapt",
        help="a preset (rlpilot presets), an algorithm name, or adapt (learned adaptation of --controller)",
    )
    p.add_argument("env", nargs="?", metavar="ENV", help="env id when the first argument is an algorithm or adapt")
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
    p.add_argument("-v", "--verbose", action="store_true", help="a status line every train.milestone_every_frames")


def eval_arguments(verbs) -> None:
    p = verbs.add_parser(
        "eval",
        help="greedy episodes of a trained run, an exported policy or a baseline controller",
        parents=[
            controller(
                "play a controller instead of the policy, on the run's env or ENV: your own package.module:Class "
                "(rlpilot.controllers.Controller; docs/your-controller.md), the arm's pd (IK + PD), pid (with an "
                "anti-windup integral; on Reacher-v5 the same PD) or adaptive-pd (the tracking arm's PD retuned online "
                "from an identification of the arm), random; multi-agent simple_spread: heuristic "
                "(each agent to its landmark in the least-distance assignment), random",
                "what --controller is built with, as a YAML mapping ('{kp: 2.0, ki: 0.5}'); default: none, or a run's "
                "env.base_controller_kwargs for its own base controller",
            ),
            episodes(20),
            seed(12345, "episode i uses seed + i"),
            condition(
                "NAME|KEY=VALUE",
                "play every episode under this condition of the plant: a condition the env names (nominal, heavy) or "
                "a value of a parameter it declares (load=3); repeatable, later ones over earlier ones "
                "(docs/conditions.md)",
            ),
            checkpoint(),
            trust_code(
                "you trust this run or artifact: import the Python module its env names (module:Class), load "
                "TorchScript"
            ),
        ],
    )
    p.add_argument(
        "target",
        metavar="RUN|ARTIFACT|ENV",
        help="run directory, a file written by rlpilot export, or (with --controller) an env id",
    )
    p.add_argument(
        "--csv",
        help="per-episode rows (default RUN/eval.csv, ARTIFACT.eval.csv or RUN/eval-CONTROLLER.csv; a controller "
        "on an env id writes rows only here)",
    )
    p.add_argument("--video", help="record one greedy episode to FILE (.gif, or .mp4 with the [video] extra)")
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


def export_arguments(verbs) -> None:
    p = verbs.add_parser(
        "export",
        help="export the greedy policy (onnx, pt2, torchscript), parity-checked",
        parents=[
            out("output folder (default RUN/export)"),
            seed(0, "seed of the parity rollouts"),
            checkpoint(),
            trust_code("you trust this run: import the Python module its env names (module:Class)"),
        ],
    )
    p.add_argument("run", help="run directory")
    p.add_argument("--format", default="onnx", help="onnx (default), pt2 or torchscript")
    p.add_argument("--force", action="store_true", help="replace another run's export in --out")


def sweep_arguments(verbs) -> None:
    p = verbs.add_parser(
        "sweep",
        help="a preset over a grid x seeds, several runs at once; a results table",
        parents=[
            seeds(),
            overrides("override for every run"),
            workers(CORES, "runs at once (default: cores)"),
            out("sweep folder (default runs/sweep-PRESET); rerun to resume"),
            ray("run on a Ray cluster (host:port), or 'local' to start one here"),
            seed_start(0, "seeds SEED_START .. SEED_START+SEEDS-1 (default 0)"),
        ],
    )
    p.add_argument("preset")
    p.add_argument("--grid", action="append", default=[], metavar="KEY=V1,V2", help="repeatable")


def tune_arguments(verbs) -> None:
    p = verbs.add_parser(
        "tune",
        help="hyperparameter search on Optuna: K seeds a trial, resumable, checked on fresh seeds",
        parents=[
            params("repeatable", metavar="KEY=LOW:HIGH[:log]|KEY=A,B,C"),
            overrides("the starting configuration"),
            seed_start(0, "tuning seeds: SEED_START .. SEED_START+K-1"),
            out("study folder (default runs/tune-PRESET); the same command again continues it"),
            workers(1, "processes working on the study (default 1)"),
            ray("workers as Ray tasks on a cluster (host:port), or 'local'"),
            controller(
                "tune this controller's constructor arguments (--param kp=0.1:100:log) on ENV (the positional "
                "argument) instead of a preset's hyperparameters; each trial plays --episodes episodes",
                "with --controller: the arguments not searched",
                metavar="package.module:Class",
            ),
            episodes(32, "with --controller: tuning episodes a trial plays"),
        ],
    )
    p.add_argument(
        "preset",
        metavar="PRESET|ENV",
        help="a preset; with --controller, the env (--set env.kwargs=... for its dynamics)",
    )
    p.add_argument("--trials", type=RUNS, default=20, help="trials to complete or prune, all workers together")
    p.add_argument("--seeds-per-trial", type=RUNS, default=3, help="seeds each configuration trains on (default 3)")
    p.add_argument("--space", metavar="FILE", help="YAML: key: low:high[:log] | [a, b] | {low, high, log}")
    p.add_argument(
        "--objective",
        choices=["frames", "time", "return"],
        help="frames (default when the preset has a threshold) or wall s to solved, or final greedy return",
    )
    p.add_argument("--aggregate", choices=["iqm", "median", "mean"], default="iqm", help="over a trial's seeds")
    p.add_argument("--pruner", choices=["percentile", "none"], default="percentile")
    p.add_argument("--check-seeds", type=RUNS_OR_NONE, default=5, help="fresh seeds for the closing check (0: none)")
    p.add_argument("--check-seed-start", type=SEED, default=1000)
    p.add_argument("--storage", help="Optuna storage URL (default sqlite:///OUT/study.db; postgresql://... to share)")
    p.add_argument("--study", help="study name in the storage (default rlpilot-PRESET)")
    p.add_argument("--mlflow", metavar="URI", help="log each trial as an MLflow run (e.g. sqlite:///mlflow.db)")
    p.add_argument(
        "--check-episodes",
        type=EPISODES_OR_NONE,
        default=100,
        help="with --controller: fresh episodes of the closing check",
    )


def compare_arguments(verbs) -> None:
    # ENV first: a bare `rlpilot compare` is told "required: ENV, --controller", in that order
    env = _parent("env", metavar="ENV", help="a gymnasium id or package.module:Class that declares its conditions")
    p = verbs.add_parser(
        "compare",
        help="does a policy replace your controller's tuning? rows against the controller retuned per condition "
        "(the oracle) and tuned once for every condition (robust), paired, with figures",
        parents=[
            env,
            controller(
                "your controller, package.module:Class (or pd)", "its arguments that are not searched", required=True
            ),
            params("a constructor argument the references search, and its range (repeatable)"),
            condition(
                "NAME|LABEL:KEY=VALUE,...|sampled",
                "the conditions played (default: every named one, then sampled ones); repeatable",
            ),
            overrides("env settings (env.kwargs...)"),
            episodes(100, "evaluation episodes per condition and row"),
            seed(10_000, "evaluation episode i plays seed + i"),
            out("folder of the answer (default runs/compare-ENV); a rerun reuses its references"),
            trust_code("you trust these runs and artifacts (docs/eval.md)"),
            workers(CORES, "processes the oracles are searched on side by side (default: cores)"),
        ],
    )
    p.add_argument("--run", action="append", default=[], metavar="RUN", help="a trained run as a row (repeatable)")
    p.add_argument("--artifact", action="append", default=[], metavar="FILE", help="an exported policy as a row")
    p.add_argument(
        "--also", action="append", default=[], metavar="CONTROLLER", help="another controller as a row, as built"
    )
    p.add_argument("--tuning-episodes", type=EPISODES, default=32, help="episodes each reference is tuned on")
    p.add_argument("--tuning-seed", type=SEED, default=0, help="tuning episode i plays seed + i (apart from --seed)")
    p.add_argument("--score", default="tracking_error", help="the measure compared (default tracking_error)")
    p.add_argument("--effort-weight", type=Number(float, 0, 1e6), default=0.0, help="score + weight x effort")
    p.add_argument("--bar", type=Number(float, 1, 100), default=1.2, help="a row's error within BAR x the oracle's")
    p.add_argument("--effort-bar", type=Number(float, 0, 100, above=True), default=1.2, help="effort within x oracle's")
    # the names of rlpilot.reference.search.BUDGETS (not imported here: building the parser stays light)
    p.add_argument("--search", choices=["quick", "fine"], default="fine", help="how long the references search")


def bench_arguments(verbs) -> None:
    p = verbs.add_parser(
        "bench",
        help="every preset over seeds; a results table (also into docs/results.md)",
        parents=[
            seeds(),
            workers(CORES),
            out("folder of the sweeps (rerun to resume)", default="runs/bench-presets"),
            overrides("override for every run", dest="overrides"),
            ray("run on a Ray cluster, or 'local'"),
            seed_start(100, "seeds SEED_START.. (default 100: no preset was tuned on them)"),
        ],
    )
    p.add_argument("--results", default="docs/results.md", help="markdown file to update ('' to skip)")
    p.add_argument("--presets", help="comma-separated presets (default: control presets of at most 500k frames)")


def doctor_arguments(verbs) -> None:
    p = verbs.add_parser("doctor", help="diagnose a run: findings with evidence, cause and a fix")
    p.add_argument("run", help="run directory")
    p.add_argument("--json", action="store_true", help="machine-readable output (schema in docs/doctor.md)")


def plot_arguments(verbs) -> None:
    p = verbs.add_parser(
        "plot",
        help="training curves: one run, or several (seeds) as a mean with a 95%% band",
        parents=[out("output image (.png or .svg); default RUN/curve.png, or curves.png for several")],
    )
    p.add_argument("runs", nargs="+", metavar="RUN", help="run directories")
    p.add_argument("--x", choices=["frames", "time"], default="frames", help="x axis: frames or wall time")


VERBS = [
    presets_arguments,
    check_arguments,
    train_arguments,
    eval_arguments,
    export_arguments,
    sweep_arguments,
    tune_arguments,
    compare_arguments,
    bench_arguments,
    doctor_arguments,
    plot_arguments,
]
"""Each verb's arguments, in the order ``rlpilot --help`` lists the verbs."""


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="rlpilot", description=DESCRIPTION)
    parser.add_argument("--debug", action="store_true", help="show full tracebacks on errors")
    verbs = parser.add_subparsers(dest="verb", required=True, metavar="VERB")
    for arguments in VERBS:
        arguments(verbs)
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
