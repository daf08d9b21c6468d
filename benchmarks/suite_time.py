"""How long the test suite takes: runs a test command (default ``make test``) once, on a machine you keep
otherwise idle, and writes a stamped result file that tools/gen_results.py turns into the table in
docs/results.md ("The test suite").

    python benchmarks/suite_time.py --out benchmarks/results/suite_time-DATE.txt
    python benchmarks/suite_time.py --target test-all --out benchmarks/results/suite_time-all-DATE.txt
    python benchmarks/suite_time.py --busy 2 --out benchmarks/results/suite_time-busy-DATE.txt

``--busy N``: N processes that spin on the CPU (at nice ``--busy-nice``, default 10) for as long as the command
runs (a user's busy laptop: on a 2-core machine ``--busy 2`` keeps both cores taken by other work); the suite
must pass all the same.

The wall time is the whole command (the .venv check included); the counts are pytest's closing line.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import stamp  # noqa: E402

COUNTS = re.compile(r"(\d+) (passed|failed|skipped|errors?|xfailed|xpassed)")


def pytest_counts(output: str) -> dict[str, int]:
    """The counts of pytest's closing line (``512 passed, 3 skipped in 518.2s``), the last such line."""
    closing = [line for line in output.splitlines() if re.search(r"\d+ passed", line)]
    if not closing:
        return {}
    return {kind.rstrip("s") if kind.startswith("error") else kind: int(n) for n, kind in COUNTS.findall(closing[-1])}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--target", default="test", help="the make target to time (test or test-all)")
    parser.add_argument("--out", required=True, help="result file (.txt; a .json twin is written beside it)")
    parser.add_argument("--busy", type=int, default=0, help="processes spinning on the CPU while it runs")
    parser.add_argument("--busy-nice", type=int, default=10, help="the spinning processes' nice value")
    parser.add_argument("--beside", default="", help="other work running beside it, in words (recorded)")
    args = parser.parse_args()
    header = stamp.header()
    # at nice 10, as a user's background work: at 0 the spinners took ~72% of each core and the suite crawled
    spin = [sys.executable, "-c", f"import os\nos.nice({args.busy_nice})\nwhile True: pass"]
    burners = [subprocess.Popen(spin) for _ in range(args.busy)]
    try:
        start = time.perf_counter()
        done = subprocess.run(["make", args.target], cwd=stamp.ROOT, capture_output=True, text=True, check=False)
        wall_s = time.perf_counter() - start
    finally:
        for burner in burners:
            burner.kill()
    counts = pytest_counts(done.stdout + done.stderr)
    # what failed, in pytest's short summary (a timing of a failing suite must say which test failed)
    failures = [line for line in (done.stdout + done.stderr).splitlines() if line.startswith(("FAILED ", "ERROR "))]
    body = [
        f"make {args.target}: exit {done.returncode}, {wall_s:.1f} s wall, {args.busy} busy process(es) beside it"
        + (f", and {args.beside}" if args.beside else ""),
        "counts: " + ", ".join(f"{n} {kind}" for kind, n in counts.items()),
        *failures,
    ]
    if done.returncode:
        log = Path(tempfile.gettempdir()) / (Path(args.out).stem + ".log")  # not beside it: not for the repository
        log.write_text(done.stdout[-200_000:] + done.stderr[-50_000:])
        body.append(f"output: {log}")
    print("\n".join(body))
    data = {
        "target": args.target,
        "returncode": done.returncode,
        "wall_s": round(wall_s, 1),
        "counts": counts,
        "busy": args.busy,
        "busy_nice": args.busy_nice,
        "failures": failures,
        "beside": args.beside,
    }
    stamp.write_result(args.out, header, body, data)
    return 0 if done.returncode == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
