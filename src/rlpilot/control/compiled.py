"""``train.compile``: a learner's update (loss, backward, gradient clip) as one compiled program.

``torch.compile`` (inductor) turns the update into generated code: one C++ (CPU) or Triton (CUDA) program for the
elementwise work around the library's matrix multiplies, the backward traced into the same graph by ``torch.func.grad``
(no autograd engine at run time) and the global-norm clip fused in (:class:`CompiledGradients`). The optimiser step
stays the fused Adam kernel and the guard's checks stay eager: they decide in Python whether an update is applied.

Measured with ``python benchmarks/update_cost.py --limit --cold`` (docs/results.md, "Compiled updates and the
physical limit"): on the 2-core CPU machine a compiled update took 0.4-0.85x the eager one's time (PPO 64-64 0.42x,
DQN 256-256 0.58x, SAC 256-256 0.68x, TD3 400-300 0.85x), reaching 81-85% of the measured matrix-multiply peak at
the Zoo's 256-256 and 400-300 networks; the first compile in a process cost 10-16 s cold, 1-3 s from the cache.
``auto`` therefore compiles on CUDA, and on a CPU where the run plans enough updates for a cold compile to pay for
itself (:data:`PAYS_BACK_AFTER`); ``on`` compiles wherever asked; ``off`` never does.

Compiled code is cached across runs and resumes in inductor's FX-graph cache, kept in a per-user folder
(``$XDG_CACHE_HOME/rlpilot/inductor``, else ``~/.cache/rlpilot/inductor``) unless ``TORCHINDUCTOR_CACHE_DIR`` says
otherwise. Without a C++ compiler (inductor's CPU backend needs one) the run says so in one line and stays eager.
"""

from __future__ import annotations

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


PAYS_BACK_AFTER = {"ppo": 24_000, "mappo": 24_000, "ippo": 24_000, "dqn": 20_000, "sac": 5_000, "td3": 10_000}
"""Planned gradient updates after which a cold compile has paid for itself on a CPU: the first compile in a process
(inductor's start-up included, 10-16 s on the 2-core machine) over the time each update saves (0.46-2.45 ms at the
presets' and the Zoo's networks), rounded up, from ``python benchmarks/update_cost.py --limit --cold``
(benchmarks/results/update_cost-2026-12-03d.txt). A cached program loads in 1-3 s, so these are the cautious side."""


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
    ):
        super().__init__(modules, loss, max_grad_norm)
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(cache_dir())
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

    def _compile(self, args: tuple) -> None:
        from torch.fx.experimental.proxy_tensor import make_fx

        inputs = _Inputs(args)
        n, m = len(self.parameters), len(self.fixed)

        def flat_program(*flat: torch.Tensor):
            args = inputs.rebuild(list(flat[n + m :]))
            # as torch.export's non-strict tracing does, say it is compiling: libraries then skip their eager-only
            # value checks (TorchRL's TanhNormal tests its bounds with a Python ``bool``, which tracing cannot give)
            with torch.compiler._compile_session_context():
                grads, norm, total, stats = self._gradients(list(flat[:n]), list(flat[n : n + m]), args)
            self.stat_keys = list(stats)
            return (*grads, norm, total, *stats.values())

        example = [*self.parameters, *self.fixed, *inputs.leaves(args)]
        cuda = sorted({t.device.index or 0 for t in example if t.device.type == "cuda"})
        with torch.random.fork_rng(devices=cuda):  # tracing runs the loss's random draws: the program draws them
            graph = make_fx(flat_program, tracing_mode="fake", _allow_non_fake_inputs=True)(*example)
        fake = [node.meta["val"] for node in graph.graph.nodes if node.op == "placeholder"]
        self.program = torch._inductor.compile(graph, fake)
        self.inputs, self.traced_signature = inputs, inputs.signature(args)

    @torch.no_grad()  # the program takes its gradients itself; outside it nothing is differentiated
    def __call__(self, *args) -> tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
        if self.program is None:
            start = time.perf_counter()
            self._compile(args)
            self.seconds = time.perf_counter() - start
        elif self.inputs.signature(args) != self.traced_signature:
            with torch.enable_grad():
                return self.eager(*args)
        out = self.program(*self.parameters, *self.fixed, *self.inputs.leaves(args))
        n = len(self.parameters)
        for param, grad in zip(self.parameters, out[:n]):
            param.grad = grad
        return out[n + 1], out[n], dict(zip(self.stat_keys, out[n + 2 :]))


def gradients(
    modules: dict[str, nn.Module],
    loss: Callable,
    max_grad_norm: float,
    *,
    compile: bool,
    name: str,
    fixed: dict[str, nn.Module] | None = None,
):
    """:class:`CompiledGradients` when ``compile`` (see :func:`wanted`), else :class:`Gradients`. ``fixed``: the other
    modules the loss reads (target networks)."""
    if compile:
        return CompiledGradients(modules, loss, max_grad_norm, name, fixed)
    return Gradients(modules, loss, max_grad_norm)


def compile_seconds(*parts: Gradients) -> dict[str, float]:
    """``compile/<name>_s`` for each compiled program that has run (the first call's time), for metrics."""
    return {f"compile/{part.name}_s": part.seconds for part in parts if part.name and part.seconds is not None}
