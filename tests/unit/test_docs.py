"""Docs that must stay current with the code."""

import dataclasses
import re
import subprocess
import sys
import typing
from pathlib import Path

from rlpilot import config as C

ROOT = Path(__file__).resolve().parents[2]


def test_config_reference_is_current():
    out = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "gen_config_doc.py"), "--check"], capture_output=True, text=True
    )
    assert out.returncode == 0, out.stdout + out.stderr


def test_result_tables_are_generated_from_the_result_files():
    """Nothing between generated markers is typed by hand: it must be what tools/gen_results.py writes."""
    out = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "gen_results.py"), "--check"], capture_output=True, text=True
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "<!-- generated:time_to_solve_summary -->" in (ROOT / "README.md").read_text()
    assert "<!-- generated:time_to_solve -->" in (ROOT / "docs" / "speed.md").read_text()


def test_every_config_field_has_a_docstring():
    sys.path.insert(0, str(ROOT / "tools"))
    from gen_config_doc import field_docs

    docs = field_docs()
    hints = typing.get_type_hints(C.Config)
    classes = [C.Config] + [tp for tp in hints.values() if dataclasses.is_dataclass(tp)]
    missing = [
        f"{cls.__name__}.{f.name}"
        for cls in classes
        for f in dataclasses.fields(cls)
        if not dataclasses.is_dataclass(hints.get(f.name)) or cls is not C.Config
        if (cls.__name__, f.name) not in docs
    ]
    assert not missing, f"fields without a docstring: {missing}"


def test_readme_quickstart_is_the_two_commands_and_they_set_up_the_venv():
    readme = (ROOT / "README.md").read_text()
    quickstart = readme.split("## Quickstart", 1)[1].split("```bash", 1)[1].split("```", 1)[0]
    commands = [line.split("#")[0].strip() for line in quickstart.strip().splitlines()]
    assert commands == ["make demo", "make test"]
    makefile = (ROOT / "Makefile").read_text()
    for target in ("demo", "test"):
        prerequisites = next(line for line in makefile.splitlines() if line.startswith(f"{target}:"))
        assert "$(STAMP)" in prerequisites, f"make {target} must set up .venv first"
    assert "make test" in (ROOT / ".ci" / "run").read_text()


def _outside_generated(text: str) -> str:
    """``text`` with every generated block blanked: ``<!-- generated:NAME -->`` ... ``<!-- /generated:NAME -->``
    (tools/gen_results.py) and ``<!-- bench:start -->`` ... ``<!-- bench:end -->`` (`rlpilot bench`). Their newlines
    are kept, so line numbers still point into the file."""
    return re.sub(
        r"<!-- generated:(\w+) -->.*?<!-- /generated:\1 -->|<!-- bench:start -->.*?<!-- bench:end -->",
        lambda m: "\n" * m.group(0).count("\n"),
        text,
        flags=re.S,
    )


# What makes a line a diary entry rather than a statement of how things are. A commit hash is 7-40 hex digits with
# at least one digit and one letter (so neither a word nor a number such as 1000000), or any 7-40 hex digits right
# after "commit"; a clock time is H:MM or HH:MM[:SS] standing alone (not a range such as 0.1:50 or epochs=2:10).
_DATE = re.compile(r"\b20\d\d-[01]\d-[0-3]\d\b")
_HASH = re.compile(r"\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}\b|\b[Cc]ommit [0-9a-f]{7,40}\b")
_CLOCK = re.compile(r"(?<![\w.:=])\d{1,2}:[0-5]\d(?::[0-5]\d)?(?![\w:]|\.\d)")
_DIARY = {"a date": _DATE, "a commit hash": _HASH, "a clock time": _CLOCK}
# Code: a fenced block, an inline code span (which may wrap onto the next line, not across a paragraph), or a
# link's target.
_CODE = re.compile(r"^ *```[^\n]*\n.*?^ *```|`(?:[^`\n]|\n(?!\n))+`|\]\([^)\s]*\)", re.S | re.M)
# A path or a file name: a token with a "/" in it or a file suffix. A date inside one names a stamped result file
# (benchmarks/results/NAME-DATE.json) or a run directory: a reference, not a prose date.
_PATH = re.compile(r"[^\s`'\"()\[\]<>,;]*(?:/[^\s`'\"()\[\]<>,;]*|\.[A-Za-z][A-Za-z0-9]{0,4}\b)")


def _blank(text: str) -> str:
    return re.sub(r"[^\n]", " ", text)


def _diary_lines(text: str) -> list[str]:
    """The lines of a Markdown page that carry a date, a commit hash or a clock time outside its generated blocks,
    as ``"LINE: what: the line"``. In code (fenced blocks, inline code, link targets) a date or a hash may stand
    inside a path or a file name (a reference to a stamped result file: ``benchmarks/results/x-2026-12-03.json``,
    ``--out benchmarks/results/x-DATE.txt``), and ``a:b`` is a range or a slice, not a time; in prose nothing
    may."""

    def code(m: re.Match) -> str:
        return _CLOCK.sub(lambda t: _blank(t.group(0)), _PATH.sub(lambda t: _blank(t.group(0)), m.group(0)))

    original = text.splitlines()
    masked = _CODE.sub(code, _outside_generated(text)).splitlines()
    return [
        f"{i + 1}: {what}: {original[i].strip()}"
        for i, line in enumerate(masked)
        for what, pattern in _DIARY.items()
        if pattern.search(line)
    ]


def test_readme_is_a_front_door_not_a_diary():
    """README.md: at most ~150 lines, and no dates, clock times, commit hashes or test timings outside the
    generated blocks; the test suite's timings live in the generated table of docs/results.md."""
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 150
    assert _diary_lines(readme) == [], "a date, commit hash or clock time outside a generated block"
    assert not re.findall(r"\d+ passed", _outside_generated(readme)), "a test count outside a generated block"
    results = (ROOT / "docs" / "results.md").read_text()
    assert re.search(r"<!-- generated:suite_time -->\n\| command \| wall time \|", results), (
        "the test suite's timings are generated from benchmarks/results/suite_time-*.json "
        "(python benchmarks/suite_time.py)"
    )


def test_docs_say_what_is_true_now_not_a_diary():
    """Every docs/*.md page, like the README: no date, commit hash or clock time in prose outside the generated
    blocks. A page says what is true now; when something was measured is in the stamped result file a line points
    to (a date inside its name, in code or a link, is allowed) and in git."""
    offending = {
        page.name: lines for page in sorted((ROOT / "docs").glob("*.md")) if (lines := _diary_lines(page.read_text()))
    }
    assert offending == {}, "\n".join(f"docs/{name}:{line}" for name, lines in offending.items() for line in lines)


def _tables_outside_markers(text: str) -> list[list[str]]:
    """Markdown tables (lists of their lines) outside ``<!-- generated:NAME -->`` / ``<!-- bench:start -->``
    blocks."""
    tables, current, inside = [], [], False
    for line in text.splitlines():
        if line.startswith("<!-- generated:") or line == "<!-- bench:start -->":
            inside = True
        elif line.startswith("<!-- /generated:") or line == "<!-- bench:end -->":
            inside = False
        elif line.startswith("|") and not inside:
            current.append(line)
            continue
        if current:
            tables.append(current)
            current = []
    return tables + ([current] if current else [])


def test_every_result_table_is_generated():
    """docs/results.md and docs/speed.md: every table is written by tools/gen_results.py or `rlpilot bench` from
    result files (none typed). README.md: the only table outside markers is the preset list, and its budgets and
    thresholds are the presets' own."""
    for page in ("results.md", "speed.md"):
        assert _tables_outside_markers((ROOT / "docs" / page).read_text()) == [], page
    tables = _tables_outside_markers((ROOT / "README.md").read_text())
    assert len(tables) == 1 and tables[0][0].startswith("| preset | env | budget (frames) | solved at |"), tables
    from rlpilot.config import solved_threshold

    checked = 0
    for line in tables[0][2:]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        names = [n.strip(" `") for n in cells[0].split("(")[0].split(",")]
        budgets = [b.strip() for b in cells[2].split("/")]
        for i, name in enumerate(names):
            cfg = C.load_config(name)
            budget = budgets[min(i, len(budgets) - 1)]
            if budget.replace(",", "").isdigit():
                assert int(budget.replace(",", "")) == cfg.train.total_frames, (name, budget)
                checked += 1
            if cells[3] != "-":  # the preset's threshold, or the env's registered one
                assert float(cells[3]) == solved_threshold(cfg), (name, cells[3])
    assert checked >= 20


def _section(text: str, heading: str) -> str:
    start = text.index(heading)
    following = text.find("\n## ", start + len(heading))
    return text[start : following if following != -1 else None]


def test_measured_sections_of_the_pixel_and_llm_pages_are_generated():
    """The MinAtar runs (docs/pixels.md "Numbers") and the GRPO runs and their cost (docs/llm.md) were typed
    by hand once; now every table in those sections comes from a stamped result file."""
    pixels = (ROOT / "docs" / "pixels.md").read_text()
    llm = (ROOT / "docs" / "llm.md").read_text()
    for text, heading, markers in (
        (pixels, "## Numbers", ["seed_runs_minatar"]),
        (llm, "## The CPU example, measured", ["seed_runs_grpo", "seed_curve_grpo", "seed_curve_grpo_arithmetic"]),
        (llm, "### `benchmarks/llm_gpu.py`: what it measures", ["llm_cost"]),
    ):
        section = _section(text, heading)
        assert _tables_outside_markers(section) == [], heading
        for name in markers:
            assert f"<!-- generated:{name} -->\n|" in section, f"{name}: no generated table (run its benchmark)"


def test_every_public_member_of_run_has_a_docstring():
    """The API page (docs/api.md) shows ``Run`` with its members: each says what it reads or writes."""
    import inspect

    from rlpilot.runs import Run

    def doc(member) -> str | None:
        return (member.fget if isinstance(member, property) else member).__doc__

    missing = [name for name, member in inspect.getmembers(Run) if not name.startswith("_") and not doc(member)]
    assert missing == [], f"Run members without a docstring: {missing}"
