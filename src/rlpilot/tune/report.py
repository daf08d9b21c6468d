"""What a study of ``rlpilot tune`` reports: its trials best first with bootstrap intervals, parameter
importances, the history figure, ``best.yaml``, and the closing check: the tuned and the starting configuration
on the same check seeds (or episodes), compared pair by pair, with a verdict."""

from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np

from rlpilot.common.files import atomic_write, dumps
from rlpilot.common.redact import redact
from rlpilot.config.load import load_config
from rlpilot.stats import BOOTSTRAP_SAMPLES, bootstrap, paired_difference
from rlpilot.tune.space import AGGREGATES, Param
from rlpilot.tune.study import Study, fmt, trial_overrides

OBJECTIVE_NAMES = {"frames": "frames to solved", "time": "wall s to solved", "return": "final greedy return"}
"""Each ``--objective`` as the tables name it."""


def interval(values: list[float], aggregate: str) -> tuple[float, float]:
    """95% bootstrap interval of the aggregate over seeds (NaN for fewer than two)."""
    return bootstrap(np.array(values, dtype=float), AGGREGATES[aggregate])


def paired_check(tuned: list[float], start: list[float], *, maximize: bool, what: str) -> dict:
    """The closing check's comparison of the tuned configuration with the starting one, played on the same check
    seeds (or episodes): ``tuned - start`` pair by pair, its mean with a 95% paired bootstrap interval
    (:func:`rlpilot.stats.paired_difference`), and the verdict. Two intervals, one an arm, overlap whenever the
    seeds differ more than the arms do; the interval of the differences says whether tuning helped. ``what``:
    the difference's name in the verdict (``best - start, frames to solved``)."""
    tuned_values, start_values = np.asarray(tuned, dtype=float), np.asarray(start, dtype=float)
    mean, low, high = paired_difference(tuned_values, start_values)
    return {
        "differences": (tuned_values - start_values).tolist(),
        "mean": mean,
        "interval": [low, high],
        "verdict": verdict(mean, low, high, maximize=maximize, what=what),
    }


def verdict(mean: float, low: float, high: float, *, maximize: bool, what: str) -> str:
    """One line: tuning helped (or hurt) when the paired interval excludes 0, else no significant difference."""
    if math.isnan(low):
        return f"no verdict: a paired interval needs two check pairs at least ({what}: {signed(mean)})"
    stated = f"{what}: {signed(mean)} [{signed(low)}, {signed(high)}]"
    if low > 0 or high < 0:
        helped = (low > 0) == maximize
        return f"tuning {'helped' if helped else 'hurt'}: the 95% paired interval excludes 0 ({stated})"
    return f"no significant difference: the 95% paired interval includes 0 ({stated})"


def signed(value: float) -> str:
    """``fmt`` with its sign: a difference reads as one."""
    return fmt(value) if math.isnan(value) or value <= 0 else "+" + fmt(value)


def trial_rows(study: Study, optuna_study) -> list[dict]:
    from optuna.trial import TrialState

    rows = []
    for trial in optuna_study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.PRUNED)):
        scores = trial.user_attrs.get("scores", [])
        rows.append(
            {
                "number": trial.number,
                "state": trial.state.name.lower(),
                "params": trial.params,
                "value": trial.value,
                "scores": scores,
                "interval": interval(scores, study.spec.aggregate),
                "run_key": trial.user_attrs.get("run_key"),
            }
        )
    sign = -1 if study.spec.direction == "maximize" else 1
    rows.sort(key=lambda r: (r["state"] != "complete", sign * (r["value"] if r["value"] is not None else 0)))
    return rows


def params_text(params: dict) -> str:
    return " ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in params.items())


def study_table(study: Study, rows: list[dict], *, top: int = 10) -> str:
    spec = study.spec
    what = OBJECTIVE_NAMES[spec.objective]
    lines = [
        f"| trial | state | parameters | {spec.aggregate} {what} [95% CI] | per seed |",
        "|---|---|---|---|---|",
    ]
    for row in rows[:top]:
        low, high = row["interval"]
        value = fmt(row["value"]) if row["value"] is not None else "pruned"
        cell = f"{value} [{fmt(low)}, {fmt(high)}]"
        lines.append(
            f"| {row['number']} | {row['state']} | {params_text(row['params'])} | {cell} | "
            f"{', '.join(fmt(s) for s in row['scores'])} |"
        )
    lines.append("")
    lines.append(
        f"Seeds {spec.seeds[0]}-{spec.seeds[-1]} per trial; unsolved seeds score the whole budget; intervals: "
        f"percentile bootstrap over seeds ({BOOTSTRAP_SAMPLES} resamples)."
    )
    return "\n".join(lines) + "\n"


def importances(optuna_study) -> dict[str, float]:
    """Optuna's parameter importances (PED-ANOVA); empty when there are too few complete trials to fit them."""
    import warnings

    import optuna

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "quantiles select the same set of trials": equal importances, shown
            return dict(optuna.importance.get_param_importances(optuna_study))
    except (RuntimeError, ValueError, ZeroDivisionError):
        return {}


def plot_study(study: Study, optuna_study, importance: dict[str, float], path: Path) -> None:
    """Optimisation history (each trial's objective, best so far, pruned trials at their last report) and
    parameter importances, side by side. Uses matplotlib's Figure (no pyplot state)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from optuna.trial import TrialState

    figure = Figure(figsize=(11, 4))
    FigureCanvasAgg(figure)
    history, bars = figure.subplots(1, 2, gridspec_kw={"width_ratios": [2, 1]})
    trials = optuna_study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.PRUNED))
    complete = [t for t in trials if t.state == TrialState.COMPLETE]
    history.scatter([t.number for t in complete], [t.value for t in complete], label="complete", color="C0")
    pruned = [t for t in trials if t.state == TrialState.PRUNED and t.intermediate_values]
    history.scatter(
        [t.number for t in pruned],
        [t.intermediate_values[max(t.intermediate_values)] for t in pruned],
        marker="x",
        color="C3",
        label="pruned (last report)",
    )
    best, best_line = None, []
    better = max if study.spec.direction == "maximize" else min
    for t in sorted(complete, key=lambda t: t.number):
        best = t.value if best is None else better(best, t.value)
        best_line.append((t.number, best))
    if best_line:
        history.step(*zip(*best_line), where="post", color="C2", label="best so far")
    history.set_xlabel("trial")
    history.set_ylabel(f"{study.spec.aggregate} of {study.spec.objective} over {study.spec.seeds_per_trial} seeds")
    history.set_title(f"rlpilot tune {study.spec.preset}: optimisation history")
    history.legend()
    history.grid(alpha=0.3)
    if importance:
        names = list(importance)[::-1]
        bars.barh(names, [importance[n] for n in names], color="C1")
        bars.set_title("parameter importance (PED-ANOVA)")
    else:
        bars.text(0.5, 0.5, "too few complete trials\nfor importances", ha="center", va="center")
        bars.set_axis_off()
    figure.tight_layout()
    figure.savefig(path.with_suffix(".tmp.png"), dpi=100)
    os.replace(path.with_suffix(".tmp.png"), path)


def write_best(study: Study, params: dict) -> tuple[Path, str]:
    """The best configuration as a config file (``rlpilot train --config``) and as a ``--set`` command line."""
    overrides = trial_overrides(study, params)
    config = load_config(study.spec.preset, overrides=overrides)
    path = study.out / "best.yaml"
    header = f"# rlpilot tune {study.spec.preset}: best trial's configuration (study {study.name})\n"
    atomic_write(path, header + config.to_yaml())
    command = f"rlpilot train {study.spec.preset} " + " ".join(f"--set {o}" for o in overrides)
    return path, command.strip()


def check_table(study: Study, result: dict) -> str:
    """The closing check seed by seed: each configuration's score and their difference, the mean difference with
    its paired interval, the ratio (frames and time), and the verdict."""
    spec = study.spec
    seeds, arms, paired = result["seeds"], result["arms"], result["difference"]
    lines = [
        f"| check seed | start: {spec.objective} | best: {spec.objective} | best - start |",
        "|---|---|---|---|",
    ]
    for seed, start, best, difference in zip(
        seeds, arms["start"]["scores"], arms["best"]["scores"], paired["differences"]
    ):
        lines.append(f"| {seed} | {fmt(start)} | {fmt(best)} | {signed(difference)} |")
    low, high = paired["interval"]
    means = {arm: fmt(float(np.mean(data["scores"]))) for arm, data in arms.items()}
    lines.append(
        f"| mean | {means['start']} | {means['best']} | {signed(paired['mean'])} [{signed(low)}, {signed(high)}] |"
    )
    lines.append("")
    for arm, data in arms.items():
        lines.append(
            f"- {arm}: {' '.join(data['overrides']) or 'the preset'}; solved {data['solved']}/{len(seeds)}; "
            f"{spec.aggregate} {fmt(data['value'])}"
        )
    lines.append("")
    lines.append(
        f"Both configurations trained on the same check seeds {seeds[0]}-{seeds[-1]}, none of them a tuning seed "
        f"({spec.seeds[0]}-{spec.seeds[-1]}); best - start per seed, its mean with a 95% paired bootstrap "
        f"interval ({BOOTSTRAP_SAMPLES} resamples of the seeds"
        + ("; unsolved seeds score the budget, so the difference is a bound)." if spec.objective != "return" else ").")
    )
    if "ratio_median" in result:
        low, high = result["ratio_interval"]
        lines.append(
            "Paired ratio start/best per seed (> 1: the best configuration needs less): median "
            f"{result['ratio_median']:.2f}x [{low:.2f}, {high:.2f}] (95% bootstrap)."
        )
    lines += ["", f"**{paired['verdict']}**"]
    return "\n".join(lines) + "\n"


def controller_summary(result: dict, space: list[Param], optuna_study, best_path: Path, *, top: int = 10) -> str:
    """``summary.md`` of ``rlpilot tune --controller``: the trials best first, the check (tuned against
    commissioned on the same fresh episodes, with its verdict) and the best arguments."""
    from optuna.trial import TrialState

    tuning = result["tuning"]
    first, last = tuning["seed_start"], tuning["seed_start"] + tuning["episodes"] - 1
    trials = [t for t in optuna_study.trials if t.state == TrialState.COMPLETE]
    trials.sort(key=lambda t: -t.value)
    lines = [
        f"# rlpilot tune {result['env']} --controller {result['controller']}",
        "",
        "Search space: " + "; ".join(p.describe() for p in space) + f". Tuning episodes {first}-{last}.",
        "",
        "## Trials (best first)",
        "",
        f"| trial | arguments | mean return, episodes {first}-{last} |",
        "|---|---|---|",
        *(f"| {t.number} | {params_text(t.params)} | {fmt(t.value)} |" for t in trials[:top]),
    ]
    if "check" in result:
        check = result["check"]
        low, high = check["interval"]
        episodes = f"{check['seed_start']}-{check['seed_start'] + check['episodes'] - 1}"
        lines += [
            "",
            "## Check: tuned against commissioned on the same fresh episodes",
            "",
            f"| controller | mean return, episodes {episodes} |",
            "|---|---|",
            f"| tuned ({params_text(result['best'])}) | {fmt(result['check_tuned']['mean_return'])} |",
            f"| commissioned ({params_text(check['commissioned']) or 'its defaults'}) | "
            f"{fmt(result['check_commissioned']['mean_return'])} |",
            f"| tuned - commissioned, per episode | {signed(check['mean'])} [{signed(low)}, {signed(high)}] |",
            "",
            "Commissioned: the controller built from `--controller-kwargs` (the constructor's defaults for the "
            "searched arguments). Both played the same episodes, none of them a tuning episode; the interval is a "
            f"95% paired bootstrap of the mean difference ({BOOTSTRAP_SAMPLES} resamples of the episodes); each "
            "episode's difference is in `tune.json`.",
            "",
            f"**{check['verdict']}**",
        ]
    lines += ["", f"## Best arguments: `{best_path}`", "", f"    {params_text(result['best'])}", ""]
    return "\n".join(lines)


def summarize(study: Study, optuna_study, *, check_result: dict | None = None) -> dict:
    rows = trial_rows(study, optuna_study)
    complete = [r for r in rows if r["state"] == "complete"]
    importance = importances(optuna_study) if len(complete) >= 2 else {}
    text = f"# rlpilot tune {study.spec.preset}\n\nSearch space: " + "; ".join(p.describe() for p in study.spec.space)
    text += f". Start: {' '.join(study.spec.overrides) or 'the preset'}.\n\n## Trials (best first)\n\n"
    text += study_table(study, rows)
    if importance:
        text += "\n## Parameter importance (Optuna's default evaluator, PED-ANOVA)\n\n" + "\n".join(
            f"- {name}: {value:.2f}" for name, value in importance.items()
        )
        text += "\n"
    if check_result is not None:
        text += "\n## Check: best against start on the same fresh seeds\n\n" + check_table(study, check_result)
    result = {"rows": rows, "importance": importance, "check": check_result, "text": text}
    if complete:
        best_path, command = write_best(study, complete[0]["params"])
        result.update(best_path=str(best_path), command=command, best=complete[0])
        text += f"\nBest configuration: `{best_path}`\n\n    {command}\n"
    result["text"] = text = redact(text)  # printed too; the --set values a search starts from may hold a secret
    atomic_write(study.out / "summary.md", text)
    atomic_write(
        study.out / "summary.json",
        dumps({k: v for k, v in result.items() if k != "text"}, indent=2) + "\n",
    )
    plot_study(study, optuna_study, importance, study.out / "history.png")
    return result
