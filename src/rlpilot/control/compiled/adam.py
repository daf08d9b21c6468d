"""The optimiser step inside the traced program: :class:`CompiledStep` (the gradients, the guard's test and a fused
Adam's arithmetic as one program, on CUDA replayed as one CUDA graph; on a CPU a learning phase's updates as one
program too), and :func:`in_program_refusal`, why an optimiser cannot be stepped there."""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable

import torch
from torch import nn

from rlpilot.control.compiled.cuda_graph import CudaGraph
from rlpilot.control.compiled.decide import one_line
from rlpilot.control.compiled.trace import CompiledGradients, Gradients, Inputs, compile_session, trace_and_compile


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
        self.step_inputs: Inputs | None = None
        self.step_signature: tuple = ()
        # a phase's updates in one program (:meth:`steps`, on a CPU)
        self.loop_program: Callable | None = None
        self.loop_failed = False
        self.loop_inputs: Inputs | None = None  # one minibatch's layout; the program's inputs stack ``loop_rows``
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
        inputs = Inputs(single)
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
        self.loop_program = trace_and_compile(program, [*example, *stacked])
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


def in_program_refusal(optimizer: torch.optim.Optimizer, modules: dict[str, nn.Module]) -> str | None:
    """Why :class:`CompiledStep` cannot take ``optimizer``'s step into its program, in words; None when it can: a
    :func:`rlpilot.guard.direct_adam` without weight decay, holding every learned parameter of ``modules``."""
    from rlpilot.guard import PLAIN_FUSED_ADAM, direct_adam

    if not direct_adam(optimizer):
        if type(optimizer) is not torch.optim.Adam:
            return f"{type(optimizer).__name__} is not Adam"
        settings = ", ".join(f"{key}={value}" for key, value in PLAIN_FUSED_ADAM.items())
        return f"Adam without {settings}, or with groups mixing devices or dtypes"
    if not all(group["weight_decay"] == 0 for group in optimizer.param_groups):
        return "Adam with weight decay"
    held = {id(p) for group in optimizer.param_groups for p in group["params"]}
    if not all(id(p) in held for module in modules.values() for p in module.parameters() if p.requires_grad):
        return "the optimiser does not hold every learned parameter"
    return None
