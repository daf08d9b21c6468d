"""Shared fixtures. Tests run real gymnasium envs, TorchRL losses and files on disk; nothing is mocked."""

from __future__ import annotations

import os

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
