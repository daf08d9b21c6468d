"""Is ``rlpilot compare``'s arm oracle the strongest reference? Every PD of a 15 x 12 log grid (kp 0.3-60, kd
0.02-2: the grid the old oracle's 5 x 5 lost to) played on each named condition's tuning episodes, against the
oracle ``rlpilot compare`` searched there, on the same episodes and objective.

    python benchmarks/arm_oracle_grid.py --compare benchmarks/results/compare-arm-DATE \\
        --out benchmarks/results/arm_oracle_grid-DATE.txt

Per condition: the oracle's tuning score, the grid's best (and where), their ratio (<= 1: the oracle tracks no
worse than any grid PD), and the grid's best as played again through the oracle's own path (a check that the
two play the same episodes)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from stamp import ROOT, header, write_result  # noqa: E402

sys.path.insert(0, str(ROOT / "src"))
from rlpilot.config.sections import EnvConfig  # noqa: E402
from rlpilot.reference.play import Objective, play_candidates  # noqa: E402

KP = np.geomspace(0.3, 60.0, 15)
KD = np.geomspace(0.02, 2.0, 12)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--compare", required=True, help="an rlpilot compare --out folder on the arm")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    stamp = header()
    summary = json.loads((Path(args.compare) / "compare.json").read_text())
    first, last = summary["tuning_seeds"]
    seeds = list(range(first, last + 1))
    objective = Objective()  # compare's default: the env's tracking_error
    grid = [{"kp": float(kp), "kd": float(kd)} for kp in KP for kd in KD]
    rows, body = {}, ["| condition | oracle kp, kd | oracle (mm) | grid best kp, kd | grid best (mm) | oracle / grid |"]
    body.append("|---|---|---|---|---|---|")
    for label, data in summary["conditions"].items():
        name = f"oracle/{label}"
        if name not in summary["references"]:
            continue
        oracle = summary["references"][name]
        plant = replace(EnvConfig(id=summary["env"]), condition=data["condition"])
        started = time.perf_counter()
        scores = [objective.per_episode(r).mean() for r in play_candidates(plant, "pd", grid, seeds=seeds)]
        (again,) = play_candidates(plant, "pd", [oracle["kwargs"]], seeds=seeds)
        best = int(np.argmin(scores))
        rows[label] = {
            "oracle": oracle["kwargs"],
            "oracle_score": oracle["tuning_score"],
            "oracle_replayed": float(objective.per_episode(again).mean()),
            "grid_best": grid[best],
            "grid_best_score": float(scores[best]),
            "grid_edge": [k for k, v in grid[best].items() if v in (KP[0], KP[-1], KD[0], KD[-1])],
            "seconds": round(time.perf_counter() - started, 1),
        }
        r = rows[label]
        body.append(
            f"| {label} | {r['oracle']['kp']:.3g}, {r['oracle']['kd']:.3g} | {1e3 * r['oracle_score']:.3f} "
            f"| {r['grid_best']['kp']:.3g}, {r['grid_best']['kd']:.3g} | {1e3 * r['grid_best_score']:.3f} "
            f"| {r['oracle_score'] / r['grid_best_score']:.3f} |"
        )
        print(body[-1], flush=True)
    write_result(args.out, stamp, body, {"compare": args.compare, "tuning_seeds": [first, last], "conditions": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
