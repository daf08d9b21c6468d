"""The run directory: the contract every other verb reads.

```
runs/<algo>-<env>-s<seed>-<time>/
  config.yaml  meta.json  metrics.csv  events.jsonl  checkpoints/{last,best}.pt  curve.png
```
Every file is written atomically (temp file, fsync, rename) or appended line by line, so a killed
run never leaves a half-written file. Checkpoints hold only tensors and plain data and are loaded
with ``torch.load(weights_only=True)``: loading never executes code.
"""

from __future__ import annotations

import csv
import io
import os
import pickle
import platform
import re
import shutil
import socket
import subprocess
import sys
import time
import warnings
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from rlpilot.common.errors import UserError
from rlpilot.common.files import append_line, atomic_write, dumps, read_data, read_json, refuse_links
from rlpilot.common.redact import redact_command, redact_data
from rlpilot.config.load import from_dict, load_config
from rlpilot.config.schema import Config

LOCK_FILE = ".lock"
CHECKPOINT_FORMAT = 2
"""The layout of ``checkpoints/*.pt`` (``loop.lifecycle.checkpoint`` writes it); another one is not resumed."""
# what rlpilot writes inside a run directory: none of them may be a symbolic link (files.refuse_links)
RUN_FILES = (
    LOCK_FILE,
    "config.yaml",
    "meta.json",
    "metrics.csv",
    "events.jsonl",
    "checkpoints",
    "curve.png",
    "tb",
    "export",
    "eval.csv",
)
PACKAGES = ("rlpilot", "torch", "torchrl", "tensordict", "gymnasium", "numpy")


def try_lock(path: Path):
    """An exclusive ``fcntl.flock`` on ``path`` (created if missing): the open handle, or None while another
    process holds it. The kernel drops the lock when its holder ends, however it ends (SIGKILL too)."""
    import fcntl

    handle = open(path, "a+")  # noqa: SIM115 (held by the caller until it closes it)
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.close()
        return None
    return handle


def versions() -> dict[str, str]:
    found = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = "not installed"
    return found


def git_revision() -> str | None:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
            cwd=Path(__file__).resolve().parent,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text.split(":")[-1]).strip("-").lower()


def train_origin(
    *,
    preset: str | None = None,
    algo: str | None = None,
    env: str | None = None,
    config_file: str | None = None,
    overrides: list[str] = (),
) -> dict:
    """How a run was asked for, as ``rlpilot train`` takes it: a preset, ``ALGO ENV`` or ``--config FILE`` (the
    path as given), then the ``--set`` overrides in order (``--seed``, ``--device`` and ``--frames`` as theirs).
    Recorded in ``meta.json`` as ``origin``; ``rlpilot.doctor.view.RunView.cmd`` rebuilds the command from it."""
    start = (
        {"config_file": config_file} if config_file else {"preset": preset} if preset else {"algo": algo, "env": env}
    )
    return {**start, "overrides": list(overrides)}


def compact(state):
    """``state`` with every tensor that views a part of a larger storage copied out: ``torch.save`` writes a
    view's whole storage (the written rows of a 1M-row replay would be saved as all 1M)."""
    import torch

    if isinstance(state, dict):
        return {key: compact(value) for key, value in state.items()}
    if type(state) in (list, tuple):  # plain ones only (a named tuple is saved as it is)
        return type(state)(compact(value) for value in state)
    if isinstance(state, torch.Tensor) and state.untyped_storage().nbytes() > state.nbytes:
        return state.clone()
    return state


class MetricsWriter:
    """``metrics.csv``: one row per log step. Rows are appended; a new column rewrites the file atomically."""

    def __init__(self, path: Path):
        self.path = path
        self.columns: list[str] = []
        if path.exists():
            with path.open(newline="") as handle:
                self.columns = next(csv.reader(handle), [])

    def write(self, row: dict[str, Any]) -> None:
        new = [key for key in row if key not in self.columns]
        if new or not self.path.exists():
            self.columns += new
            rows = []
            if self.path.exists():
                with self.path.open(newline="") as handle:
                    rows = list(csv.DictReader(handle))
            buffer = io.StringIO()
            writer = csv.DictWriter(buffer, fieldnames=self.columns)
            writer.writeheader()
            writer.writerows(rows + [row])
            atomic_write(self.path, buffer.getvalue())
            return
        buffer = io.StringIO()
        csv.DictWriter(buffer, fieldnames=self.columns).writerow(row)
        append_line(self.path, buffer.getvalue())


def read_metrics(path: Path) -> list[dict[str, float]]:
    """Rows of ``metrics.csv`` as numbers. A file that is not one (random bytes, text that is no CSV of
    numbers with a ``frames`` column) is a ``UserError`` naming it."""
    path = Path(path)
    rows = []
    text = read_data(path, "restore it, or move it away (the curve then starts again from the checkpoint)")
    try:
        for row in csv.DictReader(io.StringIO(text, newline="")):
            if None in row or "frames" not in row:  # more cells than the header, or no frames column
                raise ValueError("rows do not match the header")
            rows.append({key: float(value) for key, value in row.items() if value not in ("", None)})
    except (ValueError, csv.Error) as exc:
        raise UserError(
            f"{path} is not a metrics file rlpilot wrote ({type(exc).__name__}: {str(exc)[:80]}); restore it, or "
            "move it away (the curve then starts again from the checkpoint)"
        ) from None
    return rows


@dataclass
class Run:
    """A run directory on disk, as training leaves it and as every other verb reads it."""

    path: Path

    @property
    def config_path(self) -> Path:
        """``config.yaml``: the fully resolved config the run trained with."""
        return self.path / "config.yaml"

    @property
    def checkpoint_dir(self) -> Path:
        """``checkpoints/``: ``last.pt`` (what a resume continues from) and ``best.pt``."""
        return self.path / "checkpoints"

    @property
    def curve_path(self) -> Path:
        """``curve.png``: the training curve drawn at the end of the run (``rlpilot plot`` redraws it)."""
        return self.path / "curve.png"

    # -- how the run ended (from meta.json) ------------------------------------------------------
    @property
    def status(self) -> str:
        """``running``, ``solved`` (greedy eval reached the threshold), ``finished`` (budget spent),
        ``interrupted`` or ``failed``."""
        return self.meta()["status"]

    @property
    def frames(self) -> int:
        """Environment frames collected so far (0 before the first batch)."""
        return int(self.meta().get("frames") or 0)

    @property
    def elapsed_s(self) -> float:
        """Training wall time: from the start of training (after construction) to the end."""
        return float(self.meta().get("elapsed_s") or 0.0)

    @property
    def last_eval(self) -> float | None:
        """The latest greedy evaluation's mean return (None before the first evaluation)."""
        return self.meta().get("last_eval")

    @property
    def best_eval(self) -> float | None:
        """The best greedy evaluation's mean return so far (None before the first evaluation)."""
        return self.meta().get("best_eval")

    @property
    def solved_at_frames(self) -> int | None:
        """The frames at the first greedy evaluation at or above the solved threshold (None: not solved)."""
        return self.meta().get("solved_at_frames")

    def config(self) -> Config:
        """The run's config, read from ``config.yaml``."""
        return load_config(config_file=self.config_path)

    def meta(self) -> dict:
        """``meta.json`` as a dict: status, frames, command, versions, seed, times; a missing or damaged
        record is a ``UserError`` that says how to recover."""
        path = self.path / "meta.json"
        try:
            meta = read_json(path, "restore it from a copy, or start a new run")
        except FileNotFoundError:
            raise UserError(
                f"{path} is missing: the run's record (status, frames, resumes) is gone; restore it from a copy, "
                "or start a new run"
            ) from None
        if not isinstance(meta, dict) or "status" not in meta:
            raise UserError(f"{path} is not a run record (no status); restore it from a copy, or start a new run")
        return meta

    def metrics(self) -> list[dict[str, float]]:
        """``metrics.csv``'s rows (one per log step: ``frames``, wall time and the namespaced metrics)."""
        path = self.path / "metrics.csv"
        return read_metrics(path) if path.exists() else []

    def events(self) -> list[dict]:
        """``events.jsonl``'s events (milestones, guard actions, warnings, resume points), in order."""
        path = self.path / "events.jsonl"
        if not path.exists():
            return []
        events = read_json(path, "restore it, or move it away", lines=True)
        if not all(isinstance(event, dict) and "event" in event for event in events):
            raise UserError(f"{path} holds lines that are not rlpilot events; restore it, or move it away")
        return events

    # -- writing -----------------------------------------------------------------------------
    @classmethod
    def create(
        cls, config: Config, *, root: str | Path = "runs", path: str | Path | None = None, origin: dict | None = None
    ) -> Run:
        """A new run directory, locked for this process (see ``lock``) until ``unlock``. ``origin``: how the
        run was asked for (``train_origin``), kept in ``meta.json`` so a command that retrains it (doctor's
        fixes) starts it the same way: ``meta["command"]`` is the process's command line, which for a tune or
        sweep member is the tune's."""
        if path is None:
            stamp = time.strftime("%Y%m%d-%H%M%S")
            name = f"{config.algo}-{slug(config.subject)}-s{config.train.seed}-{stamp}"
            path = Path(root) / name
            suffix = 1
            while path.exists():
                suffix += 1
                path = Path(root) / f"{name}-{suffix}"
        path = Path(path)
        if path.exists() and not path.is_dir():
            raise UserError(f"--run-dir {path} is a file; choose a folder for the run")
        if path.exists() and any(path.iterdir()):
            raise UserError(f"run directory {path} already exists and is not empty; choose another --run-dir")
        created = not path.exists()
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UserError(
                f"cannot create run directory {path}: {exc.strerror or exc}; choose a writable --run-dir or --runs"
            ) from None
        run = cls(path)
        try:
            run.lock()
        except OSError as exc:  # an existing, read-only folder
            raise UserError(
                f"cannot write to run directory {path}: {exc.strerror or exc}; choose a writable --run-dir or --runs"
            ) from None
        if any(p.name != LOCK_FILE for p in path.iterdir()):  # another process created it at the same moment
            run.unlock()
            raise UserError(f"run directory {path} already exists and is not empty; choose another --run-dir")
        try:
            atomic_write(run.config_path, config.to_yaml())
            run.write_meta(
                {
                    "status": "running",
                    "command": redact_command(sys.argv),
                    **({"origin": redact_data(origin)} if origin else {}),
                    "versions": versions(),
                    "git_revision": git_revision(),
                    "seed": config.train.seed,
                    "host": socket.gethostname(),
                    "start_time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                }
            )
        except (
            BaseException
        ) as exc:  # a write error or a signal: nothing half-written is left (folder removed or emptied)
            run.unlock()
            if created:
                shutil.rmtree(path, ignore_errors=True)
            else:
                for child in path.iterdir():
                    child.unlink(missing_ok=True)
            if isinstance(exc, OSError):
                raise UserError(f"cannot write to run directory {path}: {exc.strerror or exc}") from None
            raise
        return run

    # -- one writer at a time ----------------------------------------------------------------
    def lock(self) -> None:
        """Takes the run's write lock (``fcntl.flock`` on ``.lock``): a second writer is refused in one line.
        The kernel drops the lock when the process ends, however it ends, so a killed run never leaves
        a stale lock behind."""
        refuse_links(self.path, RUN_FILES)  # nothing a run writes may land outside it
        handle = try_lock(self.path / LOCK_FILE)
        if handle is None:
            holder = (self.path / LOCK_FILE).read_text().strip() or "another process"
            raise UserError(
                f"{self.path} is being written by {holder}; two writers never share a run directory: "
                "wait for it to end (or stop it), then resume"
            ) from None
        handle.seek(0)
        handle.truncate()
        handle.write(f"pid {os.getpid()} on {socket.gethostname()}\n")
        handle.flush()
        self._lock_handle = handle
        for stale in self.path.rglob(".*.tmp"):  # temp files of a writer killed mid-write: nobody else writes here
            stale.unlink(missing_ok=True)

    def unlock(self) -> None:
        """Releases the write lock ``lock`` took (nothing if this process holds none)."""
        handle = getattr(self, "_lock_handle", None)
        if handle is not None:
            handle.close()  # closing the descriptor releases the flock
            self._lock_handle = None

    def write_meta(self, meta: dict) -> None:
        """Replaces ``meta.json`` atomically (a temp file, then a rename)."""
        atomic_write(self.path / "meta.json", dumps(meta, indent=2) + "\n")

    def update_meta(self, **changes: Any) -> None:
        """Sets ``changes`` in ``meta.json``, the other fields kept."""
        meta = self.meta()
        meta.update(changes)
        self.write_meta(meta)

    def event(self, kind: str, **fields: Any) -> None:
        """Appends one JSON line with a single write on an O_APPEND descriptor: never half a line."""
        line = dumps({"event": kind, "time": time.time(), **fields}) + "\n"
        append_line(self.path / "events.jsonl", line)

    def save_config(self, config: Config) -> None:
        """Replaces ``config.yaml`` atomically (a resume with a changed budget writes it)."""
        atomic_write(self.config_path, config.to_yaml())

    def truncate_metrics(self, *, after_frames: int) -> None:
        """Drops rows past ``after_frames`` (a resume collects those frames again)."""
        path = self.path / "metrics.csv"
        if not path.exists():
            return
        with path.open(newline="") as handle:
            reader = csv.reader(handle)
            header = next(reader, None)
            rows = [row for row in reader if row]
        if header is None:
            return
        frames_at = header.index("frames")
        kept = [row for row in rows if float(row[frames_at]) <= after_frames]
        buffer = io.StringIO()
        writer = csv.writer(buffer)
        writer.writerow(header)
        writer.writerows(kept)
        atomic_write(path, buffer.getvalue())

    def truncate_events(self, *, after_frames: int) -> None:
        """Drops events past ``after_frames`` (an ``eval`` or ``solved`` of frames a resume collects again);
        ``resume`` and ``end`` events, and events without frames, stay: a kill remains visible."""
        events = self.events()
        kept = [
            event
            for event in events
            if event["event"] in ("resume", "end")
            or not isinstance(event.get("frames"), (int, float))
            or event["frames"] <= after_frames
        ]
        if len(kept) < len(events):
            atomic_write(self.path / "events.jsonl", "".join(dumps(event) + "\n" for event in kept))

    def check_readable(self) -> None:
        """Reads every file a resume rewrites, so a damaged run is refused before anything is written."""
        self.meta()
        self.metrics()
        self.events()

    def save_checkpoint(self, name: str, state: dict) -> Path:
        """Writes ``state`` to ``checkpoints/NAME.pt`` atomically and returns its path."""
        import torch

        buffer = io.BytesIO()
        torch.save(compact(state), buffer)
        target = self.checkpoint_dir / f"{name}.pt"
        atomic_write(target, buffer.getvalue())
        return target

    def load_checkpoint(self, name: str = "last") -> dict:
        """``checkpoints/NAME.pt`` loaded on the CPU with ``weights_only=True`` (nothing in it is executed);
        a missing, foreign or corrupt file is a ``UserError``."""
        import torch

        target = self.checkpoint_dir / f"{name}.pt"
        if not target.exists():
            raise UserError(f"{self.path} has no checkpoint '{name}.pt'; train it first (rlpilot train)")
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                return torch.load(target, map_location="cpu", weights_only=True)
        except pickle.UnpicklingError:
            raise UserError(
                f"cannot load checkpoint {target}: it holds objects a weights-only loader refuses (possibly "
                "code); nothing in it was executed. Use checkpoints written by rlpilot"
            ) from None
        except Exception as exc:  # truncated or corrupt file
            raise UserError(
                f"cannot load checkpoint {target}: the file is truncated or corrupt ({type(exc).__name__}); "
                "resume from another checkpoint or retrain"
            ) from None


def check_compatible(saved: dict, config: Config, run: Run) -> None:
    """A checkpoint resumes only the run that wrote it (same algorithm, subject and settings but the budget)."""

    def comparable(data: dict) -> dict:
        return {key: value for key, value in data.items() if key not in ("train", "preset")}

    if saved.get("format") != CHECKPOINT_FORMAT:
        raise UserError(
            f"checkpoint in {run.path} has format {saved.get('format')}, this rlpilot reads format "
            f"{CHECKPOINT_FORMAT}: it was written by another version; retrain"
        )
    try:  # the saved settings with today's defaults: a field added since (at its default) is no difference
        written = from_dict(saved.get("config", {}), drop_other_sections=True).to_dict()
    except UserError:  # a key this version does not know: not the same settings
        written = saved.get("config", {})
    if comparable(written) != comparable(config.to_dict()):
        raise UserError(
            f"checkpoint in {run.path} was made by {saved.get('algo')} on {saved.get('subject')} with other "
            f"settings than the run's config.yaml ({config.algo} on {config.subject}); it cannot be resumed here"
        )


def load_run(path: str | Path) -> Run:
    path = Path(path)
    if not (path / "config.yaml").is_file():
        raise UserError(f"{path} is not a run directory (no config.yaml); runs live under runs/")
    return Run(path)
