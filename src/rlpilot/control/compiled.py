"""``train.compile``: a learner's update (loss, backward, clip, guard test, Adam step) as one compiled program.

The update is traced once by ``make_fx`` (``torch.func.grad`` puts the backward in the same graph) and compiled by
inductor: C++ (CPU) or Triton (CUDA) code for the elementwise work around the library's matrix multiplies, called
with flat tensors, without the autograd engine or Dynamo's guards at run time (:class:`CompiledGradients`,
:class:`CompiledStep`). On a CPU several updates can be one program too, a loop over stacked minibatches
(:meth:`CompiledStep.steps`: DQN's learning phase).

Measured with ``python benchmarks/update_cost.py --limit --cold`` (docs/results.md, "Compiled updates and the
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

import logging
import math
import os
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch
from tensordict import TensorDict, TensorDictBase
from torch import nn

COMPILERS = ("c++", "g++", "clang++")
"""What inductor's CPU backend can build with (it looks for ``$CXX`` first, then these)."""


def cache_dir() -> Path:
    """The per-user folder inductor's cache lives in: ``TORCHINDUCTOR_CACHE_DIR`` when the user set it, else
    ``$XDG_CACHE_HOME/rlpilot/inductor`` (``~/.cache/...``). Importing TorchRL already wrote inductor's own default
    (a folder under ``/tmp``, gone at reboot) into the variable: that value counts as unset."""
    from torch._inductor.runtime.cache_dir_utils import default_cache_dir

    chosen = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    if chosen and os.path.abspath(chosen) != os.path.abspath(default_cache_dir()):
        return Path(chosen)
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "rlpilot" / "inductor"


def cxx_compiler() -> str | None:
    """The C++ compiler inductor would use, or None."""
    candidates = [os.environ["CXX"]] if os.environ.get("CXX") else list(COMPILERS)
    for name in candidates:
        if path := shutil.which(name):
            return path
    return None


PAYS_BACK_AFTER = {"ppo": 10_000, "dqn": 16_000, "sac": 3_000, "td3": 5_000}
"""Planned gradient updates above which ``auto`` compiles on a CPU, per algorithm measured: three times the updates
that pay back a compile from the per-user cache (up to ~3 s in a run) with the time each update saves (PPO 64-64
0.92 ms, DQN 256-256 0.56 ms, SAC 256-256 3.15 ms, TD3 400-300 2.19 ms), rounded up; from ``python
benchmarks/update_cost.py --limit --cold`` (benchmarks/results/update_cost-2026-12-03d.txt). The first run of a new
network on a machine pays the cold compile instead (5-20 s, once: it is cached for the runs after). MAPPO/IPPO,
unmeasured, compile only when asked (``on``)."""


AUTO_EAGER_UPDATES = 256
"""Under ``auto`` on a CPU, the updates a run makes eagerly before it compiles: a run that ends (or fails) sooner, a
test's or a smoke run's, never pays a compile; the Zoo's SAC loses ~0.6 s to them."""


def eager_updates(setting: str, device: torch.device) -> int:
    """How many updates run eagerly before the compiled program takes over (when :func:`wanted` says compile):
    :data:`AUTO_EAGER_UPDATES` for ``auto`` on a CPU, none otherwise."""
    return AUTO_EAGER_UPDATES if setting == "auto" and device.type != "cuda" else 0


def measured_kind(modules) -> bool:
    """Whether ``modules`` are made of what the CPU rule was measured on: no convolution or recurrent layer."""
    unmeasured = (nn.modules.conv._ConvNd, nn.RNNBase)
    return not any(isinstance(part, unmeasured) for module in modules for part in module.modules())


def wanted(setting: str, device: torch.device, *, algo: str = "", updates: int = 0, modules=()) -> bool:
    """Whether ``train.compile`` (``auto``/``on``/``off``) compiles: ``on`` always, ``off`` never; ``auto`` on CUDA,
    and on a CPU when the run plans at least :data:`PAYS_BACK_AFTER` gradient ``updates`` for ``algo`` and its
    networks (``modules``) are of the :func:`measured_kind`. Asked for on a CPU with no C++ compiler: one line on
    stderr (only when ``on`` asked for it), and eager."""
    if setting == "off":
        return False
    if setting == "auto" and device.type != "cuda":
        if updates < PAYS_BACK_AFTER.get(algo, math.inf) or not measured_kind(modules):
            return False
    if device.type == "cpu" and cxx_compiler() is None:
        if setting == "on":
            print(
                "rlpilot: train.compile=on needs a C++ compiler for inductor's CPU code (none of $CXX, "
                f"{', '.join(COMPILERS)} found): training eagerly instead; install g++ or set train.compile=off",
                file=sys.stderr,
            )
        return False
    return True


class Gradients:
    """One update's gradients: ``loss(*args) -> (loss, stats)`` over ``modules``; a call drops their old gradients,
    leaves the new ones, clipped to a global 2-norm of ``max_grad_norm``, on each parameter's ``.grad``, and returns
    ``(loss, grad_norm, stats)`` (all detached). The optimiser step is the guard's (:meth:`rlpilot.guard.Guard.update`).

    Eager: ``loss.backward()`` and :func:`rlpilot.guard.clip_grad_norm`. Parameters the loss does not reach keep
    ``grad=None`` (so Adam leaves them, and their moments, alone).
    """

    name = ""
    seconds: float | None = None

    def __init__(self, modules: dict[str, nn.Module], loss: Callable, max_grad_norm: float):
        self.loss = loss
        self.max_grad_norm = float(max_grad_norm)
        self.parameters = [p for module in modules.values() for p in module.parameters() if p.requires_grad]

    def step(self, *args) -> tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor], bool] | None:
        """The gradients with the optimiser's step taken in the same program (:class:`CompiledStep`); None here: the
        guard takes :attr:`unfused`'s gradients and the library's step."""
        return None

    def steps(self, args: tuple, start: int, stop: int) -> tuple[list[list[float]], list[str]] | None:
        """Several updates in one program (:meth:`CompiledStep.steps`); None here: the caller makes them one by one."""
        return None

    @property
    def unfused(self) -> Gradients:
        """What computes the gradients when :meth:`step` does not take the whole update."""
        return self

    def __call__(self, *args) -> tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
        from rlpilot.guard import clip_grad_norm

        for param in self.parameters:
            param.grad = None
        loss, stats = self.loss(*args)
        loss.backward()
        return loss.detach(), clip_grad_norm(self.parameters, self.max_grad_norm), stats


class _Root(nn.Module):
    """Every module one update reads, under one root, so ``torch.func.functional_call`` swaps all their parameters
    and buffers for the program's inputs (the modules themselves are shared, not copied); ``forward`` is the loss."""

    def __init__(self, modules: dict[str, nn.Module], loss: Callable):
        super().__init__()
        self.parts = nn.ModuleDict(modules)
        self.loss = loss

    def forward(self, *args):
        return self.loss(*args)


class _Inputs:
    """How a call's arguments become the program's flat tensor inputs: tensors as they are, a TensorDict or a dict of
    tensors as its leaves in a fixed key order; anything else is a constant of the program. ``signature`` is what
    must match the traced call for the program to apply (shapes, dtypes, keys and constants; for a TensorDict, its
    batch size: the replay's columns keep their shapes and dtypes, and a missing key fails its ``get``)."""

    def __init__(self, args: tuple):
        self.layout = []
        for arg in args:
            if isinstance(arg, torch.Tensor):
                self.layout.append(("tensor", None))
            elif isinstance(arg, TensorDictBase):
                self.layout.append(("tensordict", (list(arg.keys(True, True)), arg.batch_size, arg.device)))
            elif isinstance(arg, dict) and all(isinstance(v, torch.Tensor) for v in arg.values()):
                self.layout.append(("dict", list(arg)))
            else:
                self.layout.append(("constant", arg))

    def leaves(self, args: tuple) -> list[torch.Tensor]:
        out: list[torch.Tensor] = []
        for (kind, info), arg in zip(self.layout, args):
            if kind == "tensor":
                out.append(arg)
            elif kind in ("tensordict", "dict"):
                keys = info[0] if kind == "tensordict" else info
                out.extend(arg.get(key) for key in keys)
        return out

    def rebuild(self, leaves: list[torch.Tensor]) -> tuple:
        args, index = [], 0
        for kind, info in self.layout:
            if kind == "tensor":
                args.append(leaves[index])
                index += 1
            elif kind == "tensordict":
                keys, batch_size, device = info
                args.append(TensorDict(dict(zip(keys, leaves[index : index + len(keys)])), batch_size, device=device))
                index += len(keys)
            elif kind == "dict":
                args.append(dict(zip(info, leaves[index : index + len(info)])))
                index += len(info)
            else:
                args.append(info)
        return tuple(args)

    def signature(self, args: tuple) -> tuple:
        """Shapes and dtypes of the leaves, the keys, and the constants: equal iff the traced program applies."""
        if len(args) != len(self.layout):
            return ()
        parts: list = []
        for (kind, info), arg in zip(self.layout, args):
            if kind == "tensor":
                parts.append((arg.shape, arg.dtype) if isinstance(arg, torch.Tensor) else None)
            elif kind == "tensordict":  # a learner's minibatch: its columns' shapes past the batch are fixed
                if not isinstance(arg, TensorDictBase) or arg.batch_size != info[1]:
                    return ()
                parts.append(arg.batch_size)
            elif kind == "dict":
                if not isinstance(arg, dict) or list(arg) != info:
                    return ()
                parts.append(tuple((arg[key].shape, arg[key].dtype) for key in info))
            else:
                parts.append(("constant", type(arg), arg))
        return tuple(parts)


class CompiledGradients(Gradients):
    """The same gradients as one compiled program: the loss's forward, its backward (``torch.func.grad`` over the
    learned parameters, traced into the same graph) and the clip, generated by inductor as one function around the
    library's matrix multiplies. The autograd engine, the per-op dispatch of the eager backward and the clip's
    separate kernels are gone from the hot path (``benchmarks/update_cost.py --limit``).

    The program is traced once by ``make_fx`` (real tensors, at the first call's shapes) and compiled by
    ``torch._inductor.compile``; it is called with flat tensors and no guards. ``torch.compile``'s Dynamo front end
    checks every input's guards at each call: 60-90 us for a learner's dozen parameters, a fifth of a 256-256 DQN
    update, measured on the 2-core machine. In place of the guards, a call must match the traced call's shapes,
    dtypes, keys and constants (:class:`_Inputs`), else it runs eagerly. Every tensor the loss reads from the
    learner's modules is an input: the ``learned`` parameters (differentiated) and every parameter and buffer of the
    ``fixed`` modules (target networks, updated in place between calls). Tensors held elsewhere (an action Box's
    bounds) are constants of the program: they never change within a run.
    """

    def __init__(
        self,
        modules: dict[str, nn.Module],
        loss: Callable,
        max_grad_norm: float,
        name: str,
        fixed: dict[str, nn.Module] | None = None,
        eager_first: int = 0,
    ):
        super().__init__(modules, loss, max_grad_norm)
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(cache_dir())
        self.eager_first = eager_first  # calls answered eagerly before the program is built (:func:`eager_updates`)
        self.calls = 0
        self.failed = False  # the program could not be built: eager from then on
        self.name = name
        self.eager = Gradients(modules, loss, max_grad_norm)
        self.root = _Root({**{f"learned_{k}": m for k, m in modules.items()}, **(fixed or {})}, loss)
        learned = {id(p) for module in modules.values() for p in module.parameters() if p.requires_grad}
        named = [*self.root.named_parameters(), *self.root.named_buffers()]
        self.names = [key for key, p in named if id(p) in learned]
        self.parameters = [p for _, p in named if id(p) in learned]
        self.fixed_names = [key for key, p in named if id(p) not in learned]
        self.fixed = [p for _, p in named if id(p) not in learned]
        self.inputs: _Inputs | None = None
        self.traced_signature: tuple = ()
        self.stat_keys: list[str] = []
        self.program: Callable | None = None

    def _gradients(self, learned: list[torch.Tensor], fixed: list[torch.Tensor], args: tuple):
        def loss(values: list[torch.Tensor]):
            state = {**dict(zip(self.names, values)), **dict(zip(self.fixed_names, fixed))}
            total, stats = torch.func.functional_call(self.root, state, args, strict=False)
            return total, (total, stats)

        grads, (total, stats) = torch.func.grad(loss, has_aux=True)(learned)
        norm = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads]))
        scale = torch.clamp(self.max_grad_norm / (norm + 1e-6), max=1.0)
        return [g * scale for g in grads], norm, total.detach(), stats

    def _build(self, args: tuple, body: Callable, extra: list[torch.Tensor]) -> tuple[Callable, _Inputs, tuple]:
        """``body(learned, fixed, extra, args) -> (flat outputs, stats)`` as a program over flat tensors (learned
        parameters, fixed tensors, ``extra``, then the call's leaves), traced and compiled at ``args``' shapes; with
        the inputs' layout and the signature a later call must match."""
        inputs = _Inputs(args)
        n, m, k = len(self.parameters), len(self.fixed), len(extra)

        def flat_program(*flat: torch.Tensor):
            call_args = inputs.rebuild(list(flat[n + m + k :]))
            # as torch.export's non-strict tracing does, say it is compiling: libraries then skip their eager-only
            # value checks (TorchRL's TanhNormal tests its bounds with a Python ``bool``, which tracing cannot give)
            with compile_session():
                out, stats = body(list(flat[:n]), list(flat[n : n + m]), list(flat[n + m : n + m + k]), call_args)
            self.stat_keys = list(stats)
            return out

        program = _trace_and_compile(flat_program, [*self.parameters, *self.fixed, *extra, *inputs.leaves(args)])
        return program, inputs, inputs.signature(args)

    def _compile(self, args: tuple) -> None:
        def body(learned, fixed, _, call_args):
            grads, norm, total, stats = self._gradients(learned, fixed, call_args)
            return (*grads, norm, total, *stats.values()), stats

        self.program, self.inputs, self.traced_signature = self._build(args, body, [])

    def _compiled(self, build: Callable, args: tuple) -> bool:
        """Builds the program (its seconds kept for the run's metrics). A loss the tracer or the compiler cannot take
        (data-dependent Python control flow, an operator inductor lacks) is one line on stderr, and the run goes on
        eagerly: compiling is an optimisation, never a reason for a run to fail."""
        start = time.perf_counter()
        try:
            build(args)
        except Exception as exc:  # noqa: BLE001 - any failure to compile leaves the eager update, which is correct
            self.failed = True
            reason = one_line(exc)
            print(f"rlpilot: could not compile the {self.name} update ({reason}); training eagerly", file=sys.stderr)
            return False
        self.seconds = time.perf_counter() - start
        return True

    @torch.no_grad()  # the program takes its gradients itself; outside it nothing is differentiated
    def __call__(self, *args) -> tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
        self.calls += 1
        if self.calls <= self.eager_first or self.failed:
            with torch.enable_grad():
                return self.eager(*args)
        if self.program is None:
            if not self._compiled(self._compile, args):
                with torch.enable_grad():
                    return self.eager(*args)
        elif self.inputs.signature(args) != self.traced_signature:
            with torch.enable_grad():
                return self.eager(*args)
        out = self.program(*self.parameters, *self.fixed, *self.inputs.leaves(args))
        n = len(self.parameters)
        for param, grad in zip(self.parameters, out[:n]):
            param.grad = grad
        return out[n + 1], out[n], dict(zip(self.stat_keys, out[n + 2 :]))


class CompiledStep(CompiledGradients):
    """:class:`CompiledGradients` with the optimiser's Adam step in the same program, and the guard's test: the update
    is applied (parameters, moments and step counts written in place) only where the loss and the gradient norm are
    finite and the loss is at most ``guard.max_loss`` (the test :meth:`rlpilot.guard.Guard.allow` makes). The fused
    Adam kernel's arithmetic (lerp for the first moment, ``sqrt(v) / sqrt(1 - beta2^t) + eps``), with the step size
    and bias corrections computed on the host for each call on a CPU (each group's ``lr`` may change between calls),
    and on CUDA in the program, in float64, from the step counters and each group's learning rate (a tensor written
    only when a rate changes): no host read of a counter, which would wait for the device every update. What the
    library kernel would cost around the program (its call, the step counters' ``_foreach_add_``, the gradients
    handed over on ``.grad``) is gone: ~70 us of a 0.66 ms DQN update on the 2-core machine. On CUDA the program is
    replayed as one CUDA graph (:class:`CudaGraph`, ``train.cuda_graphs``).

    Only for a plain fused Adam (:func:`rlpilot.guard.adam_step`'s case, without weight decay) holding every learned
    parameter; :func:`gradients` decides.
    """

    def __init__(
        self,
        modules,
        loss,
        max_grad_norm,
        name,
        fixed,
        optimizer: torch.optim.Optimizer,
        guard,
        eager_first=0,
        cuda_graph: bool = True,
    ):
        super().__init__(modules, loss, max_grad_norm, name, fixed, eager_first)
        self.cuda_graph = cuda_graph  # on CUDA, the program replayed as a CUDA graph (:class:`CudaGraph`)
        self.graph: CudaGraph | None = None
        self.optimizer = optimizer
        self.guard = guard
        group_of = {id(p): index for index, group in enumerate(optimizer.param_groups) for p in group["params"]}
        self.groups = sorted({group_of[id(p)] for p in self.parameters})
        self.slot = [self.groups.index(group_of[id(p)]) for p in self.parameters]
        self.first_index = [next(i for i, p in enumerate(self.parameters) if group_of[id(p)] == g) for g in self.groups]
        self.on_device = self.parameters[0].device.type == "cuda"  # Adam's step size in the program; a CUDA graph
        self.lr = torch.zeros(len(self.groups), dtype=torch.float64, device=self.parameters[0].device)
        self.rates: tuple[float, ...] = ()  # the rates ``lr`` holds
        self.state_owner: dict | None = None  # the optimiser's state dict that ``state_list`` was read from
        self.state_list: list[torch.Tensor] = []
        self.step_program: Callable | None = None  # apart from the gradients-only program ``__call__`` runs
        self.step_inputs: _Inputs | None = None
        self.step_signature: tuple = ()
        # a phase's updates in one program (:meth:`steps`, on a CPU)
        self.loop_program: Callable | None = None
        self.loop_failed = False
        self.loop_inputs: _Inputs | None = None  # one minibatch's layout; the program's inputs stack ``loop_rows``
        self.loop_rows = 0
        self.loop_shapes: list[tuple] = []  # each stacked leaf's shape past the rows, and its dtype
        self.loop_stat_keys: list[str] = []

    def _step(self, learned, fixed, exp_avg, exp_avg_sq, steps, rates, args):
        new, (norm, total, ok), stats = self._update(learned, fixed, exp_avg, exp_avg_sq, steps, rates, args)
        for tensors, values in zip((learned, exp_avg, exp_avg_sq, steps), new):
            for tensor, value in zip(tensors, values):
                tensor.copy_(value)
        return (norm, total, ok, *stats.values()), stats

    def _update(self, learned, fixed, exp_avg, exp_avg_sq, steps, rates, args):
        """One update as values (nothing written): ``((parameters, first moments, second moments, step counters),
        (grad norm, loss, applied), stats)``, each new value the old one where the guard's test fails. ``rates``: on a
        CPU each group's ``(step size, bias correction)`` row for this step (:meth:`_table`), on CUDA each group's
        learning rate."""
        grads, norm, total, stats = self._gradients(learned, fixed, args)
        ok = torch.isfinite(total) & torch.isfinite(norm) & (total <= self.guard.max_loss)
        if not self.guard.enabled:
            ok = torch.ones_like(ok)
        if not self.on_device:  # each group's (step size, bias correction) row, computed on the host (:meth:`_table`)
            hyper = [(rates[slot, 0], rates[slot, 1]) for slot in range(len(self.groups))]
        else:
            # on CUDA, computed here from the step counters, in float64 as the fused kernel and the host compute them:
            # a host read of a counter would wait for the device every update. (Not on a CPU: inductor inlines the
            # scalars into every element's arithmetic there, two float64 powers per element: DQN's 256-256 update
            # took 0.72 ms instead of 0.65.)
            hyper = []
            for slot, first in enumerate(self.first_index):
                beta1, beta2 = self.optimizer.param_groups[self.groups[slot]]["betas"]
                t = steps[first].to(torch.float64) + 1
                step_size = rates[slot] / (1 - torch.pow(beta1, t))
                hyper.append((step_size.to(torch.float32), torch.sqrt(1 - torch.pow(beta2, t)).to(torch.float32)))
        new = ([], [], [], [])
        for i, (param, grad, m, v, step) in enumerate(zip(learned, grads, exp_avg, exp_avg_sq, steps)):
            group = self.optimizer.param_groups[self.groups[self.slot[i]]]
            beta1, beta2 = group["betas"]
            step_size, bias_correction2_sqrt = hyper[self.slot[i]]
            m_new = torch.lerp(m, grad, 1 - beta1)
            v_new = v * beta2 + (1 - beta2) * grad * grad
            p_new = param - step_size * m_new / (v_new.sqrt() / bias_correction2_sqrt + group["eps"])
            new[0].append(torch.where(ok, p_new, param))
            new[1].append(torch.where(ok, m_new, m))
            new[2].append(torch.where(ok, v_new, v))
            new[3].append(step + ok.to(step.dtype))
        return new, (norm, total, ok), stats

    def _state(self) -> list[torch.Tensor]:
        """The learned parameters' first moments, second moments and step counters, in that order (created as
        ``Adam`` creates them). Loading a checkpoint replaces them, and with them the optimiser's ``state`` dict
        (``Optimizer.load_state_dict``): the list is kept until that dict changes."""
        from rlpilot.guard import adam_state

        if self.state_owner is not self.optimizer.state:
            states = [adam_state(self.optimizer, param) for param in self.parameters]
            self.state_list = [s[key] for key in ("exp_avg", "exp_avg_sq", "step") for s in states]
            self.state_owner = self.optimizer.state
        return self.state_list

    def _table(self, rows: int | None = None) -> torch.Tensor:
        """On a CPU, each group's ``(lr / (1 - beta1^t), sqrt(1 - beta2^t))`` for its next ``rows`` applied steps
        (``t`` = the step counter + 1, + 2, ...), computed on the host: ``[rows, groups, 2]``; ``rows=None``: this
        step's row alone, ``[groups, 2]``."""
        groups = []  # each group's settings and step counter, read once
        for index, first in zip(self.groups, self.first_index):
            group = self.optimizer.param_groups[index]
            groups.append((group["lr"], *group["betas"], float(self.optimizer.state[self.parameters[first]]["step"])))
        table = [
            [(lr / (1 - beta1 ** (t + row)), math.sqrt(1 - beta2 ** (t + row))) for lr, beta1, beta2, t in groups]
            for row in range(1, (rows or 1) + 1)
        ]
        return torch.tensor(table if rows else table[0], dtype=torch.float32)

    def _rates(self) -> torch.Tensor:
        """What the program takes for Adam's step size: :meth:`_table`'s one row on a CPU, :meth:`_lr` on CUDA."""
        return self._lr() if self.on_device else self._table()

    def _lr(self) -> torch.Tensor:
        """Each group's learning rate (float64, on the parameters' device), one tensor the program reads: written
        only when a rate changed (the guard's cut, a schedule), by a fill (no host-to-device copy)."""
        rates = tuple(float(self.optimizer.param_groups[index]["lr"]) for index in self.groups)
        if rates != self.rates:
            for slot, rate in enumerate(rates):
                self.lr[slot].fill_(rate)
            self.rates = rates
        return self.lr

    def _compile_step(self, args: tuple) -> None:
        n = len(self.parameters)

        def body(learned, fixed, extra, call_args):
            exp_avg, exp_avg_sq, steps, rates = extra[:n], extra[n : 2 * n], extra[2 * n : 3 * n], extra[3 * n]
            return self._step(learned, fixed, exp_avg, exp_avg_sq, steps, rates, call_args)

        extra = [*self._state(), self._rates()]
        self.step_program, self.step_inputs, self.step_signature = self._build(args, body, extra)
        if self.cuda_graph and self.on_device:
            self.graph = CudaGraph(
                lambda *leaves: self.step_program(*self.parameters, *self.fixed, *self.state_list, self.lr, *leaves),
                lambda: [*self.parameters, *self.fixed, *self.state_list, self.lr],
                self.name,
            )

    def _compile_loop(self, args: tuple) -> None:
        """The program behind :meth:`steps`: ``while start <= i < stop``, update ``i`` on minibatch ``i`` of the stacked
        ``args``, as :meth:`_step` would, with the parameters, moments and step counters carried from one update to the
        next (``torch.while_loop``'s operator, traced by ``make_fx``: one update's code, however many updates), Adam's
        step-size row taken from :meth:`_table` by the count of updates applied so far; then the final values written
        in place. Returns each update's row ``(loss, grad norm, applied, *scalar stats)`` (zeros outside the range)."""
        from torch._higher_order_ops.while_loop import while_loop_op

        single = tuple(arg[0] for arg in args)  # one minibatch: the loss's call
        inputs = _Inputs(single)
        stacked = inputs.leaves(args)
        rows = stacked[0].shape[0]
        n, m = len(self.parameters), len(self.fixed)

        # which statistics the loss returns: one eager call on the first minibatch, without autograd and with the
        # random generators restored after it (a trace on fake tensors cost ~0.3 s a run, the call ~1 ms); scalar
        # ones are kept, one column each
        state = {**dict(zip(self.names, self.parameters)), **dict(zip(self.fixed_names, self.fixed))}
        with torch.random.fork_rng(), torch.no_grad():
            _, stats = torch.func.functional_call(self.root, state, single, strict=False)
        self.loop_stat_keys = [key for key, value in stats.items() if value.dim() == 0]
        width = 3 + len(self.loop_stat_keys)

        def program(*flat: torch.Tensor):
            learned, fixed = list(flat[:n]), list(flat[n : n + m])
            state = list(flat[n + m : n + m + 3 * n])  # first moments, second moments, step counters
            table, start, stop = flat[n + m + 3 * n : n + m + 3 * n + 3]
            leaves = list(flat[n + m + 3 * n + 3 :])
            carried = 2 + 4 * n + 1  # i, updates applied, parameters, moments, counters, rows

            def cond(i, *rest):
                return i < rest[carried - 1]  # ``stop``, the first additional input

            def body(i, applied, *rest):
                values, extra = rest[: carried - 2], rest[carried - 2 :]
                params, exp_avg, exp_avg_sq, steps = (list(values[k * n : (k + 1) * n]) for k in range(4))
                out_rows = values[4 * n]
                _, table_in, *rest_in = extra
                fixed_in, leaves_in = list(rest_in[:m]), rest_in[m:]
                call_args = inputs.rebuild([leaf[i] for leaf in leaves_in])
                with compile_session():
                    new, (norm, total, ok), stats = self._update(
                        params, fixed_in, exp_avg, exp_avg_sq, steps, table_in[applied], call_args
                    )
                row = torch.stack(
                    [total, norm, ok.to(total.dtype), *(stats[k].to(total.dtype) for k in self.loop_stat_keys)]
                )
                out_rows = out_rows.index_copy(0, i.view(1), row.view(1, width))
                return (i + 1, applied + ok.to(applied.dtype), *new[0], *new[1], *new[2], *new[3], out_rows)

            zero = torch.zeros((), dtype=torch.int64, device=start.device)
            init = (start, zero, *learned, *state, torch.zeros(rows, width, device=learned[0].device))
            out = while_loop_op(cond, body, init, (stop, table, *fixed, *leaves))
            for tensor, value in zip([*learned, *state], out[2 : 2 + 4 * n]):
                tensor.copy_(value)
            return (out[-1],)

        example = [
            *self.parameters,
            *self.fixed,
            *self._state(),
            self._table(rows),
            torch.tensor(0),
            torch.tensor(rows),
        ]
        self.loop_program = _trace_and_compile(program, [*example, *stacked])
        self.loop_inputs, self.loop_rows = inputs, rows
        self.loop_shapes = [(leaf.shape[1:], leaf.dtype) for leaf in stacked]

    @torch.no_grad()
    def steps(self, args: tuple, start: int, stop: int) -> tuple[list[list[float]], list[str]] | None:
        """Updates ``start .. stop - 1`` of a learning phase in one call of one program (:meth:`_compile_loop`),
        minibatch ``i`` being row ``i`` of each of ``args`` (TensorDicts or tensors stacked on a leading dimension):
        what as many :meth:`step` calls would do, each update applied or refused by the guard's test, with no Python
        and no host read between updates. ``(one row per update: loss, grad norm, applied (1.0 or 0.0), then the loss's
        scalar statistics; their names)``, read from the device once. None where it does not apply (the caller then
        makes the updates one by one): on CUDA (each update's CUDA graph is the fast path there), before the program
        is built under ``eager_first``, after it could not be built, or for a call the traced one does not match (more
        rows than traced; fewer are padded)."""
        if self.on_device or self.failed or self.loop_failed or self.calls < self.eager_first:
            return None
        if self.loop_program is None:
            start_time = time.perf_counter()
            try:
                self._compile_loop(args)
            except Exception as exc:  # noqa: BLE001 - the one-update program (or eager) is still correct
                self.loop_failed = True
                print(
                    f"rlpilot: could not compile the {self.name} phase program ({one_line(exc)}); updating one by one",
                    file=sys.stderr,
                )
                return None
            self.seconds = (self.seconds or 0.0) + time.perf_counter() - start_time
        leaves = self.loop_inputs.leaves(args)
        if len(leaves) != len(self.loop_shapes) or any(
            leaf.shape[0] > self.loop_rows or (leaf.shape[1:], leaf.dtype) != shape
            for leaf, shape in zip(leaves, self.loop_shapes)
        ):
            return None
        rows = leaves[0].shape[0]
        if rows < self.loop_rows:  # a shorter phase: the rows past ``stop`` are never read
            leaves = [torch.cat([leaf, leaf.new_zeros(self.loop_rows - rows, *leaf.shape[1:])]) for leaf in leaves]
        self.calls += stop - start
        out = self.loop_program(
            *self.parameters,
            *self.fixed,
            *self._state(),
            self._table(self.loop_rows),
            torch.tensor(start),
            torch.tensor(stop),
            *leaves,
        )[0]
        return out[start:stop].tolist(), ["loss", "grad_norm", "applied", *self.loop_stat_keys]

    @property
    def unfused(self) -> Gradients:
        return self.eager

    @torch.no_grad()
    def step(self, *args) -> tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor], bool] | None:
        """Gradients, guard test and Adam step in one call: ``(loss, grad norm, stats, applied)``; None when the call
        does not match the traced one, or comes before the program is built (the caller then takes the eager
        gradients and the library step)."""
        self.calls += 1
        if self.calls <= self.eager_first or self.failed:
            return None
        if self.step_program is None:
            if not self._compiled(self._compile_step, args):
                return None
        elif self.step_inputs.signature(args) != self.step_signature:
            return None
        # both refresh what the graph reads in place too (a reloaded optimiser's state list, a changed rate)
        state, rates, leaves = self._state(), self._rates(), self.step_inputs.leaves(args)
        if self.graph is not None:
            out = self.graph(*leaves)
        else:
            out = self.step_program(*self.parameters, *self.fixed, *state, rates, *leaves)
        norm, total, ok = out[0], out[1], out[2]
        return total, norm, dict(zip(self.stat_keys, out[3:])), bool(ok)


class CudaGraph:
    """``fn(*inputs) -> tuple of tensors`` replayed as one CUDA graph (``torch.cuda.CUDAGraph``): the program's few
    dozen kernel launches (a compiled update's Triton kernels and cuBLAS calls, or a policy's layers) become one
    launch, what LeanRL gets from tensordict's ``CudaGraphModule`` and SBX from XLA.

    The first call at an input shape runs ``fn`` itself, on a side stream (its warm-up: kernels loaded, the side
    stream's cuBLAS handle made); the second captures ``fn`` on that stream over copies of the inputs and replays it;
    later calls copy their inputs into those copies and replay. Outputs are copied out of the graph's memory (one
    copy when they are all scalars), so a result kept by the caller is not overwritten by the next replay.
    ``state()`` lists the tensors ``fn`` reads or writes besides its inputs (parameters, optimiser moments): their
    addresses are baked into the graph, so when one changes (a checkpoint's optimiser state loaded) the graph is
    captured again. Random numbers are drawn from the global generator's state at each replay (PyTorch's
    graph-safe Philox offsets), the same draws as calling ``fn``. Anything that fails to capture (an operation that
    syncs with the host) is one line on stderr, and ``fn`` is called from then on.
    """

    def __init__(self, fn: Callable, state: Callable[[], list[torch.Tensor]], name: str):
        self.fn = fn
        self.state = state
        self.name = name
        self.stream: torch.cuda.Stream | None = None
        self.warmed: set[tuple] = set()  # input shapes that have run once
        self.graphs: dict[tuple, tuple] = {}  # shape -> (state addresses, static inputs, graph, static outputs, packed)
        self.failed = False
        self.replays = 0

    def __call__(self, *inputs: torch.Tensor):
        if self.failed:
            return self.fn(*inputs)
        shape = tuple((x.shape, x.dtype) for x in inputs)
        if self.stream is None:
            self.stream = torch.cuda.Stream(device=inputs[0].device if inputs else None)
        if shape not in self.warmed:
            self.warmed.add(shape)
            return self._on_side_stream(lambda: self.fn(*inputs))
        addresses = tuple(t.data_ptr() for t in self.state())
        entry = self.graphs.get(shape)
        if entry is None or entry[0] != addresses:
            self.graphs.pop(shape, None)  # its memory goes back to the pool before the new capture
            entry = self._capture(inputs, addresses)
            if entry is None:
                return self.fn(*inputs)
            self.graphs[shape] = entry
        _, static_inputs, graph, outputs, packed = entry
        for static, value in zip(static_inputs, inputs):
            static.copy_(value)
        graph.replay()
        self.replays += 1
        if packed is not None:
            return packed.clone().unbind(0)
        return tuple(out.clone() for out in outputs) if isinstance(outputs, (tuple, list)) else outputs.clone()

    def _on_side_stream(self, call: Callable):
        current = torch.cuda.current_stream()
        self.stream.wait_stream(current)
        with torch.cuda.stream(self.stream):
            out = call()
        current.wait_stream(self.stream)
        return out

    def _capture(self, inputs: tuple, addresses: tuple) -> tuple | None:
        # the inputs' own strides: the compiled program checks them
        static_inputs = [torch.empty_strided(x.size(), x.stride(), dtype=x.dtype, device=x.device) for x in inputs]
        for static, x in zip(static_inputs, inputs):
            static.copy_(x)
        graph = torch.cuda.CUDAGraph()
        try:
            self.stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.graph(graph, stream=self.stream):
                outputs = self.fn(*static_inputs)
                scalars = isinstance(outputs, (tuple, list)) and all(out.dim() == 0 for out in outputs)
                packed = torch.stack([out.to(torch.float32) for out in outputs]) if scalars else None
        except Exception as exc:  # noqa: BLE001 - a graph is an optimisation: the plain call is correct
            self.failed = True
            reason = one_line(exc)
            print(
                f"rlpilot: could not capture the {self.name} as a CUDA graph ({reason}); running it without",
                file=sys.stderr,
            )
            return None
        return addresses, static_inputs, graph, outputs, packed


def compile_session():
    """``torch.compiler._compile_session_context()`` (torch 2.12 on); before it, nothing (torch 2.11, the GPU
    machine's own build, traces the same programs without it)."""
    import contextlib

    return getattr(torch.compiler, "_compile_session_context", contextlib.nullcontext)()


def graphed(fn: Callable, module: nn.Module, enabled: bool, name: str) -> Callable:
    """``fn``, which reads ``module``'s parameters, as a :class:`CudaGraph` when ``enabled`` (``train.cuda_graphs``)
    and the module is on CUDA (captured again when a parameter is replaced); else ``fn`` itself."""
    first = next(module.parameters(), None)
    if enabled and first is not None and first.device.type == "cuda":
        return CudaGraph(fn, lambda: list(module.parameters()), name)
    return fn


def one_line(exc: Exception) -> str:
    """An exception as its type and the first line of its message (for the one stderr line a fallback prints)."""
    return f"{type(exc).__name__}: {str(exc).splitlines()[0][:160]}" if str(exc) else type(exc).__name__


class _NoCudaNotice(logging.Filter):
    """Inductor's C++ toolchain import logs "No CUDA runtime is found" as a warning on every CPU-only machine: not
    the user's concern (a run's stderr is for what is wrong)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "No CUDA runtime is found" not in record.getMessage()


logging.getLogger("torch.utils.cpp_extension").addFilter(_NoCudaNotice())


def _trace_and_compile(program: Callable, example: list[torch.Tensor]) -> Callable:
    """``program`` over flat tensors, traced by ``make_fx`` on fake tensors at ``example``'s shapes and compiled by
    inductor. Fake inputs give inductor a shape environment, so its FX-graph and AOT caches apply (a cache hit loads
    in ~1.7 s instead of ~2.8 s for a 256-256 DQN update); tracing draws nothing from the random generators."""
    from torch.fx.experimental.proxy_tensor import make_fx

    cuda = sorted({t.device.index or 0 for t in example if t.device.type == "cuda"})
    with torch.random.fork_rng(devices=cuda):
        graph = make_fx(program, tracing_mode="fake", _allow_non_fake_inputs=True)(*example)
    fake = [node.meta["val"] for node in graph.graph.nodes if node.op == "placeholder"]
    if cuda:
        return torch._inductor.compile(graph, fake)
    # on a CPU, the program's wrapper in C++ rather than Python (inductor's ``cpp_wrapper``): the DQN update's ~20
    # kernel and matmul calls cost 4.6% less an update (0.651 -> 0.621 ms, 3 rounds of
    # ``peer_update_cost.time_rlpilot``), SAC's the same (7.65 -> 7.62 ms), and a cold compile no more (DQN: 17.9 s
    # without, 14.2 s with; 1.95 s and 1.85 s from the cache), on this project's 2-core machine, 2026-12-04
    # inductor's FX-graph cache refuses graphs with a higher-order operator unless it is named here (its key does hash
    # the loop's condition and body graphs' code with the rest): without it the phase program's loop (``while_loop``,
    # :meth:`CompiledStep._compile_loop`) was lowered anew in every run, ~3.1 s against ~1.6 s from the cache
    cacheable = {"torch.ops.higher_order.while_loop": torch.__version__}
    with torch._inductor.config.patch(cpp_wrapper=True, unsafe_marked_cacheable_functions=cacheable):
        return torch._inductor.compile(graph, fake)


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
    holding every learned parameter and ``guard`` (a ``GuardConfig``) is given, else :class:`CompiledGradients`.
    ``fixed``: the other modules the loss reads (target networks); ``eager_first``: updates made eagerly before the
    program is built (:func:`eager_updates`); ``cuda_graph``: on CUDA, the whole-update program replayed as one CUDA
    graph (``train.cuda_graphs``)."""
    if not compile:
        return Gradients(modules, loss, max_grad_norm)
    import_compiler()
    if optimizer is not None and guard is not None and plain_adam(optimizer, modules):
        return CompiledStep(modules, loss, max_grad_norm, name, fixed, optimizer, guard, eager_first, cuda_graph)
    return CompiledGradients(modules, loss, max_grad_norm, name, fixed, eager_first)


def plain_adam(optimizer: torch.optim.Optimizer, modules: dict[str, nn.Module]) -> bool:
    """A :func:`rlpilot.guard.direct_adam` without weight decay, holding every learned parameter."""
    from rlpilot.guard import direct_adam

    held = {id(p) for group in optimizer.param_groups for p in group["params"]}
    return (
        direct_adam(optimizer)
        and all(group["weight_decay"] == 0 for group in optimizer.param_groups)
        and all(id(p) in held for module in modules.values() for p in module.parameters() if p.requires_grad)
    )


def planned_updates(total_frames: int, cfg) -> int:
    """An off-policy run's gradient updates over its budget: every frame after ``cfg.learning_starts``,
    ``cfg.updates_per_frame`` each (DQN, SAC and TD3 configs)."""
    return round(max(0, total_frames - cfg.learning_starts) * cfg.updates_per_frame)


IMPORT_SECONDS: list[float] = []
"""What :func:`import_compiler` took in this process (empty until it ran; 0.0 when inductor was already loaded)."""


def import_compiler() -> None:
    """Loads inductor and the tracer while the run is built, with the other libraries (start-up, before the first
    frame: ``startup_s``), not at the first compiled update in the training clock: ~1.2 s of imports on this
    project's 2-core machine (2026-12-05), as SBX's train clock starts after JAX is imported. The seconds are logged as
    ``compile/import_s`` (:func:`compile_seconds`): a run's compile cost is that plus each program's."""
    if IMPORT_SECONDS:
        return
    start = time.perf_counter()
    import torch._inductor.compile_fx  # noqa: F401 - the import is the point
    from torch.fx.experimental import proxy_tensor  # noqa: F401

    IMPORT_SECONDS.append(time.perf_counter() - start)


def compile_seconds(*parts: Gradients) -> dict[str, float]:
    """``compile/<name>_s`` for each compiled program that has run (the first call's time), and ``compile/import_s``
    (:func:`import_compiler`), for metrics."""
    seconds = {f"compile/{part.name}_s": part.seconds for part in parts if part.name and part.seconds is not None}
    if seconds and IMPORT_SECONDS:
        seconds["compile/import_s"] = IMPORT_SECONDS[0]
    return seconds
