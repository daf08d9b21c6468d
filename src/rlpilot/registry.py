"""Names, torch-free: algorithms, presets and environment ids.

Everything the CLI must answer before any heavy import lives here: an unknown preset, algorithm or
env id, or a typo'd key, is one line in well under a second (gymnasium's registry is the only
import). Lower layers reach optional upper ones through the dotted paths in these tables (``module:attr``,
imported when used), never through imports: the loop does not import GRPO, doctor does not import
the LLM package, and an optional extra is never imported to read a run.
"""

from __future__ import annotations

import difflib
import importlib
import os
import sys
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from rlpilot.common.errors import UserError


@dataclass(frozen=True)
class AlgorithmEntry:
    kind: str
    """``control`` (an env, a collector and an algorithm) or ``llm`` (a language model and prompts)."""
    sections: tuple[str, ...]
    """Config sections a run of this algorithm reads (``guard`` and ``train`` come with every one)."""
    implementation: str
    """``module:attr`` of the algorithm class (control, multiagent) or the trainable (llm)."""
    settings: str = ""
    """The config section holding the algorithm's hyperparameters (empty: the section named like the
    algorithm; MAPPO and IPPO read ``ppo``)."""


ALGORITHMS: dict[str, AlgorithmEntry] = {
    "ppo": AlgorithmEntry("control", ("env", "model", "ppo", "collect"), "rlpilot.control.algos.ppo:PPO"),
    "dqn": AlgorithmEntry("control", ("env", "model", "dqn", "collect"), "rlpilot.control.algos.dqn:DQN"),
    "sac": AlgorithmEntry("control", ("env", "model", "sac", "collect"), "rlpilot.control.algos.sac:SAC"),
    "td3": AlgorithmEntry("control", ("env", "model", "td3", "collect"), "rlpilot.control.algos.td3:TD3"),
    "grpo": AlgorithmEntry("llm", ("llm", "grpo"), "rlpilot.llm.grpo:GRPOTrainable"),
    # multi-agent PPO on a group of agents (docs/multi-agent.md): centralised critic or per-agent critic
    "mappo": AlgorithmEntry("multiagent", ("env", "model", "ppo", "marl"), "rlpilot.multiagent.mappo:MAPPO", "ppo"),
    "ippo": AlgorithmEntry("multiagent", ("env", "model", "ppo", "marl"), "rlpilot.multiagent.mappo:MAPPO", "ppo"),
}
COMMON_SECTIONS = ("guard", "train")

TRAINABLES = {
    "control": "rlpilot.control.trainable:ControlTrainable",
    "multiagent": "rlpilot.multiagent.trainable:MultiAgentTrainable",
}
"""Kind of run -> its Trainable builder (``llm`` algorithms name their trainable directly)."""


def algorithm(name: str) -> AlgorithmEntry:
    if name not in ALGORITHMS:
        raise UserError(f"unknown algorithm '{name}' (choose from {', '.join(ALGORITHMS)})")
    return ALGORITHMS[name]


def settings_section(algo: str) -> str:
    """The config section of ``algo``'s hyperparameters (``ppo`` for ``mappo``)."""
    entry = algorithm(algo)
    return entry.settings or algo


def sections(algo: str) -> tuple[str, ...]:
    return (*algorithm(algo).sections, *COMMON_SECTIONS)


def load_object(path: str) -> Any:
    """``package.module:attr`` -> the object (the registries' way down to optional layers)."""
    module_name, _, attr = path.partition(":")
    return getattr(importlib.import_module(module_name), attr)


def trainable_builder(algo: str) -> Any:
    entry = algorithm(algo)
    return load_object(TRAINABLES.get(entry.kind, entry.implementation))


# -- presets ---------------------------------------------------------------------------------
def preset_names() -> list[str]:
    folder = resources.files("rlpilot") / "presets"
    return sorted(p.name[:-5] for p in folder.iterdir() if p.name.endswith(".yaml"))


def preset_text(name: str) -> str:
    """A preset's YAML. A preset is a name from the list, never a path: ``../x`` cannot reach files
    outside the package (a config file is given with ``--config FILE``)."""
    names = preset_names()
    if name not in names:
        close = difflib.get_close_matches(name, names, n=3, cutoff=0.5)
        hint = f" Did you mean {', '.join(close)}?" if close else ""
        raise UserError(
            f"unknown preset '{name}'.{hint} `rlpilot presets` lists them; "
            "`rlpilot train ALGO ENV` runs an algorithm on any env; `--config FILE` trains a config file."
        )
    return (resources.files("rlpilot") / "presets" / f"{name}.yaml").read_text()


# -- environment ids -------------------------------------------------------------------------
NAMESPACES = {
    "MinAtar": ("minatar.gym", "register_envs", "pixels"),
    # rlpilot/ReacherTrack-v0 (docs/robot-arm.md), rlpilot/SlowCartPole-v0 (docs/distributed.md)
    "rlpilot": ("rlpilot.envs.arm.env", "register_envs", "mujoco"),  # torch-free: `rlpilot presets` registers them
}
"""gymnasium namespaces whose ids a package registers on import: (module, its register function, extra)."""


MULTIAGENT_PACKAGES = ("mpe2.", "pettingzoo.", "vmas.")
"""Multi-agent env ids: PettingZoo modules with a ``parallel_env`` function (``mpe2.simple_spread_v3``), or
VMAS scenarios (``vmas.navigation``)."""
NATIVE_MULTIAGENT = {"mpe2.simple_spread_v3": "rlpilot.multiagent.spread:SpreadVector"}
"""Multi-agent envs with a batched tensor implementation (``env.backend=native``, the default for them)."""


MULTIAGENT_KWARG_BOUNDS = {"mpe2.simple_spread_v3": {"N": (2, 64)}}
"""Integer env.kwargs rlpilot bounds for the multi-agent envs it implements: (low, high). simple_spread's
observation grows with N (4 + 6N - 4 numbers an agent) and a step with N^2: N=1000 would take minutes and
gigabytes before its first frame."""


def env_kwargs_problem(env_id: str, kwargs: dict) -> str | None:
    """What is wrong with ``kwargs`` for ``env_id`` under :data:`MULTIAGENT_KWARG_BOUNDS` (one line), or None."""
    for name, (low, high) in MULTIAGENT_KWARG_BOUNDS.get(env_id, {}).items():
        if name not in kwargs:
            continue
        value = kwargs[name]
        if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
            return f"env.kwargs.{name} for {env_id} must be an integer within [{low}, {high}] (got {value!r})"
    return None


def is_multiagent_env(env_id: str) -> bool:
    return env_id.startswith(MULTIAGENT_PACKAGES)


def is_vmas_env(env_id: str) -> bool:
    return env_id.startswith("vmas.")


def resolve_multiagent_env(env_id: str, backend: str = "pettingzoo") -> Any:
    """The PettingZoo module of a multi-agent id (imported: a typo or a missing extra is one line); None
    when ``backend`` (``auto``, ``native``) runs rlpilot's own implementation, which needs no PettingZoo."""
    if backend in ("auto", "native") and env_id in NATIVE_MULTIAGENT:
        return None
    if not is_multiagent_env(env_id):
        raise UserError(
            f"'{env_id}' is not a multi-agent env: mappo/ippo train on PettingZoo modules such as "
            "mpe2.simple_spread_v3 (pip install 'rlpilot[multiagent]') or VMAS scenarios such as vmas.navigation"
        )
    if is_vmas_env(env_id):
        return _vmas_scenario(env_id)
    try:
        module = importlib.import_module(env_id)
    except ImportError as exc:
        package = env_id.partition(".")[0]
        if exc.name and exc.name.split(".")[0] == package and exc.name != env_id:
            raise UserError(f"'{env_id}' needs the multiagent extra: pip install 'rlpilot[multiagent]'") from None
        known = sorted(NATIVE_MULTIAGENT)
        raise UserError(f"unknown multi-agent environment '{env_id}' (known to work: {', '.join(known)})") from None
    if not callable(getattr(module, "parallel_env", None)):
        raise UserError(f"'{env_id}' has no parallel_env(): give a PettingZoo env module with the parallel API")
    return module


def _vmas_scenario(env_id: str) -> Any:
    """The VMAS scenario module of ``vmas.<scenario>`` (VMAS is GPL-3: only imported for these ids)."""
    try:
        import vmas
    except ImportError:
        raise UserError(f"'{env_id}' needs the vmas extra (VMAS is GPL-3): pip install 'rlpilot[vmas]'") from None
    name = env_id.removeprefix("vmas.")
    if name not in vmas.scenarios:
        close = difflib.get_close_matches(name, list(vmas.scenarios), n=3, cutoff=0.6)
        hint = f" Did you mean {', '.join('vmas.' + c for c in close)}?" if close else ""
        raise UserError(f"unknown VMAS scenario '{name}'.{hint}")
    return importlib.import_module(f"vmas.scenarios.{name}")


def register_namespace(env_id: str) -> None:
    import gymnasium as gym

    namespace = env_id.partition("/")[0] if "/" in env_id else None
    if namespace not in NAMESPACES or env_id in gym.registry:
        return
    module_name, register, extra = NAMESPACES[namespace]
    try:
        module = importlib.import_module(module_name)
    except ImportError:
        raise UserError(f"'{env_id}' needs the {extra} extra: pip install 'rlpilot[{extra}]'") from None
    if register is not None:
        getattr(module, register)()


def import_user_module(spec: str, what: str) -> tuple[Any, str]:
    """``package.module:Name`` -> (the imported module, ``Name``), for a user's env or controller (``what``
    names it in the error line). The working directory is on the path, as for a script next to where the
    user runs rlpilot. Only commands whose command line (or ``--trust-code``) names the module call this."""
    module_name, _, attr = spec.partition(":")
    if os.getcwd() not in sys.path:  # a user's module next to where they run rlpilot
        sys.path.append(os.getcwd())
    try:
        return importlib.import_module(module_name), attr
    except ImportError as exc:
        raise UserError(
            f"cannot import module '{module_name}' for {what} ({exc}); is it installed or on PYTHONPATH?"
        ) from None
    except Exception as exc:  # the user's module raised while importing
        raise UserError(f"importing '{module_name}' for {what} raised {type(exc).__name__}: {exc}") from None


def resolve_env(env_id: str) -> tuple[Any, str | None]:
    """(user class, None) for ``module:Class``, or (None, gymnasium id) for a registered id.

    ``module:Env-v0`` imports ``module`` (which registers the id) and returns the id. Only commands
    that build the env call this with a ``module:...`` id: it imports user code.
    """
    import gymnasium as gym

    if ":" in env_id:
        module, attr = import_user_module(env_id, f"env '{env_id}'")
        candidate = getattr(module, attr, None)
        if isinstance(candidate, type) and issubclass(candidate, gym.Env):
            return candidate, None
        env_id = attr
    register_namespace(env_id)
    if env_id not in gym.registry:
        close = difflib.get_close_matches(env_id, list(gym.registry), n=3, cutoff=0.6)
        hint = f" Did you mean {', '.join(close)}?" if close else ""
        raise UserError(
            f"unknown environment '{env_id}'.{hint} Use a gymnasium id, 'package.module:Class', "
            "or 'package.module:Id' for an id registered when the module is imported."
        )
    return None, env_id


def registered_spec(env_id: str):
    """gymnasium's spec of a plain registered id, without importing any user module (None otherwise)."""
    import gymnasium as gym

    if ":" in env_id:
        return None
    register_namespace(env_id)
    return gym.spec(env_id) if env_id in gym.registry else None


def is_config_file(target: str) -> bool:
    return target.endswith((".yaml", ".yml")) and Path(target).is_file()
