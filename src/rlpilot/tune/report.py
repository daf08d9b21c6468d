"""What a study of ``rlpilot tune`` reports: its trials best first with bootstrap intervals, parameter
importances, the history figure, ``best.yaml``, and the closing check's table."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from rlpilot.config.load import load_config
from rlpilot.files import dumps
from rlpilot.redact import redact
from rlpilot.runs import atomic_write
from rlpilot.stats import BOOTSTRAP_SAMPLES, bootstrap
from rlpilot.tune.space import AGGREGATES
from rlpilot.tune.study import Study, fmt, trial_overrides


def interval(values: list[float], aggregate: str) -> tuple[float, float]:
    """95% bootstrap interval of the aggregate over seeds (NaN for fewer than two)."""
    return bootstrap(np.array(values, dtype=float), AGGREGATES[aggregate])


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
    what = {"frames": "frames to solved", "time": "wall s to solved", "return": "final greedy return"}[spec.objective]
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
    spec = study.spec
    seeds = result["seeds"]
    lines = [
        f"| configuration | solved | {spec.aggregate} of {spec.objective} [95% CI] | per seed |",
        "|---|---|---|---|",
    ]
    for arm, data in result["arms"].items():
        low, high = data["interval"]
        lines.append(
            f"| {arm} ({' '.join(data['overrides']) or 'preset'}) | {data['solved']}/{len(seeds)} | "
            f"{fmt(data['value'])} [{fmt(low)}, {fmt(high)}] | {', '.join(fmt(s) for s in data['scores'])} |"
        )
    lines.append("")
    if "ratio_median" in result:
        low, high = result["ratio_interval"]
        lines.append(
            "Paired ratio start/best per seed (> 1: the best configuration needs less; a lower bound where the "
            "start did not solve, since it is scored at the budget): median "
            f"{result['ratio_median']:.2f}x [{low:.2f}, {high:.2f}] (95% bootstrap)."
        )
    lines.append(f"Check seeds {seeds[0]}-{seeds[-1]}: none of them a tuning seed ({spec.seeds[0]}-{spec.seeds[-1]}).")
    return "\n".join(lines) + "\n"


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
        text += "\n## Check on fresh seeds\n\n" + check_table(study, check_result)
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
