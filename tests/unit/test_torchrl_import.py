"""rlpilot.common.torchrl_import: the CLI imports TorchRL with Ray and MuJoCo hidden, and both load normally after."""

from __future__ import annotations

import sys

from rlpilot.common.torchrl_import import import_hiding


def test_a_hidden_package_looks_absent_while_the_packages_import_then_imports_normally(tmp_path, monkeypatch):
    (tmp_path / "integration_pkg.py").write_text("VALUE = 42\n")
    (tmp_path / "uses_integration.py").write_text(
        "import importlib.util\n"
        "FOUND = importlib.util.find_spec('integration_pkg') is not None\n"
        "try:\n    import integration_pkg\n    IMPORTED = True\nexcept ImportError:\n    IMPORTED = False\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in ("integration_pkg", "uses_integration"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    import_hiding(("uses_integration",), ("integration_pkg",))
    probe = sys.modules["uses_integration"]
    assert probe.FOUND is False and probe.IMPORTED is False  # what TorchRL sees: not installed
    assert "integration_pkg" not in sys.modules  # the block is lifted ...
    import integration_pkg  # ... and a later import (a user's env, a gymnasium MuJoCo env) gets the package

    assert integration_pkg.VALUE == 42


def test_an_already_imported_package_is_left_alone(tmp_path, monkeypatch):
    (tmp_path / "needs_it.py").write_text("import already_there\nSEEN = already_there.VALUE\n")
    (tmp_path / "already_there.py").write_text("VALUE = 7\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "needs_it", raising=False)
    import already_there  # noqa: F401  imported before: a program that loaded it itself keeps it

    import_hiding(("needs_it",), ("already_there",))
    assert sys.modules["needs_it"].SEEN == 7 and sys.modules["already_there"].VALUE == 7
