"""The arm tracking comparison (issue 18): classical controllers and RL on rlpilot/ReacherTrack-v0, per condition.

Rows: PD and PID with the gains tuned on the nominal arm (what a commissioning engineer ships), PD and PID
"oracle" (gains re-tuned for each condition: benchmarks/arm_gains.py), with ``--autotune`` the automatic
tuners' (benchmarks/arm_autotune.py: relay auto-tune on each arm, Optuna on randomised dynamics), and every
group of trained runs given (RL alone, residual RL on PD; each group one run per training seed). Columns per
condition: tracking RMSE, max error, final error (mm), motor effort (mean |a|^2 of what the motors got),
smoothness (mean |a_t - a_{t-1}|^2) and return. Every row plays the same ``--episodes`` episodes (seeds
12345.., disjoint from the tuning seeds 0-31). An RL group's cell is the IQM over its runs of each run's mean,
with a 95% bootstrap interval over runs.

    python benchmarks/robot_arm_track.py --group "residual SAC=runs/res-s*" --group "SAC=runs/sac-s*" \\
        [--autotune benchmarks/results/arm_autotune-DATE.json] [--episodes 100] [--conditions nominal,delay] \\
        [--out benchmarks/results/robot_arm_track-DATE.json]
    python benchmarks/robot_arm_track.py --conditions payload-6,delay-2,mix-out ... \\
        --out benchmarks/results/robot_arm_beyond-DATE.json       # beyond the named conditions (BEYOND)
    python benchmarks/robot_arm_track.py --figure runs/res-s0 --figure-condition all   # the path figure
    python benchmarks/robot_arm_track.py --figure adaptive-pd --figure-condition delay --figure-out FILE.png
"""

from __future__ import annotations

import argparse
import glob
import json
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from arm_gains import CONDITIONS, ENV_ID, ROBUST, gains_file, play, tuned  # noqa: E402
from stamp import ROOT, footer, header  # noqa: E402

sys.path.insert(0, str(ROOT / "tools"))
from results_arm import robot_arm_track_table  # noqa: E402

from rlpilot.config import EnvConfig  # noqa: E402
from rlpilot.control.evaluate import evaluate  # noqa: E402
from rlpilot.envs import make_env  # noqa: E402
from rlpilot.envs.arm.adaptive import TrackAdaptivePD  # noqa: E402
from rlpilot.envs.arm.controllers import TRACK_GAINS, TRACK_PID_GAINS, TrackPD, TrackPID  # noqa: E402
from rlpilot.play.episodes import playable  # noqa: E402
from rlpilot.sweep import bootstrap, iqm  # noqa: E402

MEASURES = {  # name -> (EvalResult.final key or "return", scale, format)
    "RMSE (mm)": ("tracking_error", 1000.0),
    "max (mm)": ("track_max", 1000.0),
    "final (mm)": ("final_error", 1000.0),
    "effort": ("effort", 1.0),
    "smoothness": ("smoothness", 1.0),
    "return": ("return", 1.0),
}


def measures(result) -> dict[str, float]:
    values = {"return": result.returns, **result.final}
    return {name: float(values[key].mean() * scale) for name, (key, scale) in MEASURES.items()}


def play_controller(controller, kwargs: dict, episodes: int, seed: int) -> dict[str, float]:
    return measures(play(controller, kwargs, episodes=episodes, seed=seed))


def under(run_kwargs: dict, condition: dict) -> dict:
    """A run's env kwargs under a condition: its randomisation (``randomize``, ``randomize_prob``) and
    disturbances replaced by the condition's, its other settings (``obs_last_action``, ``trajectory``) kept. (The
    randomised condition draws every disturbance at every reset: a run trained at ``randomize_prob`` 0.5 once kept
    its own 0.5 there.)"""
    from rlpilot.envs.arm.disturbances import NOMINAL

    kept = {k: v for k, v in run_kwargs.items() if k not in NOMINAL and k not in ("randomize", "randomize_prob")}
    return {**kept, **condition}


def play_run(run: str, kwargs: dict, episodes: int, seed: int) -> dict[str, float]:
    """A trained run's greedy policy (with its base controller, if residual) on a fixed condition."""
    target = playable(run)
    target.env_config = replace(target.env_config, kwargs=under(target.env_config.kwargs, kwargs))
    env = target.make_env(num_envs=min(episodes, 50), seed=seed)
    try:
        return measures(evaluate(env, target.policy_for(env), episodes=episodes, seed=seed))
    finally:
        env.close()


EVALUATION = {**CONDITIONS, "random": ROBUST}
"""The named conditions, then the randomised arm: every disturbance drawn from its range at each episode (what the
robust gains are tuned on: its oracle is the robust row)."""
ORACLE_OF = {"random": "robust"}
BEYOND = {  # levels and combinations that are not the named conditions: within the ranges, and beyond their tops
    "payload-6": {"payload": 6.0},
    "friction-12": {"friction": 12.0},
    "damping-5": {"damping": 5.0},
    "gain-0.4": {"gain": 0.4},
    "gain-1.8": {"gain": 1.8},
    "noise-0.02": {"obs_noise": 0.02},
    "delay-2": {"action_delay": 2},
    "mix-in": {"payload": 1.5, "friction": 3.0, "damping": 2.0, "gain": 1.2, "obs_noise": 0.003},
    "mix-in-delay": {
        "payload": 1.0,
        "friction": 2.0,
        "damping": 0.7,
        "gain": 0.9,
        "obs_noise": 0.002,
        "action_delay": 1,
    },
    "mix-out": {"payload": 5.0, "friction": 10.0, "gain": 0.5, "obs_noise": 0.015, "action_delay": 1},
}
"""``--conditions`` may name these too (written to their own file, robot_arm_beyond-DATE.json): no oracle was tuned
for them, so their rows are compared with the robust PD (issue 37: the adaptive controller no worse than it)."""
ADAPTIVE_ROW = "PD adaptive (online identification, adaptive-pd)"


def autotuned(autotune: dict, condition: str) -> dict[str, TrackPD]:
    """The rows of an arm_autotune result: the relay auto-tune's PD and PID on this condition's arm (tuned on
    it by the relay experiment, as a commissioning engineer would), and the PID Optuna found on randomised
    dynamics."""
    search = {name: autotune["optuna"]["pid"][name] for name in ("kp", "kd", "ki")}
    rows = {}
    if condition in autotune["relay"]:  # one arm per condition; the randomised one has an arm per episode
        relay = autotune["relay"][condition]
        rows["PD relay auto-tune (per arm)"] = TrackPD(**relay["pd"])
        rows["PID relay auto-tune (per arm)"] = TrackPID(**relay["pid"])
    return rows | {"PID Optuna (randomised arm)": TrackPID(**search)}


def classical_rows(
    gains: dict, condition: str, kwargs: dict, episodes: int, seed: int, autotune: dict | None = None
) -> dict[str, dict]:
    controllers = {
        "PD (nominal gains)": TrackPD(**TRACK_GAINS),
        "PID (nominal gains)": TrackPID(**TRACK_PID_GAINS),
    }
    if "robust" in gains["gains"]:  # tuned on randomised dynamics (arm_gains.ROBUST), where measured
        robust_pd, robust_pid = tuned(gains["gains"]["robust"])
        controllers["PD robust (gains for randomised dynamics)"] = robust_pd
        controllers["PID robust (gains for randomised dynamics)"] = robust_pid
    if ORACLE_OF.get(condition, condition) in gains["gains"]:  # none for the BEYOND conditions
        oracle_pd, oracle_pid = tuned(gains["gains"][ORACLE_OF.get(condition, condition)])
        controllers["PD oracle (gains for this condition)"] = oracle_pd
        controllers["PID oracle (gains for this condition)"] = oracle_pid
    if autotune is not None:
        controllers.update(autotuned(autotune, condition))
    controllers[ADAPTIVE_ROW] = TrackAdaptivePD()
    return {name: play_controller(controller, kwargs, episodes, seed) for name, controller in controllers.items()}


def group_row(runs: list[str], kwargs: dict, episodes: int, seed: int) -> dict:
    per_run = [play_run(run, kwargs, episodes, seed) for run in runs]
    row = {}
    for name in MEASURES:
        values = np.array([r[name] for r in per_run])
        row[name] = iqm(values)
        row[f"{name} CI"] = bootstrap(values, iqm)  # NaN for a single run
    row["runs"] = len(runs)
    return row


def reusable(path: Path, args, measured: set[str]) -> dict:
    """An earlier result file's RL groups, checked to be measured on the same episodes, less the groups named in
    ``measured``: a group measured again now (same name) replaces the reused one. A condition the file lacks (the
    randomised one, added after) stays unmeasured for its groups ("n/m" in the tables)."""
    data = json.loads(path.read_text())
    if (data["episodes"], data["seed"]) != (args.episodes, args.seed):
        sys.exit(f"--reuse {path}: measured on {data['episodes']} episodes from seed {data['seed']}, not on these")
    if not set(args.conditions.split(",")) & set(data["conditions"]):
        sys.exit(f"--reuse {path}: has none of the conditions {args.conditions}")
    where = path.resolve()
    here = {
        "file": str(where.relative_to(ROOT) if where.is_relative_to(ROOT) else where),
        "commit": next(line.split(": ", 1)[1][:12] for line in data["stamp"] if line.startswith("# commit:")),
    }
    earlier = data.get("reused", {})  # a group this file itself reused keeps where it was measured
    kept = [name for name in data["groups"] if name not in measured]
    return {
        "groups": {name: data["groups"][name] for name in kept},
        "provenance": {name: earlier.get(name, here) for name in kept},
        "conditions": data["conditions"],
    }


def run_label(run: str) -> str:
    """``residual SAC + PD (s0)`` or ``PPO (s1)``: what a run is, for the figure."""
    from rlpilot.runs import load_run

    config = load_run(run).config()
    base = config.env.base_controller
    if base == "none":
        what = config.algo.upper()
    elif config.env.residual_mode == "gains":
        what = f"{base.upper()}, gains scheduled by {config.algo.upper()}"
    else:
        what = f"residual {config.algo.upper()} + {base.upper()}"
    return f"{what} ({Path(run).name})"


def path_figure(target_name: str, condition: str, out: Path, seed: int, gains: dict) -> None:
    """Reference and fingertip paths of one episode under ``condition``: the PD with the nominal gains and with
    the robust ones beside ``target_name``, a trained run or a built-in controller (``adaptive-pd``)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from rlpilot.envs.catalogue import BUILT_IN, base_controller

    def trace(policy, build) -> tuple[np.ndarray, np.ndarray, float]:
        """One episode: ``build()`` makes the env (a run's own, with its saved normalisation), ``policy(env)``
        the action function."""
        from rlpilot.envs import observation_reader

        env = build()
        vector_env = env.base_env.vector_env
        single = vector_env.unwrapped.envs[0].unwrapped
        act, read = policy(env), observation_reader(env)
        raw, _ = vector_env.reset(seed=seed)
        references, tips = [], []
        done = False
        while not done:
            action = env.base_env.env_action(act(read(raw)))
            raw, _, terminated, truncated, info = vector_env.step(action)
            references.append(single.reference_now()[0].copy())
            tips.append(single.get_body_com("fingertip")[:2].copy())
            done = bool(terminated[0] or truncated[0])
        env.close()
        return np.array(references), np.array(tips), float(info["track_rmse"][0])

    kwargs = {**EVALUATION, **BEYOND}[condition]

    def plain_env():
        return make_env(EnvConfig(id=ENV_ID, backend="sync", kwargs=kwargs), num_envs=1, seed=seed)

    robust_pd, _ = tuned(gains["gains"]["robust"])
    panels = {
        "PD, nominal gains": trace(lambda env: TrackPD(**TRACK_GAINS), plain_env),
        f"PD, robust gains (kp {robust_pd.kp:g})": trace(lambda env: robust_pd, plain_env),
    }
    if target_name in BUILT_IN:
        controller = base_controller(target_name, ENV_ID)
        panels[target_name] = trace(lambda env: controller, plain_env)
    else:
        target = playable(target_name)
        target.env_config = replace(target.env_config, kwargs=under(target.env_config.kwargs, kwargs))
        panels[run_label(target_name)] = trace(target.policy_for, lambda: target.make_env(num_envs=1, seed=seed))
    figure = Figure(figsize=(5 * len(panels), 5))
    FigureCanvasAgg(figure)
    for index, (axis, (name, (reference, tip, rmse))) in enumerate(
        zip(figure.subplots(1, len(panels)), panels.items())
    ):
        axis.plot(reference[:, 0], reference[:, 1], "k--", lw=1.5, label="reference")
        axis.plot(tip[:, 0], tip[:, 1], color=("C0", "C3", "C2")[index], lw=1.2, label="fingertip")
        axis.plot(*tip[0], "o", color="C1", label="start")
        axis.set_title(f"{name}: RMSE {rmse * 1000:.1f} mm", fontsize=10)
        axis.set_aspect("equal")
        axis.set_xlim(-0.22, 0.22)
        axis.set_ylim(-0.22, 0.22)
        axis.grid(alpha=0.3)
        axis.legend(loc="lower right", fontsize=8)
    figure.suptitle(f"rlpilot/ReacherTrack-v0, condition '{condition}', episode seed {seed}", fontsize=11)
    figure.tight_layout()
    figure.savefig(out, dpi=100)
    print(f"figure: {out} (RMSE: " + ", ".join(f"{n} {v[2] * 1000:.1f} mm" for n, v in panels.items()) + ")")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--group", action="append", default=[], metavar="NAME=GLOB", help="trained runs, one row")
    parser.add_argument("--episodes", type=int, default=100)
    parser.add_argument("--seed", type=int, default=12345)
    parser.add_argument("--conditions", default=",".join(EVALUATION))
    parser.add_argument("--gains", default=None, help="arm_gains result (default: the newest)")
    parser.add_argument(
        "--autotune",
        metavar="FILE",
        default=None,
        help="arm_autotune result: adds the relay auto-tune (per arm) and the Optuna-searched PID rows",
    )
    parser.add_argument(
        "--reuse",
        metavar="FILE",
        action="append",
        default=[],
        help="copy the RL groups of an earlier result file (same episodes and seeds) into this one, marked with "
        "their file and commit: groups whose runs are gone need not be retrained to stay in the table",
    )
    parser.add_argument("--out", default=None)
    parser.add_argument(
        "--figure", metavar="RUN", help="draw the path figure for this run or built-in controller (adaptive-pd)"
    )
    parser.add_argument("--figure-condition", default="all")
    parser.add_argument("--figure-out", default=str(ROOT / "docs" / "img" / "arm-track-paths.png"))
    args = parser.parse_args()
    torch.set_num_threads(1)
    gains_path = gains_file(args.gains)
    gains = json.loads(gains_path.read_text())
    if args.figure:
        path_figure(args.figure, args.figure_condition, Path(args.figure_out), args.seed, gains)
        return 0
    autotune = json.loads(Path(args.autotune).read_text()) if args.autotune else None
    groups = {}
    for item in args.group:
        name, _, pattern = item.partition("=")
        groups[name] = sorted(glob.glob(pattern))
        if not groups[name]:
            sys.exit(f"--group {item}: no run matches")
    stamp = header()
    result = {
        "gains": str(gains_path.relative_to(ROOT)),
        "episodes": args.episodes,
        "seed": args.seed,
        "conditions": {},
    }
    if args.autotune:
        where = Path(args.autotune).resolve()
        result["autotune"] = str(where.relative_to(ROOT) if where.is_relative_to(ROOT) else where)
    reused = [reusable(Path(path), args, set(groups)) for path in args.reuse]
    for condition in args.conditions.split(","):
        kwargs = {**EVALUATION, **BEYOND}[condition]
        rows = classical_rows(gains, condition, kwargs, args.episodes, args.seed, autotune)
        for earlier in reused:
            for name in earlier["groups"]:
                if name in earlier["conditions"].get(condition, {}):
                    rows[name] = earlier["conditions"][condition][name]
        for name, runs in groups.items():
            rows[name] = group_row(runs, kwargs, args.episodes, args.seed)
        result["conditions"][condition] = rows
        print(f"{condition}: done", flush=True)
    result["groups"] = {name: runs for earlier in reused for name, runs in earlier["groups"].items()} | groups
    result["reused"] = {name: where for earlier in reused for name, where in earlier["provenance"].items()}
    result["stamp"] = [*stamp, *footer()]
    out = Path(args.out or ROOT / "benchmarks" / "results" / f"robot_arm_track-{time.strftime('%Y-%m-%d')}.json")
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(robot_arm_track_table(out))  # the rendering of the generated tables in docs/robot-arm.md
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
