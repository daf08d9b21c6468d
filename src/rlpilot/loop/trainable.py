"""The protocol every kind of training implements; the loop (``rlpilot.loop.trainer``) knows nothing else.

Three Trainables exist: ``rlpilot.control.trainable.ControlTrainable`` (a vectorised env, a collector,
an algorithm such as PPO or DQN, a vectorised greedy evaluator), ``rlpilot.multiagent.trainable.
MultiAgentTrainable`` (a group of agents in a batched env, MAPPO/IPPO) and ``rlpilot.llm.grpo.GRPOTrainable``
(prompts, generation, GRPO updates, held-out evaluation). A new kind of training implements this protocol
and registers its builder in ``rlpilot.registry``; a new control algorithm implements
``rlpilot.control.algos.Algorithm`` instead and plugs into ControlTrainable.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from rlpilot.guard import Guard


@dataclass
class Step:
    """What one ``step`` (collect + learn once) did."""

    frames: int
    """Frames collected (env transitions; an LLM run: sampled responses)."""
    metrics: dict[str, float]
    """Scalar metrics of the step, namespaced (``loss/...``, ``ppo/...``, ``train/reward_mean``, ...)."""
    returns: list[float] = field(default_factory=list)
    """Returns of the training episodes that ended during the step (an LLM run: each response's reward)."""
    lengths: list[int] = field(default_factory=list)
    """Their lengths (env steps; an LLM run: response tokens)."""
    events: list[dict] = field(default_factory=list)
    """Events to record (``{"event": name, ...}``): non-finite observations, ..."""


@dataclass
class Evaluation:
    """A greedy evaluation: its mean return (what ``solved_at`` is judged on), the row's ``eval/*``
    metrics, and extra fields for the ``eval`` event (distinct actions seen, sample answers...)."""

    mean: float
    std: float
    metrics: dict[str, float]
    details: dict[str, Any] = field(default_factory=dict)


class Trainable(Protocol):
    guard: Guard
    """Every learner steps its optimiser through the guard; the loop rolls back when it trips too often."""

    def step(self) -> Step:
        """Collect once and learn from it."""

    def evaluate(self, index: int) -> Evaluation:
        """Greedy evaluation number ``index`` (0, 1, ...: seeds fresh episodes each time)."""

    def facts(self) -> dict:
        """What ``meta.json`` records about the task (``env_facts`` / ``llm_facts``), for doctor."""

    def state_dict(self) -> dict:
        """Everything a resume needs; tensors and plain data only (loaded with ``weights_only=True``)."""

    def load_state_dict(self, state: dict) -> None: ...

    def close(self) -> None: ...


EventSink = Callable[..., None]
"""``event(kind, **fields)``: how a trainable records an event while it is built (e.g. GRPO's warm-up)."""


class TrainableBuilder(Protocol):
    def __call__(self, config: Any, *, device: Any, seed: int, state: dict | None, event: EventSink) -> Trainable:
        """Builds the trainable of ``config`` on ``device``, its envs seeded with ``seed``; from ``state``
        (a checkpoint's) when resuming, so nothing is measured or warmed up twice."""

    def allocations(self, config: Any) -> list[Any]:
        """What building and training ``config`` would allocate (``rlpilot.common.bounds.Allocation``: envs, batches,
        buffers, networks), estimated from the config and the env's specs before anything is built; the loop
        refuses a run that would not fit (``rlpilot.common.bounds.refuse_beyond``)."""
