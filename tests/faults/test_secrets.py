"""Faults: secrets in URLs and command lines (``tune --storage``, ``--ray``, ``--mlflow``). One function,
:mod:`rlpilot.common.redact`, hides them wherever rlpilot prints or stores a command line or URL; random passwords
never survive it, whatever characters they hold."""

from __future__ import annotations

import json
import string
import sys
from urllib.parse import quote

import yaml
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from rlpilot.cli import main
from rlpilot.common.redact import redact, redact_argv, redact_command, redact_url
from rlpilot.config import load_config
from rlpilot.runs import Run, train_origin

PASSWORD = st.text(st.characters(codec="ascii", exclude_characters="\x00"), min_size=8, max_size=24).filter(
    lambda p: p.strip() == p and not p.isspace()
)
SECRET_PARAMS = st.sampled_from(["password", "passwd", "pwd", "token", "secret", "key", "api_key", "PASSWORD"])
# every fixed word a test's URL or command line carries: a generated password that is part of one of them (``ppo-cart``
# in ``ppo-cartpole``) would be found in the redacted text although it was hidden
FIXED = "postgresql sqlite:///study.db?sslmode=require& rlpilot tune ppo-cartpole train ?x=1 ?a=1& ?a=1; ://user:@host:5432/db?sslmode=require --storage --ray --mlflow"  # noqa: E501


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
    assert redact_url("https://h/?password[]=S3cret&a=1") == "https://h/?password[]=***&a=1"  # a PHP-style list
    assert redact_url("postgresql://me@corp.com:S3cret@h/db") == "postgresql://me@corp.com:***@h/db"
    # a dotted path ending in an everyday word is a setting, not a secret; ending in a secret name it is one
    assert redact("--set expects section.key=value") == "--set expects section.key=value"
    assert redact("--set env.kwargs.db_password=x") == "--set env.kwargs.db_password=***"
    # a mapping's key: secret names hide their value, everyday words and settings named like them do not
    assert redact("{password: a, run_key: t0001, pass_rate: 0.5}") == "{password: ***, run_key: t0001, pass_rate: 0.5}"


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


# -- issue 55: names as a server reads them (URL-decoded, any case), user info without a scheme --------------
NAMES = ["password", "passwd", "pwd", "token", "secret", "api_key", "access_token", "sslpassword", "credentials"]
URL_SAFE_PASSWORD = st.text(string.ascii_letters + string.digits + "!$'()*-._~@:/?", min_size=8, max_size=20)


@st.composite
def encoded_names(draw) -> str:
    """A secret name as a URL may spell it: each character in either case, as it is, percent-encoded (upper or
    lower hex) or encoded twice (``%2577``); a prefix that keeps the name (``db_``, ``X-``, ``my+``: a space)."""
    out = []
    for char in draw(st.sampled_from(NAMES)):
        char = draw(st.sampled_from([char.lower(), char.upper()]))
        how = draw(st.sampled_from(["plain", "plain", "upper hex", "lower hex", "twice"]))
        code = f"{ord(char):02X}"
        spelled = {"plain": char, "upper hex": f"%{code}", "lower hex": f"%{code.lower()}", "twice": f"%25{code}"}
        out.append(spelled[how])
    return draw(st.sampled_from(["", "db_", "X-", "my+", "%20"])) + "".join(out)


def _hidden(password: str, text: str) -> bool:
    return password not in text and quote(password, safe="") not in text


@settings(max_examples=300, deadline=None)
@given(name=encoded_names(), password=URL_SAFE_PASSWORD, sep=st.sampled_from(["?", "&", "%26", "?a=1&", "?a=1;"]))
def test_encoded_secret_names_never_keep_their_value(name, password, sep):
    assume(password not in FIXED and quote(password, safe="") not in FIXED + name)
    value = quote(password, safe="")
    equals = "=" if sep != "%26" else "%3D"  # an encoded separator comes with an encoded =
    url = f"sqlite:///study.db{'?x=1' if sep == '%26' else ''}{sep}{name}{equals}{value}&sslmode=require"
    argv = ["rlpilot", "tune", "ppo-cartpole", "--storage", url, f"--mlflow={url}"]
    for text in [redact_url(url), redact(f"storage {url} cannot be opened"), redact_command(argv)]:
        assert _hidden(password, text) and "study.db" in text and "sslmode=require" in text, text


ADDRESS_PART = st.text(string.ascii_letters + string.digits + "-_.", min_size=1, max_size=10)


@settings(max_examples=200, deadline=None)
@given(user=ADDRESS_PART, password=PASSWORD, scheme=st.sampled_from(["", "ray://", "//", "redis://"]))
def test_user_info_of_any_address_is_hidden(user, password, scheme):
    """``user:pw@host:port`` without a scheme (what ``--ray`` takes), with one, in an error line and on a command
    line: the password goes, the user and the host stay."""
    assume(password not in FIXED + user and "@" not in user)
    address = f"{scheme}{user}:{password}@10.0.0.7:6379"
    line = f"--ray {address}: no Ray cluster answers there (Connection refused)"
    # in free text a word ends at whitespace: a password with spaces is hidden up to its last word before the @
    words = password.split()
    for text in [redact_url(address), " ".join(redact_argv(["rlpilot", "train", "--ray", address]))]:
        assert password not in text and f"{user}:***@10.0.0.7:6379" in text, text
    if len(words) == 1:
        assert password not in redact(line) and "10.0.0.7:6379" in redact(line)


def test_config_and_run_files_hide_secrets(tmp_path, monkeypatch):
    """A secret in a ``--set`` (a URL's password, an encoded secret-named parameter, a ``password:`` key) is in
    neither ``config.yaml`` nor ``meta.json``'s command and origin nor ``events.jsonl``; the rest of the config
    stays."""
    kwargs = (
        "env.kwargs={db: 'postgresql://u:Zq8hunter2@h:5432/db', api: 'https://a.example/?to%6Ben=Zq8hunter3', "
        "password: Zq8hunter4}"
    )
    monkeypatch.setattr(sys, "argv", ["rlpilot", "train", "ppo-cartpole", "--set", kwargs])
    origin = train_origin(preset="ppo-cartpole", overrides=[kwargs])
    run = Run.create(load_config("ppo-cartpole", overrides=[kwargs]), path=tmp_path / "run", origin=origin)
    run.event("started", note="from postgresql://u:Zq8hunter2@h:5432/db")
    run.unlock()
    stored = {path.name: path.read_text() for path in (tmp_path / "run").iterdir() if path.is_file()}
    for name in ("config.yaml", "meta.json", "events.jsonl"):
        assert "Zq8hunter" not in stored[name] and "h:5432/db" in stored[name], stored[name]
    assert yaml.safe_load(stored["config.yaml"])["env"]["kwargs"]["password"] == "***"


def test_tune_trial_files_and_lines_hide_an_encoded_password(tmp_path, capsys):
    """``?pass%77ord=SECRET`` (SQLAlchemy decodes it to ``password``): not in a trial's ``meta.json``, in
    ``tune.json`` or in what tune prints."""
    storage = f"sqlite:///{tmp_path / 'study.db'}?pass%77ord=Zq8hunter5"
    tiny = ["--set", "train.total_frames=256", "--set", "train.loggers=[]", "--set", "train.eval_episodes=2"]
    args = ["tune", "ppo-cartpole", "--param", "ppo.lr=1e-4:1e-3", "--trials", "1", "--seeds-per-trial", "1"]
    code = main([*args, "--check-seeds", "0", *tiny, "--storage", storage, "--out", str(tmp_path / "out")])
    captured = capsys.readouterr()
    assert code == 0 and "Zq8hunter5" not in captured.out + captured.err and "pass%77ord=***" in captured.out
    written = [path for path in (tmp_path / "out").rglob("*") if path.is_file()]
    assert any(path.name == "meta.json" for path in written)
    for path in written:
        assert b"Zq8hunter5" not in path.read_bytes(), path


def test_ray_address_with_user_info_is_one_redacted_line(capsys):
    code = main(["train", "ppo-cartpole", "--ray", "user:Zq8hunter6@127.0.0.1:1"])
    err = capsys.readouterr().err
    assert code == 2 and "Zq8hunter6" not in err and "user:***@127.0.0.1:1" in err and len(err.splitlines()) == 1


def test_a_secret_in_the_config_is_in_no_run_file_and_the_run_resumes(tmp_path, capsys):
    """A controller's kwarg holding a URL with a password: ``config.yaml``, ``meta.json`` and the checkpoints hold
    ``***`` (the checkpoint's copy of the config as config.yaml has it, so the run still resumes)."""
    kwargs = "env.base_controller_kwargs={url: 'opc.tcp://plc:Zq8hunter7@10.0.0.9:4840', api_token: Zq8hunter8}"
    tiny = ["--set", "env.backend=sync", "--set", "env.num_envs=4", "--set", "ppo.steps_per_env=64"]
    tiny += ["--set", "ppo.minibatch_size=64", "--set", "train.loggers=[]", "--set", "train.eval_episodes=2"]
    sets = ["--set", "env.base_controller=tests.controller_fixture:Declares", "--set", kwargs, *tiny]
    run = tmp_path / "run"
    assert (
        main(["train", "ppo", "tests.controller_fixture:Axis", *sets, "--frames", "256", "-q", "--run-dir", str(run)])
        == 0
    )
    assert main(["train", "--resume", str(run), "--frames", "512", "-q", "--trust-code"]) == 0, capsys.readouterr().err
    assert "opc.tcp://plc:***@10.0.0.9:4840" in (run / "config.yaml").read_text()
    for path in run.rglob("*"):
        assert not path.is_file() or b"Zq8hunter" not in path.read_bytes(), path
