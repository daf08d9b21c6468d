"""Program tracing: a loss's gradients (forward, backward, clip) as one program, traced by ``make_fx`` and compiled
by inductor, called with flat tensors and no guards (:class:`CompiledGradients`); :class:`Gradients`, the eager
update it replaces and falls back to; :func:`trace_and_compile`, what every program of the package is built with."""

from __future__ import annotations

import logging
import os
import sys
import time
from collections.abc import Callable

import torch
from tensordict import TensorDict, TensorDictBase
from torch import nn

from rlpilot.control.compiled.decide import cache_dir, one_line


class Gradients:
    """One update's gradients: ``loss(*args) -> (loss, stats)`` over ``modules``; a call drops their old gradients,
    leaves the new ones, clipped to a global 2-norm of ``max_grad_norm``, on each parameter's ``.grad``, and returns
    ``(loss, grad_norm, stats)`` (all detached). The optimiser step is the guard's (:meth:`rlpilot.guard.Guard.update`).

    Eager: ``loss.backward()`` and :func:`rlpilot.guard.clip_grad_norm`. Parameters the loss does not reach keep
    ``grad=None`` (so Adam leaves them, and their moments, alone).
    """

    name = ""
    seconds: float | None = None
    compiled = False  # a program (:class:`CompiledGradients`), not the eager update

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


class Inputs:
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
    dtypes, keys and constants (:class:`Inputs`), else it runs eagerly. Every tensor the loss reads from the
    learner's modules is an input: the ``learned`` parameters (differentiated) and every parameter and buffer of the
    ``fixed`` modules (target networks, updated in place between calls). Tensors held elsewhere (an action Box's
    bounds) are constants of the program: they never change within a run.
    """

    compiled = True

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
        self.inputs: Inputs | None = None
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

    def _build(self, args: tuple, body: Callable, extra: list[torch.Tensor]) -> tuple[Callable, Inputs, tuple]:
        """``body(learned, fixed, extra, args) -> (flat outputs, stats)`` as a program over flat tensors (learned
        parameters, fixed tensors, ``extra``, then the call's leaves), traced and compiled at ``args``' shapes; with
        the inputs' layout and the signature a later call must match."""
        inputs = Inputs(args)
        n, m, k = len(self.parameters), len(self.fixed), len(extra)

        def flat_program(*flat: torch.Tensor):
            call_args = inputs.rebuild(list(flat[n + m + k :]))
            # as torch.export's non-strict tracing does, say it is compiling: libraries then skip their eager-only
            # value checks (TorchRL's TanhNormal tests its bounds with a Python ``bool``, which tracing cannot give)
            with compile_session():
                out, stats = body(list(flat[:n]), list(flat[n : n + m]), list(flat[n + m : n + m + k]), call_args)
            self.stat_keys = list(stats)
            return out

        program = trace_and_compile(flat_program, [*self.parameters, *self.fixed, *extra, *inputs.leaves(args)])
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


def compile_session():
    """``torch.compiler._compile_session_context()`` (torch 2.12 on); before it, nothing (torch 2.11, the GPU
    machine's own build, traces the same programs without it)."""
    import contextlib

    return getattr(torch.compiler, "_compile_session_context", contextlib.nullcontext)()


class _NoCudaNotice(logging.Filter):
    """Inductor's C++ toolchain import logs "No CUDA runtime is found" as a warning on every CPU-only machine: not
    the user's concern (a run's stderr is for what is wrong)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "No CUDA runtime is found" not in record.getMessage()


logging.getLogger("torch.utils.cpp_extension").addFilter(_NoCudaNotice())


def trace_and_compile(program: Callable, example: list[torch.Tensor]) -> Callable:
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
