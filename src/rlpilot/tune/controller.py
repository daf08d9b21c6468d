"""Classical tuning of a controller's gains: ``rlpilot tune ENV --controller package.module:Class --param ...``:
each trial plays the controller built with the sampled constructor arguments on the tuning episodes; the best is
checked against the commissioned arguments on the same fresh episodes (paired, with a verdict) and written as
``best.yaml`` (``env.base_controller`` and its kwargs), with ``summary.md``."""

from __future__ import annotations

from dataclasses import asdict, replace
from pathlib import Path

import numpy as np
import yaml

from rlpilot.common.errors import UserError
from rlpilot.common.files import atomic_write, dumps
from rlpilot.common.redact import redact
from rlpilot.config import safe_yaml
from rlpilot.config.fields import field_problems
from rlpilot.stats import bootstrap
from rlpilot.tune.report import controller_summary, paired_check, params_text
from rlpilot.tune.space import Param, once_each, parse_range
from rlpilot.tune.study import nothing_left_on_error, open_storage, quiet_optuna, study_address


def corners(space: list[Param]) -> list[dict]:
    """Arguments at the edges of ``space``: every range at its low, then at its high, each choice once."""
    low = {p.key: p.low if p.choices is None else p.choices[0] for p in space}
    high = {p.key: p.high if p.choices is None else p.choices[-1] for p in space}
    return [low, high, *({**low, p.key: choice} for p in space for choice in (p.choices or [])[1:-1])]


def controller_space(params: list[str]) -> list[Param]:
    """``--param kp=0.1:100:log`` (a range of a constructor argument) or ``--param mode=a,b`` (choices)."""
    space = []
    for item in params:
        key, sep, value = (part.strip() for part in item.partition("="))
        if not sep or not key or not value:
            raise UserError(f"--param expects key=low:high[:log] or key=a,b,c, got '{item}'")
        if "," in value:  # each choice as YAML reads it (2.0 a number, pd a string), finite
            try:
                choices = [safe_yaml.load(c.strip(), source=f"--param {key}") for c in value.split(",") if c.strip()]
            except yaml.YAMLError as exc:
                raise UserError(f"--param {key}: a choice is not a YAML value ({str(exc).splitlines()[0]})") from None
            if any(isinstance(c, (dict, list)) or c is None for c in choices):
                raise UserError(f"--param {key}={value}: each choice is a number or a word (a,b,c)")
            if problems := field_problems(f"--param {key}", choices, {"finite_items": True}):
                raise UserError(problems[0])
            space.append(Param(key=key, choices=choices))
            continue
        space.append(parse_range(key, value))
    if not space:
        raise UserError("rlpilot tune --controller needs a search space: --param kp=low:high[:log] (repeatable)")
    return once_each(space)


def tune_controller(
    env_cfg,
    controller: str,
    space: list[Param],
    *,
    fixed: dict,
    trials: int,
    episodes: int,
    seed_start: int,
    check_episodes: int,
    check_seed_start: int,
    out: str | Path,
    storage: str | None = None,
) -> dict:
    """The controller's constructor arguments searched with Optuna (TPE) on ``env_cfg``: each trial is the mean
    return of ``episodes`` episodes from ``seed_start`` (the tuning episodes); the best is then played, with the
    commissioned arguments (``fixed``), on the same ``check_episodes`` fresh ones from ``check_seed_start``, and
    compared episode by episode (:func:`rlpilot.tune.report.paired_check`: the mean difference, its paired bootstrap
    interval, the verdict). Writes ``OUT/best.yaml`` (``env.base_controller`` and its kwargs: what train and eval
    build it from), ``OUT/tune.json`` and ``OUT/summary.md``; the same command again continues the study."""
    import optuna

    from rlpilot.control.evaluate import evaluate
    from rlpilot.play.episodes import PlayablePolicy

    tuning = set(range(seed_start, seed_start + episodes))
    if check_episodes and tuning & set(range(check_seed_start, check_seed_start + check_episodes)):
        raise UserError(f"--check-seed-start {check_seed_start}: the check episodes overlap the tuning episodes")
    plain = replace(env_cfg, base_controller="none", normalize_obs=False)

    def returns(kwargs: dict, count: int, seed: int) -> np.ndarray:
        policy = PlayablePolicy(plain, None, None, None, controller, {**fixed, **kwargs})
        env = policy.make_env(num_envs=min(count, 32), seed=seed)
        try:
            return evaluate(env, policy.policy_for(env), episodes=count, seed=seed).returns
        finally:
            env.close()

    for kwargs in corners(space):  # an argument the controller does not take, or refuses: one line, no study yet
        policy = PlayablePolicy(plain, None, None, None, controller, {**fixed, **kwargs})
        env = policy.make_env(num_envs=1, seed=seed_start)
        try:
            policy.policy_for(env)
        finally:
            env.close()
    out, name = Path(out), f"rlpilot-controller-{controller}"
    identity = {"env": asdict(plain), "controller": controller, "fixed": fixed, "episodes": episodes,
                "seed_start": seed_start, "space": [asdict(p) for p in space]}  # fmt: skip
    quiet_optuna()
    with nothing_left_on_error(out, study_address(out, storage), name):
        out.mkdir(parents=True, exist_ok=True)
        study = optuna.create_study(
            study_name=name,
            storage=open_storage(study_address(out, storage)),
            direction="maximize",
            sampler=optuna.samplers.TPESampler(seed=seed_start),
            load_if_exists=True,
        )
        if study.user_attrs.get("identity", identity) != identity:
            raise UserError(f"{out}: a study of other settings is stored there; use another --out")
        study.set_user_attr("identity", identity)
        remaining = trials - len([t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE])
        if remaining > 0:

            def objective(trial) -> float:  # arguments the controller raises at or acts NaN with: a failed trial
                try:
                    return float(returns({p.key: p.suggest(trial) for p in space}, episodes, seed_start).mean())
                except UserError as exc:
                    trial.set_user_attr("error", redact(str(exc)))
                    print(f"  trial {trial.number}: failed: {trial.user_attrs['error']}", flush=True)
                    return float("nan")  # Optuna fails it (its own warning is silenced: the line above says why)

            study.optimize(objective, n_trials=remaining)
    if not any(t.state == optuna.trial.TrialState.COMPLETE for t in study.trials):
        first = next((t.user_attrs["error"] for t in study.trials if "error" in t.user_attrs), "no trial ran")
        raise UserError(f"no trial of {len(study.trials)} completed; the first: {first}")
    best = dict(study.best_params)
    result = {"controller": controller, "env": plain.id, "trials": len(study.trials), "best": {**fixed, **best},
              "tuning": {"episodes": episodes, "seed_start": seed_start, "mean_return": study.best_value}}  # fmt: skip
    lines = [f"best of {len(study.trials)} trials on episodes {seed_start}-{seed_start + episodes - 1}: "
             f"{params_text(best)}  mean return {study.best_value:.4g}"]  # fmt: skip
    if check_episodes:  # both on the same episodes (evaluate seeds episode i with check_seed_start + i): paired
        arms = {"tuned": best, "commissioned": {}}  # commissioned: --controller-kwargs, the constructor's defaults
        played = {name: returns(kwargs, check_episodes, check_seed_start) for name, kwargs in arms.items()}
        for name, values in played.items():
            low, high = bootstrap(values, np.mean)
            result[f"check_{name}"] = {"mean_return": float(values.mean()), "interval": [low, high]}
        what = "tuned - commissioned, return per episode"
        paired = paired_check(played["tuned"], played["commissioned"], maximize=True, what=what)
        result["check"] = {"episodes": check_episodes, "seed_start": check_seed_start, "commissioned": fixed, **paired}
        lines += [f"check ({check_episodes} fresh episodes from {check_seed_start}, the same for both): mean return "
                  f"tuned {played['tuned'].mean():.4g}, commissioned {played['commissioned'].mean():.4g}",
                  paired["verdict"]]  # fmt: skip
    best_yaml = yaml.safe_dump({"env": {"base_controller": controller, "base_controller_kwargs": result["best"]}})
    atomic_write(out / "best.yaml", f"# rlpilot tune --controller {controller} on {plain.id}\n{best_yaml}")
    atomic_write(out / "tune.json", dumps(result, indent=2) + "\n")
    atomic_write(out / "summary.md", redact(controller_summary(result, space, study, out / "best.yaml")))
    lines.append(
        f"best: {out / 'best.yaml'} (train with it: --set env.base_controller_kwargs=...; eval: --controller-kwargs)"
    )
    lines.append(f"summary: {out / 'summary.md'}")
    result["text"] = redact("\n".join(lines))  # printed; the arguments a search starts from may hold a secret
    return result
