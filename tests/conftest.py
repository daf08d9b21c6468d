"""Shared fixtures. Tests run real gymnasium envs, TorchRL losses and files on disk; nothing is mocked."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("MPLBACKEND", "Agg")


@pytest.fixture(autouse=True)
def _one_thread():
    import torch

    torch.set_num_threads(1)
    yield
