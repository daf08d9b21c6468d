"""The student of ``rlpilot train adapt``, trained by DAgger (Ross et al. 2011) as a trainable the loop runs.

The student is the actor of a PPO run with ``env.residual_mode=gains`` and ``env.history``: it reads the plant's
observation and its recent history, and schedules the robust controller's gains. One step of the loop is one DAgger
iteration: every plant of the teacher's table plays ``adapt.episodes`` envs side by side for a fixed horizon (a finished
episode starts again under the same plant), iteration 0 with the teacher's actions, iteration ``i`` with the teacher's
on a share ``beta ** i`` of the steps and the student's own greedy action on the rest; every visited observation is
labelled with the teacher's action for the TRUE plant of its env (the student never sees it), added to the data of the
earlier iterations (with ``adapt.warmup`` W, an episode's first W steps are labelled, and played by the teacher, with
the robust controller's action 0 instead), and the student regressed on all of it (the mean squared error of its greedy
action; the observation normaliser fitted on the data). Under ``env.gain_average`` (``adapt.average``, on by default)
the controller runs on its estimates fused over the episode; with ``env.gain_weights`` (``adapt.weights``) the student
also weighs each gain's estimate by how sure it is (:data:`SURE`, learnt by likelihood on its own errors). Its
Gaussian's spread is then set to its remaining error (:data:`MIN_STD`): a PPO refinement (``train --resume RUN --set
ppo.anchor_coef=C``) explores around the student as far as the student is unsure, not at PPO's initial spread of one
unit (gains scaled by up to 30x either way).
The fallback's envelope (``model.fallback_margin``,
:class:`rlpilot.control.models.Envelope`) is fitted on the same inputs.

What it writes is a PPO run's: the checkpoint holds the PPO algorithm's state (the student as its actor, a fresh
critic) and the normaliser, so ``rlpilot eval RUN``, ``rlpilot export RUN`` and ``rlpilot compare --run RUN`` read
it as any PPO run, and ``rlpilot train --resume RUN --frames N`` refines it with PPO from the student.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import torch

from rlpilot.adapt.settings import AdaptSettings
from rlpilot.adapt.teacher import TeacherTable
from rlpilot.config.schema import Config
from rlpilot.control.models import Envelope
from rlpilot.envs.make import make_vector_env, set_obs_norm
from rlpilot.loop.trainable import Evaluation, Step

MIN_STD = 0.02
"""The smallest exploration the student is left with: its Gaussian's standard deviation (before the squash) is set
to its root-mean-square error against the teacher's labels per action dimension, at least this."""
SURE = 0.1
"""Under ``env.gain_weights`` the student also gives each gain a weight, how sure it is of it: the weight is
``(SURE / sigma) ** 2`` for a student that expects to miss the teacher's action by ``sigma`` (a weight of 1, action
0, is a student unsure by 0.1), learnt as a Gaussian's variance by likelihood on its own errors."""
WEIGHT_STD = 0.1
"""The spread a PPO refinement starts the weight columns with."""
ROLLOUT_SEED = 200_000
"""DAgger's episodes play seeds from here (iteration ``i``: ``ROLLOUT_SEED + 1000 i``), apart from the references'
tuning seeds (0..) and ``rlpilot compare``'s evaluation seeds (10,000..)."""


class DaggerTrainable:
    """One DAgger iteration a step, on the plants of ``table`` (module docstring), training the actor of ``inner``
    (the PPO run's :class:`~rlpilot.control.trainable.ControlTrainable`, which evaluates and writes the checkpoint);
    ``horizon``: env steps each env plays an iteration."""

    def __init__(self, config: Config, inner, *, table: TeacherTable, settings: AdaptSettings, horizon: int):
        self.inner = inner
        self.algo, self.guard, self.settings, self.horizon = self.inner.algo, self.inner.guard, settings, horizon
        plants = [name for name in table.labels for _ in range(settings.episodes)]
        self.targets = torch.tensor([table.labels[name] for name in plants], dtype=torch.float32)
        self.gains = self.targets.shape[1]
        self.decades = float(config.env.residual_scale)
        self.weighted = config.env.gain_weights  # the actor's columns: the gains, then their weights
        self.teacher = torch.cat([self.targets, torch.zeros_like(self.targets)], 1) if self.weighted else self.targets
        self.slopes = None  # adapt.shaped: per env, per gain, [short, past], each gain's mean over the table 1
        if settings.shaped:
            slopes = torch.tensor([table.slopes[name] for name in plants], dtype=torch.float32)
            self.slopes = slopes / slopes.mean(dim=(0, 2), keepdim=True)
        self.vector_env = make_vector_env(
            replace(config.env, condition_sampled=False), len(plants), [table.conditions[name] for name in plants]
        )
        self.table_seconds = table.seconds
        self.inputs: list[torch.Tensor] = []
        self.labels: list[torch.Tensor] = []
        self.steps: list[torch.Tensor] = []  # the step of its episode each sample was seen at
        self.iteration = 0
        self.obs_norm: dict | None = None
        body = self.algo.actor_net.body
        self.envelope = body if isinstance(body, Envelope) else None
        self.optimizer = torch.optim.Adam(self.algo.actor_net.parameters(), lr=settings.lr)

    # -- the student -----------------------------------------------------------------------------
    def normalised(self, observation: torch.Tensor) -> torch.Tensor:
        return (observation - self.obs_norm["loc"]) / self.obs_norm["scale"]

    @torch.no_grad()
    def student(self, observation: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The student's greedy actions, and where its fallback acted."""
        inputs = self.normalised(observation)
        fell_back = self.envelope.outside(inputs).squeeze(-1) if self.envelope else torch.zeros(len(inputs), dtype=bool)
        return self.algo.greedy_module(inputs), fell_back

    # -- one iteration ---------------------------------------------------------------------------
    def rollout(self, teacher_share: float, seed: int) -> dict:
        """Every env for :attr:`horizon` steps; the visited observations and their teacher labels, the episodes that
        ended, and how often the student acted and fell back."""
        env, count = self.vector_env, self.vector_env.num_envs
        generator = torch.Generator().manual_seed(seed)
        raw, _ = env.reset(seed=seed)
        returns, lengths = np.zeros(count), np.zeros(count, dtype=np.int64)
        finished_returns, finished_lengths, observations = [], [], []
        student_steps = fallbacks = 0
        labels, steps = [], []
        for _ in range(self.horizon):
            observation = torch.as_tensor(np.asarray(raw), dtype=torch.float32)
            observations.append(observation)
            steps.append(torch.as_tensor(lengths.copy()))
            early = torch.as_tensor(lengths < self.settings.warmup)[:, None]  # the robust controller's steps
            action = torch.where(early, torch.zeros_like(self.teacher), self.teacher)
            labels.append(action[:, : self.gains])  # the teacher's gains are the label
            if teacher_share < 1.0:
                own, fell_back = self.student(observation)
                by_student = torch.rand(count, generator=generator) >= teacher_share
                action = torch.where(by_student[:, None], own, action)
                student_steps += int(by_student.sum())
                fallbacks += int((fell_back & by_student).sum())
            raw, reward, terminated, truncated, _ = env.step(action.numpy())
            returns += reward
            lengths += 1
            done = np.asarray(terminated) | np.asarray(truncated)
            if done.any():
                finished_returns += returns[done].tolist()
                finished_lengths += lengths[done].tolist()
                returns[done], lengths[done] = 0.0, 0
                raw, _ = env.reset(options={"reset_mask": done})
        return {
            "observations": torch.cat(observations),
            "labels": torch.cat(labels),
            "steps": torch.cat(steps),
            "returns": finished_returns,
            "lengths": finished_lengths,
            "fallback_share": fallbacks / max(student_steps, 1),
        }

    def regress(self) -> float:
        """The student fitted to every label so far (the normaliser and the envelope first refitted): ``epochs``
        passes over it, or ``samples`` drawn from it; the mean squared error of its final pass."""
        observations, labels = torch.cat(self.inputs), torch.cat(self.labels)
        plants = torch.arange(len(labels)) % self.vector_env.num_envs  # every rollout: one row of all envs a step
        early = self.settings.early
        weights = torch.ones(len(labels))
        if early:  # the first steps of an episode weigh as much as the rest of it together
            weights[torch.cat(self.steps) < early] = max(1.0, (self.horizon - early) / early)
        self.obs_norm = {"loc": observations.mean(0), "scale": observations.std(0).clamp_min(1e-4)}
        inputs = self.normalised(observations)
        if self.envelope is not None:
            self.envelope.armed.fill_(0.0)  # every sample teaches while it learns
        actor, size = self.algo.greedy_module, self.settings.minibatch
        for order in self.passes(len(inputs)):
            loss_sum = torch.zeros(())
            for start in range(0, len(order), size):
                index = order[start : start + size]
                out = actor(inputs[index])
                loss = self.regression_loss(out[:, : self.gains], labels[index], plants[index], weights[index])
                self.optimizer.zero_grad(set_to_none=True)
                (loss + self.weight_loss(out, labels[index]) if self.weighted else loss).backward()
                self.optimizer.step()
                loss_sum += loss.detach() * len(index)
        if self.envelope is not None:
            self.envelope.fit(inputs)
        with torch.no_grad():  # the student explores as far as it errs (PPO refining it: train --resume RUN)
            error = (actor(inputs)[:, : self.gains] - labels).pow(2).mean(0).sqrt().clamp(MIN_STD, 1.0)
            if self.weighted:
                error = torch.cat([error, torch.full_like(error, WEIGHT_STD)])
            self.algo.actor_net.log_std.copy_(error.log())
        for env in (self.inner.env, self.inner.eval_env):  # evaluation and the checkpoint read the same statistics
            set_obs_norm(env, self.obs_norm)
        return float(loss_sum) / len(order)

    def regression_loss(
        self, estimate: torch.Tensor, label: torch.Tensor, plants: torch.Tensor, weights: torch.Tensor | None = None
    ) -> torch.Tensor:
        """The squared error, ``1 + adapt.caution`` times where the estimate overshoots the label away from the
        robust controller (beyond it, on the far side from action 0, or across 0 from it); under ``adapt.shaped``
        weighed by the cost's slope on the estimate's side of the label for the sample's plant (``plants``: the
        env of each sample); each sample's by ``weights`` (``adapt.early``)."""
        error = (estimate - label).pow(2)
        if weights is not None:
            error = error * weights[:, None]
        if self.slopes is not None:
            slopes = self.slopes[plants]
            error = error * torch.where(estimate.detach() > label, slopes[..., 1], slopes[..., 0])
        if self.settings.caution:
            beyond = (estimate - label) * estimate.detach() > 0
            error = error * (1.0 + self.settings.caution * beyond)
        return error.mean()

    def passes(self, count: int):
        """The sample order of each pass of a regression over ``count`` samples: ``epochs`` permutations, or one draw
        of ``samples`` from all of them (a fixed cost an iteration)."""
        if self.settings.samples:
            return [torch.randint(count, (self.settings.samples,))]
        return (torch.randperm(count) for _ in range(self.settings.epochs))

    def weight_loss(self, out: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        """The weights' loss: the Gaussian negative log-likelihood of the student's (detached) errors, its variance
        ``SURE ** 2 / weight``, ``weight = 10 ** (decades * action)`` (:data:`SURE`)."""
        error = (out[:, : self.gains].detach() - labels).pow(2)
        log_variance = 2.0 * math.log(SURE) - self.decades * math.log(10.0) * out[:, self.gains :]
        return (error * torch.exp(-log_variance) + log_variance).mean()

    def step(self) -> Step:
        share = self.settings.beta**self.iteration if self.iteration else 1.0
        seed = ROLLOUT_SEED + 1000 * self.iteration + self.settings.seed
        played = self.rollout(share, seed)
        metrics = {"dagger/teacher_share": share, "dagger/iteration": float(self.iteration)}
        if self.obs_norm is not None:  # the student's error where it acts now, before it learns from it
            with torch.no_grad():
                own = self.algo.greedy_module(self.normalised(played["observations"]))
            metrics["dagger/label_error"] = float((own[:, : self.gains] - played["labels"]).abs().mean())
            metrics["dagger/fallback_share"] = played["fallback_share"]
        self.inputs.append(played["observations"])
        self.labels.append(played["labels"])
        self.steps.append(played["steps"])
        metrics["loss/regression"] = self.regress()
        metrics["dagger/samples"] = float(sum(len(x) for x in self.inputs))
        self.iteration += 1
        return Step(len(played["observations"]), metrics, played["returns"], played["lengths"])

    # -- the rest of the protocol ----------------------------------------------------------------
    def evaluate(self, index: int) -> Evaluation:
        return self.inner.evaluate(index)

    def facts(self) -> dict:
        return {**self.inner.facts(), "adapt": {"teacher_s": round(self.table_seconds, 2), "horizon": self.horizon}}

    def state_dict(self) -> dict:
        return self.inner.state_dict()  # its envs normalise with the student's statistics (regress)

    def load_state_dict(self, state: dict) -> None:
        self.inner.load_state_dict(state)

    def close(self) -> None:
        self.vector_env.close()
        self.inner.close()
