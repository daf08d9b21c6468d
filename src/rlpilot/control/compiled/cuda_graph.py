"""``train.cuda_graphs``: a function of tensors (a compiled update, a policy's forward) replayed as one CUDA graph."""

from __future__ import annotations

import sys
from collections.abc import Callable

import torch
from torch import nn

from rlpilot.control.compiled.decide import one_line


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


def graphed(fn: Callable, module: nn.Module, enabled: bool, name: str) -> Callable:
    """``fn``, which reads ``module``'s parameters, as a :class:`CudaGraph` when ``enabled`` (``train.cuda_graphs``)
    and the module is on CUDA (captured again when a parameter is replaced); else ``fn`` itself."""
    first = next(module.parameters(), None)
    if enabled and first is not None and first.device.type == "cuda":
        return CudaGraph(fn, lambda: list(module.parameters()), name)
    return fn
