"""What ``rlpilot train adapt`` does besides the PPO run's own config: ``--set adapt.KEY=VALUE`` (torch-free)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from rlpilot.common.errors import UserError
from rlpilot.config.fields import at_least, between, field_problems, fraction, positive


@dataclass
class AdaptSettings:
    conditions: int = between(32, 1, 1024)
    """Plants in the teacher's table: the env's named conditions first, then draws from the declared ranges
    (seeded). Each costs one oracle search, the teacher's whole cost."""
    tuning_episodes: int = between(8, 1, 1024)
    """Episodes each oracle is tuned on (seeds 0..N-1, as ``rlpilot compare``'s tuning episodes: never the ones
    compare measures on)."""
    robust_episodes: int = between(32, 1, 1024)
    """Episodes the robust reference is tuned on (seeds 0..N-1): ``rlpilot compare``'s default ``--tuning-episodes``.
    With ``robust_search`` fine (compare's default search) it is the robust controller compare measures every row
    against, so the student's fallback is that reference. Tuned on 8 episodes, the arm's robust PD came out at kp
    3.21, kd 0.146 against compare's 2.73, 0.160: under a two-step delay (beyond the declared range) the student,
    no worse than its own fallback there, was 1.42x compare's."""
    search: str = dataclasses.field(default="quick", metadata={"choices": ("quick", "fine")})
    """How long each oracle searches (``rlpilot compare --search``: quick is 8 candidates a round, 3 TPE rounds, 6
    refinement rounds; fine 16, 6 and 12). On the heated tank ``fine`` brought the student within 1.1x of the
    oracle on 3 of 5 named plants (``quick``: 2), its 24 searches taking 451 s on one core (docs/adapt.md)."""
    robust_search: str = dataclasses.field(default="fine", metadata={"choices": ("quick", "fine")})
    """How long the robust reference searches: ``fine`` by default, it is the fallback, tuned once."""
    workers: int = between(0, 0, 256)
    """Processes the teacher's oracles are searched on, side by side, one plant each at a time (0: one per core). The
    oracles do not depend on it (each plant's search is seeded alone); the teacher's cost counted is the time waited
    for them."""
    history: int = between(32, 1, 64)
    """``env.history`` of the student when ``--set env.history`` does not set it: the steps of [observation, action]
    it identifies the plant from (on the heated tank, whose time constants run to 150 s: 4 steps left the student
    worse than the robust controller on 4 of 5 named plants; 32 and 64 steps both put it below it on all 5)."""
    average: int = between(1000, 0, 1_000_000)
    """``env.gain_average`` when ``--set`` does not set it: the controller runs on the student's gains averaged over
    the episode so far (earlier steps fading with this time constant in steps). Each step's output is a noisy
    estimate of one plant's oracle, and the plant is one plant for the whole episode. 0: every step's own
    gains."""
    excitation: int = between(32, 0, 100_000)
    """``env.gain_excitation`` when ``--set`` does not set it: each step's estimate weighs in the episode's average as
    much as the command moved lately (over about this many steps) against its most this episode, so the estimates a
    settled plant gives, from a history that shows little of it, barely move the gains the last transient taught.
    On the arm under a one-step delay the student's estimates drift up once the arm settles, and the loop, a few
    percent from instability there, starts to oscillate: 32 took it from 3.1x to 2.1x the oracle (docs/adapt.md).
    0: every step weighs alike."""
    weights: bool = False
    """``env.gain_weights`` when ``--set`` does not set it: the student also weighs each step's estimate by how sure
    it is (learnt by likelihood on its own errors), the average weighted by them."""
    scale: float = positive(1.5)
    """``env.residual_scale`` when ``--set`` does not set it: decades a gain may move either way (1.5: from 1/30 to
    30 times the robust gain; the heated tank's oracles sit within 1.2 decades of its robust tuning, 17 of the DC
    motor's 96 lie beyond 1.5, and a label beyond the scale is clipped: ``adapt.scale=2`` there)."""
    warmup: int = between(0, 0, 100_000)
    """Steps at an episode's start labelled with the robust controller (action 0) instead of the plant's oracle, and
    played so by the teacher: what the student should do before its history can tell the plant apart (0: the oracle
    from the first step). On the arm (docs/adapt.md) 20 took the student under a one-step delay from 10.7x to 7.9x
    the robust PD's error and beyond the range (two steps) from 1.20x to 1.08x, and cost it under a weak motor
    (0.45x to 0.71x): the early robust steps weigh in the episode's average too."""
    iterations: int = between(8, 1, 100)
    """DAgger iterations: the first rolls out the teacher's actions, each later one the student's own. On the arm
    (docs/robot-arm.md) 8, 16 and 32 took the student's label error to 0.081, 0.063 and 0.053 of an action and its
    error under a one-step delay to 2.10x, 1.35x and 1.17x the oracle's, the stiff arms from 2.2-2.4x to 1.9-2.3x,
    each doubling the DAgger time: the arm's command sets 16."""
    episodes: int = between(4, 1, 64)
    """Episodes per condition per iteration (one env per condition and episode, side by side). On the arm 12 halved
    the student's error on fresh episodes' labels against 4 (0.097 to 0.062 of an action) and under a one-step delay
    (11.4x to 5.5x the oracle), no worse elsewhere, at three times the DAgger time (docs/robot-arm.md)."""
    beta: float = fraction(0.5)
    """Iteration ``i`` acts with the teacher's action on a share ``beta ** i`` of the steps (1 at the first), with the
    student's own greedy action on the rest: the visited states drift towards the student's."""
    epochs: int = between(30, 1, 10_000)
    """Passes over the aggregated data at each iteration (the student is trained on, not from scratch)."""
    samples: int = between(0, 0, 10**9)
    """Samples the regression draws per iteration, at random from all the data gathered so far (0: ``epochs`` passes
    over all of it, a cost growing with every iteration; on the arm with 12 episodes a plant, the regression took
    ~22 s more at each iteration, 792 s of DAgger's 854; 1,728,000, the first iteration's 30 passes, took DAgger to
    271 s at a small loss: docs/robot-arm.md)."""
    caution: float = at_least(0.0, 0.0)
    """Extra weight, in the regression, on a student's estimate that lies beyond the teacher's label away from the
    robust controller (action 0): the loss weighs such an error ``1 + caution`` times. Where its history cannot yet
    tell plants apart, the student's estimate leans to the robust gains (an expectile, not the mean, of the labels
    it cannot separate); where it can, the label is still the minimum. An oracle sits near the edge of what its
    plant tolerates (the delayed arm: gains 1.2x the robust PD's track 8.5x worse), so an estimate past it costs
    more than one short. On the arm (docs/robot-arm.md), every step weighing alike, 0, 3 and 10 took the student from
    1.18x to 1.05x and 0.84x the robust PD's error on sampled arms, and under a one-step delay from 6.0x to 4.3x
    and 3.1x the oracle's, at 1.6-2.0x, 1.7-1.9x and 2.1-2.3x the oracle on the stiff named arms: the arm's command
    sets 10. Where the robust controller is far from every oracle it costs: on the heated tank 10 took the student
    from 1.10x to 1.79x the oracle on the nominal tank (docs/replace-pid.md). 0 (the default): plain mean squared
    error."""
    shaped: bool = False
    """The regression weighs a student's error by what it costs the plant: per plant and gain, the log of the cost
    ratio of the oracle with that gain moved :data:`rlpilot.adapt.SLOPE_STEP` of an action below or above the
    label, against the oracle's own (measured on the tuning episodes, cached with the table), over the step squared;
    the side the estimate lies on chooses which. Where its history cannot tell plants apart, the student settles on
    the gains that cost the plants it confuses least in sum (to second order), not on the mean of their labels:
    past a delayed arm's oracle gains it stays far more careful than past a nominal arm's. Each gain's weights are
    scaled to a mean of 1 over the table's plants and both sides. Off by default."""
    early: int = between(0, 0, 100_000)
    """The first ``early`` steps of every episode weigh, in the regression, as much as the rest of it together (each
    sample ``(length - early) / early`` times, ``length`` the DAgger horizon; 0: every step alike). An episode's
    first steps decide much of its error on a plant whose episodes start with their largest error (the arm: one step
    at the robust gains, the rest at the oracle's, tracks 1.8x the oracle), and they are a few percent of the
    samples: with every step alike the arm's student takes about 3 times the robust kp over its first 8 steps on
    every undelayed arm, whatever its oracle (2.8 to 15 times)."""
    lr: float = positive(1e-3)
    """Adam's learning rate for the regression."""
    minibatch: int = between(256, 1, 1_000_000)
    """Samples per gradient step of the regression."""
    fallback_margin: float = at_least(1.0, 0.0)
    """``model.fallback_margin`` when ``--set`` does not set it: standard deviations beyond the range of the student's
    DAgger inputs where it falls back to the robust gains (0: no fallback)."""
    seed: int = between(0, 0, 2**31 - 1)
    """The draws of the table's conditions and the DAgger episodes' seeds."""


def read_settings(items: list[str]) -> AdaptSettings:
    """``adapt.KEY=VALUE`` items (YAML values) as :class:`AdaptSettings`, each checked against its declaration;
    an unknown key or a bad value is one line."""
    from rlpilot.config.safe_yaml import load

    settings = AdaptSettings()
    fields = {f.name: f for f in dataclasses.fields(AdaptSettings)}
    for item in items:
        key, sep, text = item.partition("=")
        name = key.strip().removeprefix("adapt.")
        if not sep or name not in fields:
            raise UserError(f"--set {item}: adapt settings are adapt.KEY=VALUE, KEY one of {', '.join(fields)}")
        value = load(text, source=f"--set {key}")
        kind = type(getattr(settings, name))
        if kind is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if not isinstance(value, kind) or isinstance(value, bool) != (kind is bool):
            raise UserError(f"--set {item}: adapt.{name} is a {kind.__name__}")
        if problems := field_problems(f"adapt.{name}", value, fields[name].metadata):
            raise UserError(problems[0])
        setattr(settings, name, value)
    return settings
