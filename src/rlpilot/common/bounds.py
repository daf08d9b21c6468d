"""What a command may ask for, bounded by what it would take: memory, and the runs, trials and episodes it starts.

**Memory.** Each setting that sizes memory has a valid range of its own (``env.num_envs`` > 0, a multi-agent env's
agents within [2, 64], layer widths > 0), but what a run allocates is their product: 240 envs x 25 steps x 64 agents,
each agent's centralised critic reading every agent's observation, is ~75 GB, every factor within its range. So the
ranges declared in ``config/sections.py`` bound counts that cost time (epochs, updates per frame), and this module
bounds memory: whatever builds envs, buffers or networks first lists what it is about to allocate
(:class:`Allocation`: what, bytes estimated from the config and the env's specs, the settings that size it), and
:func:`refuse_beyond` refuses a total above the memory available, in one line that says how much it would take
and which settings to lower.

**Counts.** A command that starts runs (``sweep``, ``bench``, ``tune``) or plays episodes starts at most
:data:`MAX_RUNS` runs or :data:`MAX_EPISODES` episodes, with at most :data:`MAX_WORKERS` processes: beyond them is a
typo, not a plan (``--seeds 100000000`` would list 10^8 runs before starting the first).

Torch-free at import (torch is asked only for a CUDA device's free memory): any layer may call it.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass

FLOAT_BYTES = 4  # float32: observations, activations and parameters as the learner holds them

MAX_RUNS = 10_000
"""Runs one command starts: a sweep's grid points x seeds, bench's presets x seeds, tune's trials x seeds per
trial and its check (10,000 CartPole runs are weeks of one core)."""
MAX_EPISODES = 1_000_000
"""Episodes one command plays (``eval``, ``check``, a controller's tuning episodes and its check)."""
MAX_WORKERS = 1_024
"""Processes (or Ray tasks) one command runs at once."""
MAX_NESTING = 32
"""Nesting of lists and mappings in anything rlpilot reads (a config nests 3 deep, ``model.cnn_layers`` 4; a run's
files and an artifact's signature a few more): deeper is refused in one line before parsing goes on, since deep
nesting is a RecursionError inside ``json`` and YAML's composer."""


def refuse_runs(count: int, what: str, lower: str) -> None:
    """A :class:`~rlpilot.common.errors.UserError` when ``what`` (``"--seeds 5 x 3 grid points"``) would start more than
    :data:`MAX_RUNS` runs; ``lower`` names the settings to lower."""
    if count > MAX_RUNS:
        from rlpilot.common.errors import UserError

        raise UserError(f"{what} would start {count:,} runs, more than {MAX_RUNS:,}: lower {lower}")


@dataclass(frozen=True)
class Allocation:
    """One thing a command would allocate: ``what`` it is, about how many ``bytes``, the ``settings`` that size it
    (named as the user sets them: ``env.num_envs``, ``--episodes``)."""

    what: str
    bytes: int
    settings: tuple[str, ...]


def gib(count: float) -> str:
    return f"{count / 2**30:,.1f} GiB"


def available_memory(device: str | None = None) -> int | None:
    """Bytes free for a new allocation: ``MemAvailable`` of /proc/meminfo (else free physical pages); for a CUDA
    ``device``, the smaller of that and the device's free memory. None when unknown."""
    available = None
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    available = int(line.split()[1]) * 1024
                    break
    except OSError:
        pass
    if available is None:
        try:
            available = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (ValueError, OSError, AttributeError):
            pass
    if device is not None and str(device).startswith("cuda"):
        import torch

        if torch.cuda.is_available():
            free, _ = torch.cuda.mem_get_info(torch.device(device))
            available = free if available is None else min(available, free)
    return available


def refuse_beyond(
    allocations: Iterable[Allocation], *, available: int | None = None, device: str | None = None
) -> None:
    """A :class:`~rlpilot.common.errors.UserError` when the ``allocations`` together exceed ``available`` bytes
    (default: :func:`available_memory` for ``device``): one line with the total, the largest part and its settings."""
    from rlpilot.common.errors import UserError

    parts = [part for part in allocations if part.bytes > 0]
    total = sum(part.bytes for part in parts)
    limit = available_memory(device) if available is None else available
    if limit is None or total <= limit:
        return
    largest = max(parts, key=lambda part: part.bytes)
    settings = ", ".join(largest.settings[:-1]) + (" or " if len(largest.settings) > 1 else "") + largest.settings[-1]
    raise UserError(
        f"this would allocate about {gib(total)} ({largest.what}: {gib(largest.bytes)}), and {gib(limit)} is "
        f"available: lower {settings}"
    )


def mlp_parameters(in_features: int, hidden_sizes: Iterable[int], out_features: int) -> int:
    """Weights and biases of an MLP ``in -> hidden... -> out`` (what :func:`rlpilot.control.models.mlp` builds)."""
    widths = [int(in_features), *(int(width) for width in hidden_sizes), int(out_features)]
    return sum(a * b + b for a, b in zip(widths, widths[1:]))


NETWORK_COPIES = 5
"""A network's parameters are held five times while it learns: weights, gradients, Adam's two moments, and a
target or reference copy."""


def networks(
    shapes: Iterable[tuple[int, int]],
    hidden_sizes: Iterable[int],
    *,
    inputs: int,
    inputs_sized_by: tuple[str, ...],
) -> list[Allocation]:
    """What MLPs ``in -> hidden_sizes -> out`` (one per ``shapes`` entry) hold while they learn on ``inputs`` rows at
    once (``inputs_sized_by``: the settings that size those rows): their parameters (:data:`NETWORK_COPIES` times)
    and the activations backward keeps, with their gradients."""
    shapes, hidden = list(shapes), [int(width) for width in hidden_sizes]
    parameters = sum(mlp_parameters(i, hidden, o) for i, o in shapes)
    return [
        Allocation(
            f"{len(shapes)} network(s) of model.hidden_sizes={hidden}",
            FLOAT_BYTES * NETWORK_COPIES * parameters,
            ("model.hidden_sizes",),
        ),
        Allocation(
            f"the networks' activations over {inputs:,} inputs at once",
            FLOAT_BYTES * 2 * inputs * sum(hidden) * len(shapes),
            (*inputs_sized_by, "model.hidden_sizes"),
        ),
    ]
