"""The figures of ``rlpilot compare`` (rlpilot.compare.report): every row its own colour however many rows a table
has, and an episode's trace on a log scale where one row runs away from the others."""

from __future__ import annotations

import numpy as np
import pytest

from rlpilot.compare import report
from rlpilot.control.evaluate import EvalResult


@pytest.mark.parametrize("count", [1, 7, 10, 12, 20])
def test_every_row_has_a_colour_of_its_own(count):
    colors = report.row_colors(count)
    assert len(colors) == count == len(set(colors))


def _row(scale: float, steps: int = 50) -> EvalResult:
    error = scale * (1.1 + np.sin(np.arange(steps) / 5.0))[:, None]
    return EvalResult(returns=np.zeros(1), lengths=np.array([steps]), actions_seen=1, trace={"error": error})


def test_a_runaway_trace_puts_its_axes_on_a_log_scale(tmp_path, monkeypatch):
    scales = []
    monkeypatch.setattr(report, "_finish", lambda fig, axes, path, title: scales.append(axes[0].get_yscale()) or path)
    rows = {f"row-{k}": _row(1e-3) for k in range(11)}
    report.trace_chart("delay", rows, ("error",), tmp_path / "a.png")
    report.trace_chart("delay", {**rows, "pd": _row(0.3)}, ("error",), tmp_path / "b.png")
    assert scales == ["linear", "log"]


def test_the_trace_chart_is_written(tmp_path):
    rows = {f"row-{k}": _row(1e-3 * (k + 1)) for k in range(12)}
    path = report.trace_chart("nominal", rows, ("error",), tmp_path / "trace.png")
    assert path is not None and path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def _summary(rows: int) -> dict:
    cells = {f"row-{k}": {"to_oracle": [1.0 + k, 0.9 + k, 1.1 + k]} for k in range(rows)}
    return {"conditions": {"nominal": {"cells": {**cells, report.ORACLE: {}}}}}


def test_the_ratio_charts_legend_stands_beside_the_bars_when_the_rows_are_many(tmp_path, monkeypatch):
    """With many rows (the arm's table has twelve) a legend inside the axes hides the bars of the last conditions:
    it goes beside them; where a short one fits, it stays inside."""
    import matplotlib

    matplotlib.use("Agg")
    from rlpilot import plot

    placed = []
    original = plot.finish_figure

    def finish(fig, ax, path, **kwargs):
        written = original(fig, ax, path, **kwargs)
        fig.canvas.draw()
        legend, frame = ax.get_legend().get_window_extent(), ax.get_window_extent()
        placed.append(legend.x0 >= frame.x1)
        return written

    monkeypatch.setattr(plot, "finish_figure", finish)
    assert report.ratio_chart(_summary(12), tmp_path / "many.png", 1.2).read_bytes()[:4] == b"\x89PNG"
    report.ratio_chart(_summary(3), tmp_path / "few.png", 1.2)
    assert placed == [True, False]
