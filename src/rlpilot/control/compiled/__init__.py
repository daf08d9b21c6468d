"""``train.compile``: a learner's update (loss, backward, clip, guard test, Adam step) as one compiled program.

The door: a learner's constructor calls :func:`build_update` once (TD3, with two programs, :func:`build_updates`)
with its loss, its optimiser and its modules; the config decides the rest (``train.compile``, the guard,
``train.cuda_graphs``), and :func:`compile_seconds` gives its metrics. Behind it, by concern: ``decide`` (whether
and when to compile; the compiler and its cache), ``trace`` (the program traced and compiled: eager and compiled
gradients), ``adam`` (the optimiser's step inside the program, a learning phase as one program), ``cuda_graph``
(a program replayed as one CUDA graph).

The update is traced once by ``make_fx`` (``torch.func.grad`` puts the backward in the same graph) and compiled by
inductor: C++ (CPU) or Triton (CUDA) code for the elementwise work around the library's matrix multiplies, called
with flat tensors, without the autograd engine or Dynamo's guards at run time (:class:`CompiledGradients`,
:class:`CompiledStep`). On a CPU several updates can be one program too, a loop over stacked minibatches
(:meth:`CompiledStep.steps`: DQN's learning phase).

Measured with ``python benchmarks/update_cost.py --limit --cold`` (docs/speed.md, "Compiled updates and the
physical limit"): on the 2-core CPU machine a compiled update took 0.34-0.8x the eager one's time (PPO 64-64 0.34x,
DQN 256-256 0.54x, SAC 256-256 0.66x, TD3 400-300 0.79x), reaching 84-89% of the measured matrix-multiply peak at
the Zoo's 256-256 and 400-300 networks; a cold compile cost 5-20 s, one from the cache about 2-3 s. ``auto``
therefore compiles on CUDA, and on a CPU where the run plans enough updates (:data:`PAYS_BACK_AFTER`), after its
first :data:`AUTO_EAGER_UPDATES` updates (made eagerly, so a run that stops sooner never compiles); ``on`` compiles
at the first update wherever asked; ``off`` never does.

Compiled code is cached across runs and resumes in inductor's FX-graph cache, kept in a per-user folder
(``$XDG_CACHE_HOME/rlpilot/inductor``, else ``~/.cache/rlpilot/inductor``) unless ``TORCHINDUCTOR_CACHE_DIR`` says
otherwise. Without a C++ compiler (inductor's CPU backend needs one) the run says so in one line and stays eager.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple

import torch
from torch import nn

from rlpilot.control.compiled.adam import CompiledStep, in_program_refusal
from rlpilot.control.compiled.decide import IMPORT_SECONDS, eager_updates, import_compiler, wanted
from rlpilot.control.compiled.trace import CompiledGradients, Gradients

if TYPE_CHECKING:
    from rlpilot.config.schema import Config


class Program(NamedTuple):
    """One update program of a learner: ``loss(*args) -> (loss, stats)`` differentiated over the ``learned`` modules,
    reading the ``fixed`` ones too (target networks); ``name`` is its metric's (``compile/<name>_s``)."""

    name: str
    learned: dict[str, nn.Module]
    loss: Callable
    fixed: dict[str, nn.Module] = {}
    every: int | None = None
    """Called at every ``every``-th update (TD3's critics-and-actor program: ``policy_delay``); None: at the updates
    the others leave. Under ``auto`` each makes its share of the eager updates first (``every``: one in ``every``),
    so together they compile once :data:`~rlpilot.control.compiled.decide.AUTO_EAGER_UPDATES` updates have run."""


def build_updates(
    config: Config,
    device: torch.device,
    programs: list[Program],
    *,
    optimizer: torch.optim.Optimizer,
    planned_updates: int,
) -> list[Gradients]:
    """Each of ``programs`` as what the learner's guard steps (:func:`gradients`): compiled or not as
    ``train.compile`` decides once for them all (:func:`~rlpilot.control.compiled.decide.wanted`, from the run's
    ``planned_updates`` and every module the programs read), the guard's test and ``optimizer``'s Adam step in each
    program where it can be, replayed as a CUDA graph where ``train.cuda_graphs`` says so; gradients clipped to the
    algorithm's ``max_grad_norm`` (``None``: not clipped)."""
    networks = [m for program in programs for m in (*program.learned.values(), *program.fixed.values())]
    compile = wanted(config.train.compile, device, algo=config.algo, updates=planned_updates, modules=networks)
    eager = eager_updates(config.train.compile, device)
    shares = [0 if program.every is None else eager // program.every for program in programs]
    rest = eager - sum(shares)  # for the programs that take the other updates
    max_grad_norm = config.algo_config.max_grad_norm
    return [
        gradients(
            program.learned,
            program.loss,
            math.inf if max_grad_norm is None else max_grad_norm,
            compile=compile,
            name=program.name,
            fixed=program.fixed or None,
            optimizer=optimizer,
            guard=config.guard,
            eager_first=rest if program.every is None else share,
            cuda_graph=config.train.cuda_graphs,
        )
        for program, share in zip(programs, shares)
    ]


def build_update(
    config: Config, device: torch.device, program: Program, *, optimizer: torch.optim.Optimizer, planned_updates: int
) -> Gradients:
    """A learner's one update program (:func:`build_updates`)."""
    return build_updates(config, device, [program], optimizer=optimizer, planned_updates=planned_updates)[0]


def gradients(
    modules: dict[str, nn.Module],
    loss: Callable,
    max_grad_norm: float,
    *,
    compile: bool,
    name: str,
    fixed: dict[str, nn.Module] | None = None,
    optimizer: torch.optim.Optimizer | None = None,
    guard=None,
    eager_first: int = 0,
    cuda_graph: bool = True,
):
    """The update's gradients: eager (:class:`Gradients`) unless ``compile`` (see :func:`wanted`); compiled with the
    Adam step and the guard's test in the program (:class:`CompiledStep`) when ``optimizer`` is a plain fused Adam
    holding every learned parameter and ``guard`` (a ``GuardConfig``) is given, else :class:`CompiledGradients`
    (with one line on stderr naming why, when an optimiser was given: :func:`in_program_refusal`).
    ``fixed``: the other modules the loss reads (target networks); ``eager_first``: updates made eagerly before the
    program is built (:func:`eager_updates`); ``cuda_graph``: on CUDA, the whole-update program replayed as one CUDA
    graph (``train.cuda_graphs``)."""
    if not compile:
        return Gradients(modules, loss, max_grad_norm)
    import_compiler()
    if optimizer is not None and guard is not None:
        refusal = in_program_refusal(optimizer, modules)
        if refusal is None:
            return CompiledStep(modules, loss, max_grad_norm, name, fixed, optimizer, guard, eager_first, cuda_graph)
        print(
            f"rlpilot: the {name} program compiles without its optimiser step ({refusal}): the library steps the "
            "optimiser after each program call, the slower path; a fused Adam without weight decay takes it in",
            file=sys.stderr,
        )
    return CompiledGradients(modules, loss, max_grad_norm, name, fixed, eager_first)


def compile_seconds(*parts: Gradients) -> dict[str, float]:
    """``compile/<name>_s`` for each compiled program that has run (the first call's time), and ``compile/import_s``
    (:func:`import_compiler`), for metrics."""
    seconds = {f"compile/{part.name}_s": part.seconds for part in parts if part.name and part.seconds is not None}
    if seconds and IMPORT_SECONDS:
        seconds["compile/import_s"] = IMPORT_SECONDS[0]
    return seconds
