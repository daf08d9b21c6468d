"""PPO on CarRacing-v3 from pixels on a CUDA device, for a fixed wall-clock budget.

The ``ppo-carracing`` preset (RL Zoo's hyperparameters) with ``train.device=cuda``, more envs stepped in
worker processes (``env.backend=async``: CarRacing's ~1 ms Box2D + render step is the bottleneck, the
CNN is not), and ``train.max_seconds`` so the run ends, with a final greedy evaluation, inside the
budget. The run directory (``metrics.csv``, ``curve.png``, ``meta.json``, checkpoints) goes to
``$OUT/carracing_gpu`` when ``$OUT`` is set, else ``runs/carracing_gpu``; one JSON line sums it up.

    PYTHONPATH=src python benchmarks/carracing_gpu.py [--seconds 240] [--num-envs 16] [--device cuda]

Needs torch with CUDA, torchrl, gymnasium with Box2D (``pip install 'rlpilot[box2d]'``) and pygame.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=240.0, help="wall budget for the whole script (default 240)")
    parser.add_argument("--num-envs", type=int, default=16, help="envs (one worker process each with async)")
    parser.add_argument("--backend", default="async", help="env.backend: async (default) or sync")
    parser.add_argument("--device", default="cuda", help="train.device (default cuda)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    started = time.perf_counter()
    try:
        import Box2D  # noqa: F401
        import pygame  # noqa: F401
    except ImportError as exc:
        print(f"carracing_gpu: CarRacing needs Box2D and pygame ({exc}): pip install 'rlpilot[box2d]'")
        return 2
    import torch

    from rlpilot.config import load_config
    from rlpilot.loop.trainer import train

    if args.device == "cuda" and not torch.cuda.is_available():
        print("carracing_gpu: no CUDA device visible to torch; pass --device cpu to run on the CPU")
        return 2
    try:
        import torchvision  # noqa: F401  (TorchRL's Resize needs it)

        frame_size = "64"
    except ImportError:
        print("carracing_gpu: torchvision is not installed, so frames stay 96x96 (the preset resizes to 64x64)")
        frame_size = "null"
    out = Path(os.environ.get("OUT") or "runs") / "carracing_gpu"
    shutil.rmtree(out, ignore_errors=True)
    # Budget: what is left after imports, minus ~20 s for env start-up and the final evaluation
    # (8 episodes of 500 agent steps run side by side).
    train_seconds = max(30.0, args.seconds - (time.perf_counter() - started) - 20.0)
    config = load_config(
        "ppo-carracing",
        overrides=[
            f"train.device={args.device}",
            f"train.max_seconds={train_seconds:.0f}",
            f"env.num_envs={args.num_envs}",
            f"env.backend={args.backend}",
            f"train.seed={args.seed}",
            "train.num_threads=4",
            "train.eval_every_frames=100000",
            "train.loggers=[]",
            f"env.frame_size={frame_size}",
        ],
    )
    run = train(config, run_dir=str(out), show_progress=False)
    rows = run.metrics()
    evals = [r for r in rows if r.get("eval/return_mean") not in (None, "")]
    train_returns = [r["train/episode_return"] for r in rows if r.get("train/episode_return") not in (None, "")]
    summary = {
        "env": config.env.id,
        "device": args.device,
        "num_envs": args.num_envs,
        "backend": args.backend,
        "frame_size": config.env.frame_size,
        "status": run.status,
        "frames": run.frames,
        "train_seconds": round(float(rows[-1]["time/elapsed_s"]), 1) if rows else None,
        "fps": round(float(rows[-1]["time/fps"])) if rows else None,
        "evals": [(int(r["frames"]), round(float(r["eval/return_mean"]), 1)) for r in evals],
        "last_train_return": round(float(train_returns[-1]), 1) if train_returns else None,
        "wall_seconds": round(time.perf_counter() - started, 1),
        "run_dir": str(out),
    }
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
