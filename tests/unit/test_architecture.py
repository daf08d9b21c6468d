"""The layout holds: the import graph of src/rlpilot (from the AST, imports inside functions included)
has no cycle, no module imports another's private name, and torch-free modules stay torch-free."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"


def modules() -> dict[str, Path]:
    found = {}
    for path in (SRC / "rlpilot").rglob("*.py"):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def imports(name: str, path: Path, known: dict[str, Path]) -> list[tuple[str, str]]:
    """(module imported, name imported or "") for every import of an rlpilot module in ``path``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [(alias.name, "") for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            for alias in node.names:
                target = f"{base}.{alias.name}"
                found.append((target, "") if target in known else (base, alias.name))
    return [(module, attr) for module, attr in found if module.split(".")[0] == "rlpilot"]


def resolve(module: str, known: dict[str, Path]) -> str | None:
    while module and module not in known:
        module = module.rpartition(".")[0]
    return module or None


def graph() -> dict[str, set[str]]:
    known = modules()
    edges: dict[str, set[str]] = {name: set() for name in known}
    for name, path in known.items():
        for module, _ in imports(name, path, known):
            target = resolve(module, known)
            if target and target != name and not name.startswith(target + "."):
                edges[name].add(target)
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in edges:
        if v not in index:
            visit(v)
    return found


def test_the_import_graph_has_no_cycle():
    assert cycles(graph()) == []


def test_the_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_module_imports_a_private_name_of_another():
    known = modules()
    private = [
        f"{name} imports {module}.{attr}"
        for name, path in known.items()
        for module, attr in imports(name, path, known)
        if attr.startswith("_") and not attr.startswith("__")
    ]
    assert private == []


def test_the_cli_registry_and_config_import_no_torch():
    """`rlpilot --help`, unknown names and typo'd keys answer before torch is imported."""
    code = (
        "import sys, rlpilot.cli, rlpilot.registry, rlpilot.config, rlpilot.runs, rlpilot.doctor; "
        "print(sorted(m for m in ('torch', 'torchrl', 'tensordict') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_the_arm_env_loads_no_torch_and_its_controllers_no_simulator():
    """`envs/arm/`: the env registers and runs without torch (a deployed artifact plays on it with numpy), and
    building `pd` / `pid` (the controller protocol, the residual law) loads no MuJoCo."""
    code = (
        "import sys, rlpilot.envs.arm.env; "
        "print(sorted(m for m in ('torch', 'torchrl', 'tensordict') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
    code = (
        "import sys, rlpilot.envs.catalogue, rlpilot.envs.residual; "
        "rlpilot.envs.catalogue.base_controller('pid', 'rlpilot/ReacherTrack-v0'); "
        "print(sorted(m for m in ('mujoco', 'gymnasium.envs.mujoco', 'rlpilot.envs.arm.env') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_the_layout_in_the_architecture_doc_matches_the_code():
    """Every module and package of src/rlpilot is named in docs/architecture.md, and every `x.py` or `x/`
    the doc's module table names exists."""
    import re

    doc = (SRC.parent / "docs" / "architecture.md").read_text()
    package = SRC / "rlpilot"
    entries = [
        p.name if p.is_file() else f"{p.name}/"
        for p in package.iterdir()
        if (p.suffix == ".py" and p.name != "__init__.py") or (p.is_dir() and (p / "__init__.py").exists())
    ]
    missing = [entry for entry in entries if f"`{entry}" not in doc]
    assert missing == [], f"not in docs/architecture.md: {missing}"
    named = re.findall(r"^\| `([a-z_/]+(?:\.py|/))`", doc, flags=re.M)
    assert named, "the module table was not found"
    absent = [name for name in named if not (package / name.rstrip("/")).exists()]
    assert absent == [], f"docs/architecture.md names modules that do not exist: {absent}"


# -- floors and layers ---------------------------------------------------------------------------
MAX_FLOORS = 11
"""The longest chain of imports, in modules (`floors`): 12 before the verbs took their variants in (issue 35)."""

LAYERS = [
    ("cli", ["rlpilot.cli"]),
    (
        "verbs",
        ["rlpilot.check", "rlpilot.play", "rlpilot.doctor", "rlpilot.sweep", "rlpilot.tune"]
        + ["rlpilot.reference", "rlpilot.compare", "rlpilot.adapt"],
    ),
    ("the loop", ["rlpilot.loop"]),
    ("training families", ["rlpilot.loop.trainable", "rlpilot.control", "rlpilot.multiagent", "rlpilot.llm"]),
    ("envs and parts", ["rlpilot.envs", "rlpilot.guard", "rlpilot.controllers", "rlpilot.plot"]),
    (
        "data",
        ["rlpilot.config", "rlpilot.runs", "rlpilot.registry", "rlpilot.common", "rlpilot.conditions", "rlpilot"],
    ),
]
"""Top to bottom; a module's layer is the one naming its longest prefix (``common``, the plumbing, sits with the data
that imports it; ``loop.trainable``, the protocol the families implement, sits with them; ``plot`` draws for the
``plot`` verb, the loop's curve and sweeps alike)."""


def floors(edges: dict[str, set[str]]) -> int:
    """The number of modules on the longest import chain (the graph must have no cycle)."""
    depth: dict[str, int] = {}

    def visit(module: str) -> int:
        if module not in depth:
            depth[module] = 1 + max((visit(target) for target in edges[module]), default=0)
        return depth[module]

    return max(visit(module) for module in edges)


def layer(module: str) -> int:
    matches = [
        (len(prefix), index)
        for index, (_, prefixes) in enumerate(LAYERS)
        for prefix in prefixes
        if module == prefix or module.startswith(prefix + ".")
    ]
    assert matches, f"{module} is in no layer of LAYERS"
    return max(matches)[1]


def test_floors_counts_the_longest_chain():
    assert floors({"a": {"b", "c"}, "b": {"c"}, "c": set(), "d": {"c"}}) == 3


def test_the_import_graph_is_at_most_max_floors_high():
    assert floors(graph()) <= MAX_FLOORS


def test_no_module_imports_a_higher_layer():
    """Arrows point down (cli -> verbs -> the loop -> training families -> envs and parts -> data): a training
    family carries no verb, and the loop reaches GRPO through the registry, not an import."""
    upward = [
        f"{name} ({LAYERS[layer(name)][0]}) imports {target} ({LAYERS[layer(target)][0]})"
        for name, targets in graph().items()
        for target in targets
        if layer(target) < layer(name)
    ]
    assert upward == []


def test_only_the_loop_imports_its_lifecycle():
    importers = [name for name, targets in graph().items() if "rlpilot.loop.lifecycle" in targets]
    assert importers and all(name.startswith("rlpilot.loop.") for name in importers), importers


# -- the arm wing and string imports ---------------------------------------------------------------
ARM = "rlpilot.envs.arm"
CATALOGUE = "rlpilot.envs.catalogue"
"""The controller catalogue, above the arm: building ``pd`` / ``pid`` / ``adaptive-pd`` by name imports the arm's
classes with import statements (they subclass the protocol's ``Controller``, which imports neither)."""


def in_arm(module: str) -> bool:
    return module == ARM or module.startswith(ARM + ".")


def test_only_the_arm_and_the_controller_catalogue_import_the_arm():
    """The arm is a wing: generic verbs and parts (export, the residual law, the protocol) reach it through hooks
    it declares (an env class's ``export_state``, a controller's ``gate_index``), never by importing it."""
    importers = sorted(
        name
        for name, targets in graph().items()
        if not in_arm(name) and name != CATALOGUE and any(in_arm(target) for target in targets)
    )
    assert importers == []


STRING_IMPORTS = {
    "rlpilot": "the package's lazy face: its public names' modules, imported when a name is first used",
    "rlpilot.registry": "the deliberate tables (docs/architecture.md): ALGORITHMS and TRAINABLES (the loop reaches "
    "GRPO and the families without an upward import) and the env namespaces (rlpilot/... ids registered by "
    "rlpilot.envs.arm.env.register_envs), imported when used so that the registry stays torch-free",
    "rlpilot.envs.arm.env": "gymnasium's entry points (register_envs): gymnasium imports the env when it makes it",
    "rlpilot.loop.curve_helper": "its own name, for the helper process it starts (python -m)",
    "rlpilot.sweep": "what its pool's fork server imports once (PRELOAD), for every worker it forks",
}
"""The modules allowed to name an rlpilot module in a string, and why; nothing else does."""
IMPORT_BY_NAME = {"rlpilot", "rlpilot.registry", "rlpilot.common.torchrl_import"}
"""The modules allowed to call ``importlib.import_module`` / ``__import__`` (the tables above, a user's module,
TorchRL's optional integrations)."""


def string_imports() -> dict[str, list[str]]:
    """Strings in src/rlpilot that are an rlpilot module's name (``rlpilot.x.y`` or ``rlpilot.x.y:attr``), by the
    module holding them; and calls that import a module by name, as ``import_module(...)``."""
    known = modules()
    found: dict[str, list[str]] = {}
    for name, path in known.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                target = node.value.split(":")[0]
                if target.startswith("rlpilot.") and target in known:
                    found.setdefault(name, []).append(node.value)
            elif isinstance(node, ast.Call):
                call = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
                if call in ("import_module", "__import__"):
                    found.setdefault(name, []).append(f"{call}(...)")
    return found


def test_no_string_import_stands_in_for_a_real_one():
    """A module is imported with an import statement, where the layers allow it; a dotted name in a string only in
    the deliberate tables (:data:`STRING_IMPORTS`), and the arm's name only in the registry's env namespaces and
    the arm's own gymnasium registration."""
    found = string_imports()
    named = {name: [v for v in values if not v.endswith("(...)")] for name, values in found.items()}
    strays = {name: values for name, values in named.items() if values and name not in STRING_IMPORTS}
    assert strays == {}
    by_name = sorted(name for name, values in found.items() if any(v.endswith("(...)") for v in values))
    assert set(by_name) <= IMPORT_BY_NAME, by_name
    naming_the_arm = sorted(
        name for name, values in named.items() if not in_arm(name) and any(in_arm(v.split(":")[0]) for v in values)
    )
    assert naming_the_arm in ([], ["rlpilot.registry"]), naming_the_arm


def test_the_string_import_finder_finds_one(tmp_path, monkeypatch):
    package = tmp_path / "rlpilot"
    (package / "envs" / "arm").mkdir(parents=True)
    for path in ("__init__.py", "envs/__init__.py", "envs/arm/__init__.py", "envs/arm/catalogue.py"):
        (package / path).write_text("")
    (package / "controllers.py").write_text(
        'import importlib\nARM = "rlpilot.envs.arm.catalogue"\narm = importlib.import_module(ARM)\n'
    )
    monkeypatch.setattr(sys.modules[__name__], "SRC", tmp_path)
    assert string_imports() == {"rlpilot.controllers": ["rlpilot.envs.arm.catalogue", "import_module(...)"]}
