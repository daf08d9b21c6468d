"""Who said code may run: a run or an artifact someone sent you runs none of its code unless you say so.

Three things in a run directory or an exported artifact are code rather than data: an env id naming a Python
module (``mymod:Env``, imported to build the env: the module runs on import), a run's base controller naming
one (``env.base_controller=mymod:MyPID``, imported to build the controller) and a TorchScript program
(``.ts.pt``: TorchScript source that torch compiles and runs). ``rlpilot eval RUN|ARTIFACT``, ``export RUN``
and ``train --resume RUN`` build what they read from files, so they refuse each with one line unless the
command line says ``--trust-code``. Commands where the user names the env or the controller on the command
line (``train ALGO mymod:Env``, ``check mymod:Env``, a preset with ``--set env.id=...`` or
``--set env.base_controller=...``, ``eval ENV --controller mymod:MyPID``) import it as asked. An exported
artifact holds the controller traced into the file (data): playing it imports nothing. Reading commands
(``plot``, ``doctor``) never import anything a run names. Checked here, torch-free, before anything loads.
"""

from __future__ import annotations

from pathlib import Path

from rlpilot.common.errors import UserError

FLAG = "--trust-code"
_allowed = False


def allow_code(allowed: bool = True) -> None:
    """The command line said ``--trust-code``: TorchScript artifacts may load in this process."""
    global _allowed
    _allowed = allowed


def code_allowed() -> bool:
    return _allowed


def _artifact_signature(path: Path) -> dict | None:
    """The artifact's signature, read within bounds (a pipe or a huge file under its name is never read)."""
    from rlpilot.play.signature import read_signature

    try:
        return read_signature(path.with_name(path.name + ".json"))
    except (OSError, UserError):
        return None  # loading the artifact says what is wrong, in one line


def target_code(target: str | Path) -> str | None:
    """What running ``target`` (a run directory or an artifact) would execute, as the end of a sentence
    starting "it", or None when it is data only. A damaged run or signature gives None: loading it says
    what is wrong, in one line."""
    path = Path(target)
    env_id, where = None, ""
    if path.is_dir() and (path / "config.yaml").is_file():
        from rlpilot.runs import load_run

        try:
            env = load_run(path).config().env
        except UserError:
            return None
        env_id, where = env.id, " (named in its config.yaml)"
        controller = getattr(env, "base_controller", "none")
        if ":" not in env_id and ":" in controller:
            module = controller.partition(":")[0]
            return f"builds controller '{controller}'{where}: importing module '{module}' runs its code"
    elif path.is_file():
        signature = _artifact_signature(path)
        if signature is None:
            return None
        if signature.get("format") == "torchscript":
            return "is a TorchScript program, code that torch compiles and runs"
        env = signature.get("env")
        env_id = env.get("id") if isinstance(env, dict) else None
        where = f" (named in {path.name}.json)"
    if isinstance(env_id, str) and ":" in env_id:
        module = env_id.partition(":")[0]
        return f"builds env '{env_id}'{where}: importing module '{module}' runs its code"
    return None


def require_trust(target: str | Path, *, trusted: bool, verb: str) -> None:
    """One line, before anything loads, when ``target`` would run code and the user did not say ``--trust-code``."""
    found = target_code(target)
    if found is None or trusted:
        return
    raise UserError(f"{verb} {target}: it {found}; if you trust where it came from, add {FLAG} (docs/eval.md)")
