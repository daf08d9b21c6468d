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


def pytest_sessionfinish(session, exitstatus):
    import sys

    ray = sys.modules.get("ray")
    if ray is not None and ray.is_initialized():
        ray.shutdown()


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
