"""Shared fixtures. Tests run real gymnasium envs, TorchRL losses and files on disk; nothing is mocked."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

os.environ.setdefault("MPLBACKEND", "Agg")
# before anything imports torchrl (which imports ray when installed): local Ray clusters stay on loopback
os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"

import pytest  # noqa: E402


@pytest.fixture(autouse=True)
def _one_thread():
    import torch

    torch.set_num_threads(1)
    yield


@pytest.fixture
def trusted_code():
    """As ``--trust-code`` on the command line does: TorchScript artifacts this test wrote may load."""
    from rlpilot.play.trust import allow_code

    allow_code(True)
    yield
    allow_code(False)


TEST_CLUSTERS = f"tests-{os.getpid()}"
"""The mark (``rlpilot.cluster.OWNER_VARIABLE``) of the Ray clusters this test process starts: their processes
are found by it (``owned_processes``), not mistaken for other work's on the machine."""


@contextlib.contextmanager
def marked_as_the_tests():
    """Processes started in the block carry :data:`TEST_CLUSTERS` in their environment."""
    from rlpilot.cluster import OWNER_VARIABLE

    os.environ[OWNER_VARIABLE] = TEST_CLUSTERS
    try:
        yield
    finally:
        os.environ.pop(OWNER_VARIABLE, None)


@pytest.fixture
def loopback_ray():
    """A Ray cluster on loopback for in-process runs (``--ray local`` joins it), started once per test process and
    kept between the tests that ask for it: each start costs seconds. A test that shuts Ray down (to join another
    cluster) leaves the next one to start it again. Mark such tests ``xdist_group("ray")``: one test process
    runs them all, so one cluster serves them."""
    ray = pytest.importorskip("ray")
    if not ray.is_initialized():
        with marked_as_the_tests():
            ray.init(
                address="local", num_cpus=4, include_dashboard=False, log_to_driver=False, _node_ip_address="127.0.0.1"
            )
    assert ray.get_runtime_context().gcs_address.startswith("127.0.0.1:")  # every listener on loopback
    return ray


def _leave_ray() -> None:
    import sys

    ray = sys.modules.get("ray")
    if ray is not None and ray.is_initialized():
        ray.shutdown()


def _groups(item) -> list[str]:
    """The ``xdist_group`` names of a test, sorted."""
    return sorted(
        {str(m.args[0] if m.args else m.kwargs.get("name", "default")) for m in item.iter_markers("xdist_group")}
    )


def _in_ray_group(item) -> bool:
    return "ray" in _groups(item)


def pytest_runtest_teardown(item, nextitem):
    """The loopback cluster is left after the last Ray test of this test process (``--dist loadgroup`` sends the
    group to one process as one unit): idle, its raylet and prestarted workers took ~4% of a core for the rest of
    the session."""
    if _in_ray_group(item) and (nextitem is None or not _in_ray_group(nextitem)):
        _leave_ray()


def pytest_sessionfinish(session, exitstatus):
    _leave_ray()


# property tests draw the same examples on every run (CI must not fail on a draw no earlier run made; new edge
# cases are searched for on purpose, with HYPOTHESIS_PROFILE=explore)
from hypothesis import settings  # noqa: E402

settings.register_profile("ci", derandomize=True, print_blob=True)
settings.register_profile("explore", derandomize=False)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
"""The example plants and controllers (``heated_tank``, ``dc_motor``), imported as a user's packages are."""


@pytest.fixture
def examples_on_path(monkeypatch):
    """The examples importable, as from ``examples/`` on the command line (``pytestmark`` of a module uses it)."""
    monkeypatch.syspath_prepend(str(EXAMPLES))


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the groups
def pytest_collection_modifyitems(config, items):
    """The tests that share a module-scoped fixture (a comparison tuned once, an artifact exported once) run in one
    test process (``xdist_group`` named after the module), so the fixture is built once, not once per process that
    happens to draw one of them. A test already in a group (``ray``) stays in it."""
    for item in items:
        info = getattr(item, "_fixtureinfo", None)
        if info is None or item.get_closest_marker("xdist_group"):
            continue
        shared = any(
            definition.scope == "module"
            for name in info.names_closure
            for definition in info.name2fixturedefs.get(name, ())
        )
        if shared:
            item.add_marker(pytest.mark.xdist_group(item.module.__name__))

    _group_suffix(config, items)


def _group_suffix(config, items) -> None:
    """``--dist loadgroup`` sends the tests of one ``xdist_group`` to one test process by the ``@group`` suffix a
    test process adds to their node ids. pytest-xdist 3.8 adds it to ``item._nodeid``, which pytest 9 no longer
    reads (a node's id is ``item._id``): no group was kept together (the ``ray`` tests each started a cluster in
    both processes). The suffix, as pytest-xdist writes it, where pytest reads it."""
    if not getattr(config.option, "loadgroup", False):  # set in the test processes of --dist loadgroup
        return
    from _pytest.nodeid import NodeId

    for item in items:
        names = _groups(item)
        if names and "@" not in item.nodeid:
            item._id = NodeId.parse(f"{item.nodeid}@{'_'.join(names)}")
