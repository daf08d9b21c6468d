"""Rules of the test suite itself (issue 55): what CI never runs breaks without anyone noticing.

* ``slow`` (``make test-all`` only) is for learning to a threshold (``tests/learning``) and for more of what a
  fast test already runs: every slow test elsewhere names, in ``COVERED_BY``, the test of ``make test`` that
  runs the same code path, and that test exists and is not slow.
* No test asserts on wall time: a bound on speed is a benchmark's ratio against a peer measured in the same run
  (``benchmarks/``); ``make test`` must pass on a machine whose cores are busy with other work.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]

COVERED_BY = {
    "unit/test_compiled.py::test_the_program_steps_adam_as_the_library_does[sac-pendulum]":
        "unit/test_compiled.py::test_the_program_steps_adam_as_the_library_does",  # the same Adam step, DQN's program
    "unit/test_compiled.py::test_the_program_steps_adam_as_the_library_does[td3-pendulum]":
        "unit/test_compiled.py::test_the_program_steps_adam_as_the_library_does",
    "unit/test_compiled.py::test_the_program_steps_adam_as_the_library_does[ppo-pendulum]":
        "unit/test_compiled.py::test_the_program_steps_adam_as_the_library_does",  # DQN's program: the same step
    "smoke/test_residual.py::test_residual_run_exports_base_plus_residual_and_plays_the_same":
        "smoke/test_documented_commands.py::test_the_pages_commands_run_as_the_page_says",  # robot-arm.md exports it
    "smoke/test_residual.py::test_a_pid_gain_schedule_exports_with_its_integral_as_state_and_plays_the_same":
        "smoke/test_your_controller.py::test_a_gain_schedule_run_exports_with_its_controller_and_needs_trust",
    "smoke/test_llm_runs.py::test_gpu_benchmark_script_runs_tiny_on_cpu":
        "smoke/test_llm_runs.py::test_grpo_run_writes_the_run_directory",  # the script times the same GRPO steps
    "smoke/test_doctor.py::test_healthy_runs_get_no_warning[dqn-acrobot-0]":
        "smoke/test_doctor.py::test_healthy_runs_get_no_warning",
    "smoke/test_presets.py::test_preset_runs_and_writes_the_run_directory[ppo-carracing-discrete]":
        "smoke/test_presets.py::test_preset_runs_and_writes_the_run_directory",  # ppo-carracing: the same pipeline
    "smoke/test_resilience.py::test_sigkill_five_times_then_resume_to_solved":
        "smoke/test_lifecycle.py::test_sigkill_and_sigterm_then_resume_on_the_same_curve",
    "smoke/test_sweep.py::test_bench_writes_its_table_between_markers":
        "smoke/test_sweep.py::test_bench_replaces_its_marked_block_and_takes_overrides",  # the table, one batch a run
    "smoke/test_your_controller.py::test_the_schedule_exports_in_every_format":
        "smoke/test_your_controller.py::test_a_gain_schedule_run_exports_with_its_controller_and_needs_trust",
    "smoke/test_your_controller.py::test_tune_searches_the_users_controller_gains_and_checks_them_on_fresh_episodes":
        "smoke/test_documented_commands.py::test_the_pages_commands_run_as_the_page_says",  # your-controller.md
    "smoke/test_arm_comparison.py::test_the_arm_comparison_runs_end_to_end":
        "unit/test_arm_answer.py",  # the comparison's parts; the whole script takes its episodes' time
    "smoke/test_tune_studies.py::test_two_processes_share_one_study_and_run_no_trial_twice":
        "smoke/test_documented_commands.py::test_the_pages_commands_run_as_the_page_says",  # tune.md: --workers 2
    "smoke/test_lifecycle.py::test_sigkill_and_sigterm_then_resume_on_the_same_curve[llm]":
        "smoke/test_lifecycle.py::test_sigkill_and_sigterm_then_resume_on_the_same_curve",
    "smoke/test_export.py::test_eval_cli_records_mp4":
        "smoke/test_export.py::test_eval_writes_episodes_and_a_gif",  # the same recorder, another container
}  # fmt: skip
"""Each slow test outside ``tests/learning`` -> the fast test that runs its code path (``file.py::name``, the
name without parameters for any of its fast parameters; a file alone for its tests together)."""


def _is_slow(node: ast.AST) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "slow" and "mark" in ast.unparse(node)


def _param_id(call: ast.Call) -> str:
    return "-".join(str(ast.literal_eval(arg)) for arg in call.args)


def slow_tests() -> dict[str, bool]:
    """Every test or parameter marked slow, as ``file::name`` or ``file::name[id]``."""
    found = {}
    for path in sorted(TESTS.rglob("test_*.py")):
        tree = ast.parse(path.read_text())
        module_slow = any(
            isinstance(node, ast.Assign)
            and any(getattr(t, "id", None) == "pytestmark" for t in node.targets)
            and any(_is_slow(n) for n in ast.walk(node.value))
            for node in tree.body
        )
        for node in ast.walk(tree):
            if not (isinstance(node, ast.FunctionDef) and node.name.startswith("test_")):
                continue
            name = f"{path.relative_to(TESTS)}::{node.name}"
            if module_slow or any(_is_slow(d) or _is_slow(getattr(d, "func", None)) for d in node.decorator_list):
                found[name] = True
            for decorator in node.decorator_list:  # pytest.param(..., marks=pytest.mark.slow) in a parametrize
                for call in ast.walk(decorator):
                    if isinstance(call, ast.Call) and getattr(call.func, "attr", None) == "param":
                        if any(
                            kw.arg == "marks" and any(_is_slow(n) for n in ast.walk(kw.value)) for kw in call.keywords
                        ):
                            try:
                                found[f"{name}[{_param_id(call)}]"] = True
                            except ValueError:  # an id computed at collection: the whole test is listed
                                found[name] = True
    return found


def _defined(reference: str) -> bool:
    file, _, name = reference.partition("::")
    path = TESTS / file
    if not path.exists():
        return False
    return not name or re.search(rf"^def {re.escape(name)}\(", path.read_text(), flags=re.M) is not None


def test_slow_is_for_learning_or_more_of_what_a_fast_test_runs():
    slow = {name for name in slow_tests() if not name.startswith("learning/")}
    unexplained = sorted(slow - set(COVERED_BY))
    assert not unexplained, f"slow tests outside tests/learning with no fast test named in COVERED_BY: {unexplained}"
    stale = sorted(set(COVERED_BY) - slow)
    assert not stale, f"COVERED_BY names tests that are no longer slow: {stale}"
    missing = sorted(ref for ref in COVERED_BY.values() if not _defined(ref))
    assert not missing, f"COVERED_BY names fast tests that do not exist: {missing}"
    covering_slow = sorted(ref for ref in COVERED_BY.values() if ref in slow_tests())
    assert not covering_slow, f"a slow test cannot be the fast cover of another: {covering_slow}"


WALL_CLOCK = re.compile(  # a duration bounded (``clock() - start < N``, ``elapsed < N``), not a deadline
    r"assert\b[^\n]*(?:perf_counter|monotonic|time\.time)\(\)\s*-[^\n]*<|assert\b[^\n]*\b(?:elapsed|seconds|duration)\w*\s*<"
)


def test_no_test_asserts_on_wall_time():
    """A test may wait with a deadline (a hang must end), never assert that something was fast."""
    found = []
    for path in sorted(TESTS.rglob("*.py")):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if WALL_CLOCK.search(line):
                found.append(f"{path.relative_to(TESTS)}:{number}: {line.strip()}")
    assert not found, found
