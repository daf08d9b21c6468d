"""Faults: secrets in URLs and command lines (``tune --storage``, ``--ray``, ``--mlflow``). One function,
:mod:`rlpilot.redact`, hides them wherever rlpilot prints or stores a command line or URL; random passwords
never survive it, whatever characters they hold."""

from __future__ import annotations

import json
import sys
from urllib.parse import quote

from hypothesis import given, settings
from hypothesis import strategies as st

from rlpilot.cli import main
from rlpilot.config import load_config
from rlpilot.redact import redact, redact_argv, redact_url
from rlpilot.runs import Run

PASSWORD = st.text(st.characters(codec="ascii", exclude_characters="\x00"), min_size=8, max_size=24).filter(
    lambda p: p.strip() == p and not p.isspace()
)
SECRET_PARAMS = st.sampled_from(["password", "passwd", "pwd", "token", "secret", "key", "api_key", "PASSWORD"])
FIXED = "postgresql sqlite rlpilot tune user host db 5432 sslmode require study.db --storage --ray --mlflow"


@settings(max_examples=300, deadline=None)
@given(password=PASSWORD, param=SECRET_PARAMS, scheme=st.sampled_from(["postgresql", "mysql+pymysql", "ray"]))
def test_random_passwords_never_survive(password, param, scheme):
    if any(password in part or quote(password, safe="") in part for part in [FIXED, param]):
        return
    raw = f"{scheme}://user:{password}@host:5432/db?sslmode=require"
    encoded = f"{scheme}://user:{quote(password, safe='')}@host:5432/db"
    query = f"sqlite:///study.db?sslmode=require&{param}={quote(password, safe='')}"
    argv = ["rlpilot", "tune", "ppo-cartpole", "--storage", raw, f"--ray={encoded}", "--mlflow", query]
    for text in [redact_url(raw), redact_url(encoded), redact_url(query), " ".join(redact_argv(argv))]:
        assert password not in text and quote(password, safe="") not in text, text
        assert "host" in text or "study.db" in text  # the rest stays readable
    assert password not in redact(f"storage {encoded} cannot be opened")


def test_no_secret_is_left_alone():
    assert redact_url("sqlite:///x.db?password=S3cr3t!") == "sqlite:///x.db?password=***"
    assert redact_url("postgresql://u:p@ss@word@host/db") == "postgresql://u:***@host/db"
    assert redact_url("sqlite:///a@b.db") == "sqlite:///a@b.db"  # an @ in a path is not a password
    assert redact("--set ppo.lr=1e-3 keyboard=2") == "--set ppo.lr=1e-3 keyboard=2"
    # everyday words stay readable outside a query; inside one, or with a prefix, they hide their value
    assert redact("--param expects key=low:high") == "--param expects key=low:high"
    assert redact_url("https://api.example/v1?key=AbC123") == "https://api.example/v1?key=***"
    assert redact("api_key=AbC123 pass=x") == "api_key=*** pass=x"


def test_meta_json_and_error_lines_hide_the_password(capsys, tmp_path, monkeypatch):
    secret = "Zq8@hunter/2?x"
    storage = f"postgresql://u:{secret}@127.0.0.1:1/db?password={quote(secret, safe='')}"
    monkeypatch.setattr(sys, "argv", ["rlpilot", "tune", "ppo-cartpole", "--storage", storage])
    run = Run.create(load_config("ppo-cartpole"), path=tmp_path / "run")
    run.unlock()
    command = json.loads((tmp_path / "run" / "meta.json").read_text())["command"]
    assert secret not in command and quote(secret, safe="") not in command and "127.0.0.1" in command
    out = tmp_path / "tune"
    args = ["tune", "ppo-cartpole", "--param", "ppo.lr=1e-4:1e-3", "--trials", "1", "--storage", storage]
    code = main([*args, "--out", str(out)])
    captured = capsys.readouterr()
    assert code == 2 and secret not in captured.err + captured.out and "***" in captured.err, captured.err
    for path in out.rglob("*") if out.exists() else []:
        assert not path.is_file() or secret.encode() not in path.read_bytes()
