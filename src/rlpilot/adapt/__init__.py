"""``rlpilot train adapt PLANT --controller mod:Class --param k=lo:hi[:log]``: learned adaptation for any plant that
declares its conditions (docs/adapt.md).

1. **Robust reference**: the controller's arguments tuned once for plants sampled over the declared ranges
   (:func:`rlpilot.reference.tune_reference`, ``kind="robust"``). They become the base controller's arguments
   (``env.base_controller_kwargs``), so the student's action 0 is the robust controller: its safe fallback.
2. **Teacher**: a table of plants (the named conditions, then draws), the controller retuned for each (the oracle),
   labelled with the gain schedule's action that turns the robust controller into it (:mod:`rlpilot.adapt.teacher`);
   cached by its settings in ``RUNS/adapt-teachers/`` (a file per plant and controller) and copied into the run
   directory (``teacher.json``).
3. **Student**: a PPO run's actor with ``env.residual_mode=gains`` and ``env.history``, trained by DAgger on the
   table's plants (:mod:`rlpilot.adapt.dagger`) through the one training loop, so the run directory is a PPO run's
   (``rlpilot eval``, ``export`` and ``compare --run`` read it unchanged), with the fallback's envelope in its actor
   (``model.fallback_margin``).
"""

from __future__ import annotations

import math
import shutil
import sys
import time
from dataclasses import replace
from functools import partial
from pathlib import Path

from rlpilot.adapt.dagger import DaggerTrainable
from rlpilot.adapt.settings import AdaptSettings
from rlpilot.adapt.teacher import TABLE_FILE, TeacherTable, draw_conditions, identity, label
from rlpilot.arguments import CORES
from rlpilot.common.errors import UserError
from rlpilot.common.files import file_name
from rlpilot.config.load import load_config
from rlpilot.control.trainable import ControlTrainable
from rlpilot.loop.trainer import train
from rlpilot.reference import controller_defaults, side_by_side, tune_reference
from rlpilot.reference.play import Objective, play_candidates
from rlpilot.reference.search import BUDGETS
from rlpilot.runs import Run
from rlpilot.tune.space import Param

STUDENT_LAYERS = "[256, 256]"
"""The student's (and its critic's) layers where ``--set model.hidden_sizes`` does not set them. With 4 episodes a
plant and the average over the episode, the heated tank's student went from 1.05-4.68x the fine oracle on its named
plants to 1.01-2.74x (docs/replace-pid.md's answers, before and after)."""
STUDENT_THREADS = min(CORES, 2)
"""torch threads of the student's run where ``--set train.num_threads`` does not set them: DAgger's cost is its
regression (a 256-256 network on 32 steps of history), which two threads took 1.7x faster than one on this idle
2-core machine (4.0 to 2.4 ms a minibatch of 256); more threads are not measured."""
FIXED = ("env.base_controller", "env.base_controller_kwargs", "env.residual_mode", "env.condition_sampled")
"""What ``train adapt`` sets itself: the student schedules the robust controller's gains on sampled plants."""
SETTING_KEYS = {
    "history": ("env.history",),
    "scale": ("env.residual_scale",),
    "average": ("env.gain_average", "env.gain_excitation"),
    "excitation": ("env.gain_excitation",),
    "weights": ("env.gain_weights",),
    "fallback_margin": ("model.fallback_margin",),
}
"""The adapt settings that set a key of the student's config: one the user gives on the command line goes over what a
preset's sections set there."""


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def adapt_config(
    plant: str,
    controller: str,
    overrides: list[str],
    settings: AdaptSettings,
    preset: str | None = None,
    chosen: frozenset[str] = frozenset(),
):
    """The PPO run's config: a gain schedule of ``controller`` on ``plant`` sampled over its declared ranges, with a
    history and the fallback (``settings``' defaults where ``overrides`` leave them), the user's ``--set`` over it;
    from ``preset``'s sections where it names one (what they set stands over the defaults, but not over an adapt
    setting the user gave: ``chosen``, its names)."""
    from rlpilot.config.load import load_preset_data

    given = {item.partition("=")[0].strip() for item in overrides}
    if clash := sorted(given & set(FIXED)):
        raise UserError(f"--set {clash[0]}: train adapt sets it itself (the robust {controller} as the base)")
    if preset is not None:
        data = load_preset_data(preset)
        given |= {f"{name}.{key}" for name, section in data.items() if isinstance(section, dict) for key in section}
        given -= {key for name in chosen for key in SETTING_KEYS.get(name, ())}
    defaults = {
        "env.history": settings.history,
        "env.residual_scale": settings.scale,
        "env.gain_average": settings.average,
        "model.hidden_sizes": STUDENT_LAYERS,
        "env.gain_weights": str(settings.weights).lower(),
        "env.gain_excitation": settings.excitation if settings.average else 0,
        "model.fallback_margin": settings.fallback_margin,
        "env.normalize_obs": "true",
        "env.backend": "sync",
        "train.num_threads": STUDENT_THREADS,
    }
    items = [f"{key}={value}" for key, value in defaults.items() if key not in given]
    items += [f"env.base_controller={controller}", "env.residual_mode=gains", "env.condition_sampled=true"]
    if preset is not None:
        return load_config(preset, overrides=[*items, *overrides])
    return load_config(algo="ppo", env_id=plant, overrides=[*items, *overrides])


SLOPE_STEP = 0.1
"""How far ``adapt.shaped`` moves each gain off the oracle's to measure the cost's growth, in actions (0.1 at the
default 1.5 decades: 1.41x)."""
SLOPE_FLOOR = 0.01
"""The least cost growth a step counts (the oracle is searched on these episodes, so a step from it costs about 0 or
more; a log ratio below this, noise, counts as this)."""
SLOPE_CAP = math.log(100.0)
"""The most cost growth a step counts: a step into instability (a cost 100 times the oracle's, or none finite) weighs
as much as one 100 times worse, not without bound."""


def _growth(cost: float, base: float) -> float:
    """The log of ``cost / base`` within [:data:`SLOPE_FLOOR`, :data:`SLOPE_CAP`]; the cap where ``cost`` is not
    finite, the floor where ``base`` is not a positive finite cost (nothing to measure against)."""
    if not (math.isfinite(base) and base > 0):
        return SLOPE_FLOOR
    if not math.isfinite(cost):
        return SLOPE_CAP
    return min(max(math.log(cost / base) if cost > 0 else SLOPE_FLOOR, SLOPE_FLOOR), SLOPE_CAP)


def cost_slopes(plain, controller: str, kwargs: dict, names: tuple[str, ...], scale: float, seeds, objective):
    """Per gain of ``names``, [short, past]: the log of the cost ratio of the controller built with ``kwargs`` (the
    oracle of ``plain``'s condition) with that gain moved :data:`SLOPE_STEP` of an action down or up, against its
    own cost, on ``seeds``, over the step squared (:func:`_growth`: between :data:`SLOPE_FLOOR` and
    :data:`SLOPE_CAP` over it). A gain ``kwargs`` lacks or holds at 0 gets 1 either side."""
    candidates, moved = [kwargs], []
    for name in names:
        if isinstance(kwargs.get(name), (int, float)) and kwargs[name] > 0:
            moved.append(name)
            candidates += [{**kwargs, name: kwargs[name] * 10 ** (sign * scale * SLOPE_STEP)} for sign in (-1, 1)]
    costs = [
        float(objective.per_episode(r).mean()) for r in play_candidates(plain, controller, candidates, seeds=seeds)
    ]
    slopes = {name: [1.0, 1.0] for name in names}
    for index, name in enumerate(moved):
        short, past = costs[1 + 2 * index : 3 + 2 * index]
        slopes[name] = [_growth(c, costs[0]) / SLOPE_STEP**2 for c in (short, past)]
    return [slopes[name] for name in names]


def gain_names(env_cfg, controller: str, fixed: dict) -> tuple[str, ...]:
    """The controller's ``gain_names`` (what the student schedules); one line where it has none."""
    from rlpilot.envs.catalogue import base_controller

    names = tuple(getattr(base_controller(controller, env_cfg.id, fixed), "gain_names", ()) or ())
    if not names:
        raise UserError(
            f"train adapt: controller '{controller}' names no gain_names (the gains a schedule multiplies); give its "
            "class a gain_names tuple (docs/your-controller.md)"
        )
    return names


def tune_condition(
    plain, controller, space, fixed, name, condition, oracle, slopes, *, seeds, start, budget, names, scale
) -> dict:
    """One plant of the teacher's table: its oracle searched from ``start`` (``oracle``, the cached one, where it is
    not ``None``) and, ``slopes``, the cost's growth around it (:func:`cost_slopes`, gains moved in decades of
    ``scale``). A module function: the teacher's plants are searched side by side (:func:`side_by_side`)."""
    objective, started, evaluated = Objective(), time.perf_counter(), 0
    if oracle is None:
        found = tune_reference(
            plain, controller, space, fixed, kind="oracle", condition_name=name, condition=condition, seeds=seeds,
            objective=objective, starts=[start], batch=budget[0], rounds=budget[1], refine_rounds=budget[2],
        )  # fmt: skip
        oracle, evaluated = found.kwargs, found.evaluated
    result = {"oracle": oracle, "evaluated": evaluated, "seconds": time.perf_counter() - started, "slopes": None}
    if slopes:
        plant = replace(plain, condition=condition)
        result["slopes"] = cost_slopes(plant, controller, {**fixed, **oracle}, names, scale, seeds, objective)
    return result


def teacher_table(
    env_cfg, controller: str, space: list[Param], fixed: dict, settings: AdaptSettings, cache: Path, declared
) -> TeacherTable:
    """The robust reference and the oracle of every plant of the table, tuned here or read back from ``cache``."""
    plain = replace(env_cfg, base_controller="none", history=0, normalize_obs=False, condition_sampled=False)
    key = identity(
        env=plain.id,
        kwargs=plain.kwargs,
        controller=controller,
        space=[vars(p) for p in space],
        fixed=fixed,
        conditions=settings.conditions,
        seed=settings.seed,
        episodes=[settings.tuning_episodes, settings.robust_episodes],
        search=[settings.search, settings.robust_search],
    )
    table = TeacherTable.load(cache, key)
    seeds, objective = list(range(settings.tuning_episodes)), Objective()
    keys = {p.key for p in space}
    starts = [{k: v for k, v in controller_defaults(plain.id, controller, fixed, space).items() if k in keys}]
    if not table.robust:
        started = time.perf_counter()
        batch, rounds, refine = BUDGETS[settings.robust_search]
        robust = tune_reference(
            plain, controller, space, fixed, kind="robust", condition_name="sampled", condition={},
            seeds=list(range(settings.robust_episodes)), objective=objective, starts=starts, batch=batch,
            rounds=rounds, refine_rounds=refine,
        )  # fmt: skip
        table.robust, table.seconds = robust.kwargs, table.seconds + time.perf_counter() - started
        table.save(cache)
        _say(f"robust reference: {robust.evaluated} candidates in {robust.seconds:.0f} s")
    names = gain_names(env_cfg, controller, {**fixed, **table.robust})
    table.conditions = draw_conditions(declared, settings.conditions, settings.seed)
    step = env_cfg.residual_scale * SLOPE_STEP  # decades a slope's step moves a gain: another scale, other slopes
    if settings.shaped and table.slope_step != step:
        table.slopes, table.slope_step = {}, step
    budget = BUDGETS[settings.search]
    start = {k: table.robust[k] for k in keys}
    jobs = [
        (name, condition, settings.shaped and name not in table.slopes)
        for name, condition in table.conditions.items()
        if name not in table.oracles or (settings.shaped and name not in table.slopes)
    ]
    plant = partial(  # what every plant's search shares
        tune_condition, plain, controller, space, fixed, seeds=seeds, start=start, budget=budget, names=names,
        scale=env_cfg.residual_scale,
    )  # fmt: skip
    calls = [partial(plant, name, condition, table.oracles.get(name), slopes) for name, condition, slopes in jobs]
    count, last = len(table.conditions), [time.perf_counter()]
    order = list(table.conditions)

    def keep(index: int, found: dict) -> None:  # in this process, as each plant's search ends: cached at once
        name = jobs[index][0]
        table.oracles[name] = found["oracle"]
        if found["slopes"] is not None:
            table.slopes[name] = found["slopes"]
        now = time.perf_counter()  # the teacher's cost is the time waited for it, whatever the processes
        table.seconds, last[0] = table.seconds + now - last[0], now
        table.save(cache)
        if found["evaluated"]:
            where = f"[{order.index(name) + 1}/{count}] oracle {name}"
            _say(f"{where}: {found['evaluated']} candidates in {found['seconds']:.0f} s")

    workers = min(settings.workers or CORES, len(calls))
    if workers > 1:
        _say(f"teacher: {len(calls)} plants to tune on {workers} processes")
    side_by_side(calls, workers, keep)
    for name in table.conditions:
        table.labels[name] = label(table.oracles[name], table.robust, names, env_cfg.residual_scale)
    table.save(cache)
    return table


ROLLOUT_PROBE_SEED = 199_999


def horizon(env_cfg, controller: str, kwargs: dict) -> int:
    """Steps of one episode of the robust controller on the first sampled plant: DAgger's horizon per iteration."""
    plain = replace(env_cfg, base_controller="none", history=0, normalize_obs=False)
    (result,) = play_candidates(plain, controller, [kwargs], seeds=[ROLLOUT_PROBE_SEED])
    return int(result.lengths[0])


def teacher_cache(run_root, plant: str, controller: str) -> Path:
    """``RUNS/adapt-teachers/PLANT--CONTROLLER.json``: one table per plant and controller, so that distilling two
    controllers of one plant keeps both teachers (one file per plant would evict the other's at every switch)."""
    return Path(run_root) / "adapt-teachers" / f"{file_name(plant)}--{file_name(controller)}.json"


def train_adapt(
    plant: str,
    controller: str,
    space: list[Param],
    fixed: dict,
    *,
    overrides: list[str],
    settings: AdaptSettings,
    run_root: str = "runs",
    run_dir: str | None = None,
    show_progress: bool = True,
    origin: dict | None = None,
    preset: str | None = None,
    chosen: frozenset[str] = frozenset(),
) -> Run:
    """The three stages (module docstring); the run directory of the student (from ``preset``'s sections where it
    names one: ``rlpilot train PRESET`` of a preset with an ``adapt`` section)."""
    from rlpilot.envs.make import declaration

    if not space:
        raise UserError("train adapt: name the controller arguments the references search, --param kp=0.1:100:log")
    config = adapt_config(plant, controller, overrides, settings, preset, chosen)
    declared = declaration(replace(config.env, condition_sampled=False), option="train adapt")
    gain_names(config.env, controller, fixed)  # before any tuning: a controller without gains is one line now
    cache = teacher_cache(run_root, plant, controller)
    table = teacher_table(config.env, controller, space, fixed, settings, cache, declared)
    config.env.base_controller_kwargs = {**fixed, **table.robust}
    steps = horizon(config.env, controller, config.env.base_controller_kwargs)
    frames = steps * len(table.labels) * settings.episodes  # one DAgger iteration
    config.train.total_frames = frames * settings.iterations
    config.train.eval_every_frames = config.train.log_every_frames = frames
    config.train.checkpoint_every_frames = frames
    config.train.eval_at_start = True  # frame 0: the robust controller alone (action 0)
    config.validate()

    def build(config, *, device, seed, state, event, **_):
        inner = ControlTrainable(config, device=device, seed=seed, state=state, event=event)
        return DaggerTrainable(config, inner, table=table, settings=settings, horizon=steps)

    run = train(config, run_root=run_root, run_dir=run_dir, show_progress=show_progress, origin=origin, builder=build)
    shutil.copyfile(cache, run.path / TABLE_FILE)
    run.update_meta(
        adapt={"teacher_s": round(table.seconds, 2), "settings": vars(settings), "conditions": len(table.labels)}
    )
    return run
