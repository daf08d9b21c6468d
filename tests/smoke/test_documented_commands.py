"""Every command the docs show is run, as the page shows it (issue 55): each ```bash block's ``rlpilot`` lines
in README.md and docs/*.md, and each ``$ rlpilot`` line of a ```text block (an output shown on the page, whose
exit and findings must be what the page shows).

The test applies a small budget, never a different command: ``train`` collects one batch (``--frames 1``, a
resumed run one batch more), ``eval`` plays 2 episodes, ``check`` 3, ``sweep``/``bench``/``tune`` 1 seed and 2
trials of one-batch runs, at most 2 Ray actors. Placeholders become what they stand for: a run the page made
(``RUN``, ``runs/<run>``, ``runs/NAME-s0-*``, a dated run name), seed 0 for ``S``, this test's loopback Ray
cluster for a cluster address, the user packages of ``tests/docs_pkgs`` for ``mypkg``/``mypackage``, and
``examples/`` for the DC motor and the heated tank. What a page assumes exists before its first command
(``GIVEN``) is made the same way. A command that needs what this machine lacks (a GPU, a PostgreSQL server)
must be refused in one line, exit 2 (``NEEDS``). Each command runs in this process (``rlpilot.cli.main``) with
the user's modules forgotten between commands, as in a fresh shell.
"""

from __future__ import annotations

import re
import shlex
import shutil
import sys
from pathlib import Path

import pytest

from rlpilot.cli import build_parser, main

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
USER_PACKAGES = ("mypkg", "mypackage", "dc_motor", "heated_tank")

GIVEN = {
    "docs/eval.md": [
        "rlpilot train ppo-cartpole --seed 0",
        "rlpilot train ppo-cartpole --seed 1",
        "rlpilot train ppo-cartpole --seed 2",
        "rlpilot export runs/ppo-cartpole-v1-s0-*",
        "rlpilot train ppo-reacher --seed 0",
    ],
    "docs/export.md": ["rlpilot train ppo-cartpole"],
    "docs/doctor.md": ["rlpilot train dqn-cartpole --set dqn.buffer_size=32"],
}
"""Runs a page assumes you have made (its commands name them): made first, with the same small budget."""

NEEDS = {
    "--device cuda": "a CUDA GPU",
    "@dbhost:": "a PostgreSQL server (and the [postgres] extra)",
}
"""A command naming one of these needs what this machine may lack: without it, it must be one line, exit 2."""

BUDGET = {
    "train": [("--frames", "1")],
    "eval": [("--episodes", "2")],
    "check": [("--episodes", "3")],
    "sweep": [("--seeds", "1")],
    "bench": [("--seeds", "1")],
    "tune": [("--trials", "2"), ("--seeds-per-trial", "1"), ("--episodes", "2"), ("--check-seeds", "1"),
             ("--check-episodes", "2")],
    "compare": [("--episodes", "2"), ("--tuning-episodes", "1"), ("--search", "quick"), ("--condition", "nominal"),
                ("--workers", "1")],  # one process: two test processes already share the cores
}  # fmt: skip
"""The small budget each verb gets: the option set (replaced when the command gives it)."""
BUDGET_SETS = {
    "train": ["train.eval_episodes=2"],
    "sweep": ["train.total_frames=1", "train.eval_episodes=2"],
    "bench": ["train.total_frames=1", "train.eval_episodes=2"],
    "tune": ["train.total_frames=1"],
    "compare": ["env.max_episode_steps=20"],  # its searches play whole episodes: short ones, the same pipeline
}
SLOW_STEPS = {  # CarRacing steps ~1 ms a frame and its CNN is large: smaller batches and short episodes (as in
    # tests/smoke/test_presets.py); the pipeline is the same
    name: ["env.num_envs=2", "ppo.steps_per_env=32", "ppo.minibatch_size=32", "env.max_episode_steps=60"]
    for name in ("ppo-carracing", "ppo-carracing-discrete")
}
MAX_ACTORS = 2


# -- what the pages say ------------------------------------------------------------------------------------------
def fenced_blocks(text: str) -> list[tuple[str, str]]:
    return re.findall(r"^```(\w*)\n(.*?)^```", text, flags=re.S | re.M)


def _logical_lines(block: str) -> list[str]:
    """Lines with backslash continuations joined."""
    return block.replace("\\\n", " ").splitlines()


def _strip_comment(line: str) -> str:
    """The command without its trailing ``# comment`` (a ``#`` inside quotes stays)."""
    quote = None
    for index, char in enumerate(line):
        if char in "'\"" and quote in (None, char):
            quote = None if quote else char
        elif char == "#" and quote is None and (index == 0 or line[index - 1].isspace()):
            return line[:index].rstrip()
    return line.rstrip()


def bash_commands(block: str) -> list[str]:
    commands = []
    for line in _logical_lines(block):
        for part in _strip_comment(line.strip()).split("&&"):
            if part.strip().startswith("rlpilot "):
                commands.append(part.strip())
    return commands


def shown_commands(block: str) -> list[tuple[str, str]]:
    """``$ rlpilot ...`` lines of a text block, each with the output the page shows after it."""
    lines = block.splitlines()
    shown = []
    for index, line in enumerate(lines):
        if line.startswith("$ rlpilot "):
            output = []
            for later in lines[index + 1 :]:
                if later.startswith("$ "):
                    break
                output.append(later)
            shown.append((line[2:].strip(), "\n".join(output)))
    return shown


def page_commands(page: Path) -> list[tuple[str, str | None]]:
    """(command, the output the page shows for it or None) in page order."""
    commands = []
    for lang, block in fenced_blocks(page.read_text()):
        if lang == "bash":
            commands += [(command, None) for command in bash_commands(block)]
        elif lang == "text":
            commands += shown_commands(block)
    return commands


def _relative(page: Path) -> str:
    return str(page.relative_to(ROOT))


PAGES_WITH_COMMANDS = [page for page in PAGES if page_commands(page)]
VERBS = set(build_parser()._subparsers._group_actions[0].choices)


def test_every_block_that_shows_rlpilot_is_labelled():
    """A block with ``rlpilot`` lines is ```bash (commands that run) or ```text (a synopsis, or output behind a
    ``$`` prompt): an unlabelled one would be skipped silently."""
    unlabelled = []
    for page in PAGES:
        for lang, block in fenced_blocks(page.read_text()):
            if lang not in ("bash", "text") and re.search(r"^(\$ )?rlpilot \w", block, flags=re.M):
                unlabelled.append(f"{_relative(page)}: {block.splitlines()[0][:80]}")
    assert not unlabelled, unlabelled


def test_every_verb_of_the_synopsis_exists_and_a_page_runs_it():
    synopsis = set()
    for page in PAGES:
        for lang, block in fenced_blocks(page.read_text()):
            if lang == "text":
                synopsis |= set(re.findall(r"^rlpilot ([a-z]+) ", block, flags=re.M))
    assert synopsis, "README.md's synopsis of the verbs is a ```text block"
    assert synopsis <= VERBS, synopsis - VERBS
    run = {shlex.split(command)[1] for page in PAGES for command, _ in page_commands(page)}
    assert VERBS <= run, f"verbs no page runs: {VERBS - run}"


# -- running them -----------------------------------------------------------------------------------------------
class Page:
    """A page's working folder and the runs its commands made, in order."""

    def __init__(self, folder: Path, cluster: str | None):
        self.folder = folder
        self.cluster = cluster
        self.runs: list[Path] = []

    def record_new_runs(self, before: set[Path]) -> None:
        runs = self.folder / "runs"
        if runs.exists():
            made = [p for p in runs.rglob("meta.json") if p.parent not in before]
            self.runs += sorted((p.parent for p in made), key=lambda p: p.stat().st_mtime)

    def known(self) -> set[Path]:
        return (
            {p.parent for p in (self.folder / "runs").rglob("meta.json")} if (self.folder / "runs").exists() else set()
        )

    def run_named(self, reference: str) -> str:
        """A run reference of the page (``RUN``, ``runs/<run>``, ``runs/PREFIX...``, a dated name, a glob), with
        anything after the run (``/export/policy.onnx``) kept."""
        top = [p for p in self.runs if p.parent == self.folder / "runs"]
        for placeholder in ("RUN", "runs/<run>"):
            if reference == placeholder or reference.startswith(placeholder + "/"):
                assert self.runs, f"{reference}: the page made no run before"
                return str(self.runs[-1].relative_to(self.folder)) + reference[len(placeholder) :]
        name, _, rest = reference.removeprefix("runs/").partition("/")
        if name.endswith("..."):
            prefix = name[:-3]
        elif match := re.fullmatch(r"(.+-s\d+-)\d{8}-\d{6}", name):
            prefix = match.group(1)
        else:
            return reference
        matching = [p for p in top if p.name.startswith(prefix)]
        assert matching, f"{reference}: no run of the page is named {prefix}..."
        return str(matching[-1].relative_to(self.folder)) + (f"/{rest}" if rest else "")


ADAPT_SETS = [
    f"adapt.{item}"
    for item in ("conditions=1", "tuning_episodes=1", "robust_episodes=1", "search=quick", "robust_search=quick")
]
ADAPT_SETS += ["adapt.iterations=1", "adapt.episodes=1", "adapt.epochs=1", "adapt.samples=0"]
ADAPT_SETS += ["env.max_episode_steps=20", "train.num_threads=1"]
"""``train adapt`` (and ``train PRESET`` of a preset with an ``adapt`` section) builds its own budget (no
``--frames``): one plant, one short episode, one DAgger iteration of one pass (``adapt.samples=0``: a sample count the
page or the preset sets would replace the one epoch)."""


def _with_budget(argv: list[str], page: Page) -> list[str]:
    from rlpilot.config.load import preset_adapt

    verb = argv[0]
    if argv[:2] == ["train", "adapt"] or (verb == "train" and len(argv) > 1 and preset_adapt(argv[1])):
        return argv + [arg for item in [*ADAPT_SETS, "train.eval_episodes=2"] for arg in ("--set", item)]
    budget = list(BUDGET.get(verb, []))
    if verb == "train" and "--resume" in argv:
        from rlpilot.runs import load_run

        resumed = load_run(page.folder / argv[argv.index("--resume") + 1])
        budget = [("--frames", str(int(resumed.frames) + 1))]
    for option, value in budget:
        if option in argv:
            argv[argv.index(option) + 1] = value
        elif verb != "tune" or option in ("--trials", "--seeds-per-trial", "--check-seeds") or "--controller" in argv:
            argv += [option, value]
    for item in BUDGET_SETS.get(verb, []) + (SLOW_STEPS.get(argv[1], []) if verb == "train" and len(argv) > 1 else []):
        argv += ["--set", item]
    return [re.sub(r"^collect\.workers=(\d+)$", lambda m: f"collect.workers={min(int(m[1]), MAX_ACTORS)}", a)
            for a in argv]  # fmt: skip


OUTPUT_OPTIONS = ("--run-dir", "--out")


def prepared(command: str, page: Page) -> list[str]:
    command = re.sub(r"\[--[^\]]*\]", "", command)  # optional parts of a synopsis-like line
    command = command.replace(" ... ", " ")  # an elision
    command = re.sub(r"--seed S\b", "--seed 0", command)
    command = re.sub(r"/sS\b", "/s0", command)
    if page.cluster:
        command = re.sub(r"--ray (HEAD_IP|\d+\.\d+\.\d+\.\d+):\d+", f"--ray {page.cluster}", command)
    argv = shlex.split(command)[1:]
    resolved = []
    for index, arg in enumerate(argv):
        if index and argv[index - 1] in OUTPUT_OPTIONS:
            resolved.append(arg)
        elif arg == "RUN" or arg.startswith(("runs/", "RUN/")):
            reference = page.run_named(arg)
            if "*" in reference:
                expanded = sorted(str(p.relative_to(page.folder)) for p in page.folder.glob(reference))
                assert expanded, f"{arg}: matches nothing (the shell would pass it as it is)"
                resolved += expanded
            else:
                resolved.append(reference)
        else:
            resolved.append(arg)
    return _with_budget(resolved, page)


def _forget_user_modules(registered_before: set[str]) -> None:
    """As a fresh shell would: the user's modules and the env ids they registered are gone."""
    import gymnasium

    for name in list(sys.modules):
        if name.split(".")[0] in USER_PACKAGES:
            del sys.modules[name]
    for env_id in set(gymnasium.envs.registry) - registered_before:
        del gymnasium.envs.registry[env_id]


def _loggers_on_this_stderr() -> None:
    """As a fresh shell would: every log handler that kept the stderr of an earlier command (this test captures each
    command's, and closes it after) writes to the present one. Ray's handler keeps the ``sys.stderr`` of the moment
    ``ray`` was first imported, which in one process may be a page's long closed capture."""
    import logging

    loggers = [
        logging.getLogger(),
        *(x for x in logging.Logger.manager.loggerDict.values() if isinstance(x, logging.Logger)),
    ]
    for handler in (handler for logger in loggers for handler in logger.handlers):
        if type(handler) is not logging.FileHandler and getattr(getattr(handler, "stream", None), "closed", False):
            handler.stream = sys.stderr  # not setStream: it flushes the closed one first


def expected_exit(command: str, shown: str | None) -> tuple[int, str | None]:
    """The exit the page says (0, or what its shown output says), or 2 where the machine lacks what it needs."""
    import torch

    for needle, what in NEEDS.items():
        if needle in command and not (needle == "--device cuda" and torch.cuda.is_available()):
            return 2, what
    if shown is None:
        return 0, None
    if "rlpilot: error:" in shown:
        return 2, None
    if "[error]" in shown or "NOT healthy" in shown:
        return 1, None
    return 0, None


@pytest.mark.parametrize(
    "page",
    [
        pytest.param(page, id=_relative(page), marks=[pytest.mark.xdist_group("ray")] * ("--ray" in page.read_text()))
        for page in PAGES_WITH_COMMANDS
    ],
)  # fmt: skip
def test_the_pages_commands_run_as_the_page_says(page, tmp_path, monkeypatch, capsys, request):
    import gymnasium

    folder = tmp_path / "work"
    shutil.copytree(ROOT / "examples", folder)
    shutil.copytree(ROOT / "tests" / "docs_pkgs", folder, dirs_exist_ok=True)
    monkeypatch.chdir(folder)
    monkeypatch.setattr(sys, "path", list(sys.path))
    cluster = None
    if "--ray" in page.read_text():
        _loggers_on_this_stderr()  # the cluster's start logs too
        ray = request.getfixturevalue("loopback_ray")
        cluster = ray.get_runtime_context().gcs_address
    state = Page(folder, cluster)
    registered = set(gymnasium.envs.registry)
    commands = [(command, None) for command in GIVEN.get(_relative(page), [])] + page_commands(page)
    for command, shown in commands:
        argv = prepared(command, state)
        before = state.known()
        _loggers_on_this_stderr()
        code = main(argv)
        out, err = capsys.readouterr()
        _forget_user_modules(registered)
        state.record_new_runs(before)
        expected, needs = expected_exit(command, shown)
        context = f"{_relative(page)}: `{command}` ran as {argv}\n{err[-2000:]}"
        assert "Traceback" not in err, context
        if needs:
            lines = [line for line in err.splitlines() if line.strip()]
            assert code == 2 and len(lines) == 1 and lines[0].startswith("rlpilot: error:"), f"needs {needs}: {context}"
            continue
        assert code == expected, context
        if shown is not None:
            _as_shown(shown, out + err, context)


def _as_shown(shown: str, printed: str, context: str) -> None:
    """What a page shows of an output is what the command printed: an error line to the letter, each finding
    (``[level] title``) and the verdict."""
    for line in shown.splitlines():
        line = line.strip()
        if (
            line.startswith("rlpilot: error:")
            or re.match(r"\[(info|warning|error)\] ", line)
            or line.startswith("Verdict:")
        ):
            assert line in printed, f"the page shows {line!r}; {context}\n{printed[-3000:]}"
