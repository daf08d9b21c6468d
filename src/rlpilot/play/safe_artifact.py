"""Loading an exported policy someone may have crafted, without running code from it.

``torch.export.load`` trusts its archive: a weight marked ``use_pickle: true`` is read with
``torch.load(weights_only=False)`` (any pickle runs), an "opaque object" constant with ``pickle.loads``,
sample inputs that fail the safe unpickler are retried with the unsafe one, ``guards_code`` strings are
compiled as Python, shape expressions go through ``sympy.sympify`` (which evaluates its input), a
``data/aotinductor`` folder loads a shared library, and a file that is not an archive gets a traceback
logged by torch before the error. So a ``.pt2`` is checked here first, as data, against what
``rlpilot export`` writes (torch 2.14 layout), and torch only reads the checked, rebuilt archive:

- the zip holds only the archive's own files: version and format markers, ``models/model.json``, the
  weights/constants configs, raw tensor files ``weight_N`` / ``tensor_N`` and ``sample_inputs/model.pt``;
- every weight and constant is a raw tensor (``use_pickle`` false), never a pickled or custom object;
- the sample inputs load with ``torch.load(weights_only=True)`` (so torch's unsafe retry never happens);
- the graph calls ATen/prims operators only (no Python callables, no higher-order ops), has no guards
  code but the one comparing the observation's and the state's batch sizes (a stateful controller), its
  shape expressions are arithmetic on symbols, and every name is a plain dotted identifier;
- node metadata (stack traces, module paths: text torch copies into generated code) is dropped.

Anything else is a :class:`UserError` naming the file: export the run again.

TorchScript (``.ts.pt``) is a program: its ``code/`` folder is TorchScript source that ``torch.jit.load``
compiles and runs. TorchScript cannot call Python, but it can call any operator registered in the process
(file-reading ones among them), and its archive format is the one the ``weights_only`` bypass of
CVE-2025-32434 went through. It is loaded only when the user says so (``--trust-code``); ``rlpilot
export`` reloads its own fresh file for the parity check. ONNX files run on onnxruntime, which executes
no Python.
"""

from __future__ import annotations

import io
import json
import re
import zipfile
from pathlib import Path
from typing import Any

from rlpilot.common.errors import UserError
from rlpilot.common.files import read_regular

_ARCHIVE_FILES = re.compile(
    r"(archive_format|archive_version|byteorder|\.data/version|\.data/serialization_id|models/model\.json"
    r"|data/weights/model_weights_config\.json|data/weights/weight_\d+"
    r"|data/constants/model_constants_config\.json|data/constants/tensor_\d+|data/sample_inputs/model\.pt)"
)
_RAW_PAYLOAD = re.compile(r"(weight|tensor)_\d+")
_NAME = re.compile(r"[A-Za-z_][\w.\-]*|")  # a node, input, output or parameter name; or empty
_BATCH_GUARD = re.compile(r"L\['(observation|state)'\]\.size\(\)\[0\] == L\['(observation|state)'\]\.size\(\)\[0\]")
"""The one guard torch writes for a stateful controller's artifact: the observation and state batches agree
(checked character by character, so the only code torch compiles from it is that comparison)."""
_OPERATOR = re.compile(r"torch\.ops\.(aten|prims)\.\w+\.\w+|_operator\.getitem")
_SYMBOL_DECL = re.compile(r"Symbol\('[A-Za-z_]\w*'(?:, \w+=(?:True|False))*\)")
_EXPRESSION = re.compile(r"[\w\s+\-*/(),.%<>=!]*")
_EXPRESSION_WORDS = {
    "S",  # a Symbol(...) declaration, replaced
    "Max",
    "Min",
    "Abs",
    "Mod",
    "FloorDiv",
    "CeilDiv",
    "CleanDiv",
    "ModularIndexing",
    "PythonMod",
    "IntTrueDiv",
    "FloatTrueDiv",
    "TruncToInt",
    "ToFloat",
    "Integer",
    "Rational",
    "Eq",
    "Ne",
    "Lt",
    "Le",
    "Gt",
    "Ge",
    "And",
    "Or",
    "Not",
    "True",
    "False",
    "oo",
    "floor",
    "ceiling",
}
_SYMBOL = re.compile(r"[a-z]{1,3}\d+")
MAX_ARCHIVE_BYTES = 512 * 2**20
"""The largest artifact file read, in any format (an exported MLP policy is 10-100 KB)."""


def _refuse(path: Path, why: str) -> UserError:
    return UserError(f"{path} is not a policy rlpilot export wrote ({why}); export the run again (rlpilot export RUN)")


def _check_expression(path: Path, text: str) -> None:
    rest = _SYMBOL_DECL.sub("S", text)
    words = set(re.findall(r"[A-Za-z_]\w*", rest))
    odd = [w for w in words if w not in _EXPRESSION_WORDS and not _SYMBOL.fullmatch(w)]
    if not _EXPRESSION.fullmatch(rest) or "__" in rest or odd:
        raise _refuse(path, f"a shape expression that is not arithmetic: {text[:60]!r}")


def _check_graph(path: Path, program: dict) -> None:
    """Raises unless the serialized program is plain operators on tensors; drops node metadata in place."""
    guards = program.get("guards_code") or []
    if not isinstance(guards, list) or not all(isinstance(g, str) and _BATCH_GUARD.fullmatch(g) for g in guards):
        raise _refuse(path, "it carries guards code")
    graph = program.get("graph_module", {}).get("graph", {})
    nodes = graph.get("nodes")
    if not isinstance(nodes, list) or not nodes:
        raise _refuse(path, "no graph")
    for node in nodes:
        target = node.get("target")
        if not isinstance(target, str) or not _OPERATOR.fullmatch(target):
            raise _refuse(path, f"it calls {str(target)[:60]!r}, not a tensor operator")
        if "from_file" in target:
            raise _refuse(path, "it reads files")
        node["metadata"] = {}

    def walk(value: Any, key: str = "") -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                walk(v, k)
        elif isinstance(value, list):
            for v in value:
                walk(v, key)
        elif isinstance(value, str):
            if key == "expr_str":
                _check_expression(path, value)
            elif key in ("in_spec", "out_spec"):  # pytree specs: JSON that torch parses as JSON
                if "\n" in value or "\\" in value:
                    raise _refuse(path, "a malformed input/output spec")
            elif key not in ("target", "torch_version", "schema_version") and not _NAME.fullmatch(value):
                raise _refuse(path, f"a name that is not an identifier: {value[:60]!r}")

    walk({k: v for k, v in program.items() if k not in ("range_constraints", "guards_code")})  # guards: above
    for symbol in program.get("range_constraints") or {}:
        if not _SYMBOL.fullmatch(str(symbol)):
            raise _refuse(path, f"a shape symbol {str(symbol)[:40]!r}")


def _check_payload_config(path: Path, data: bytes) -> None:
    try:
        entries = json.loads(data)["config"]
    except (ValueError, KeyError, TypeError):
        raise _refuse(path, "an unreadable weights config") from None
    for name, meta in entries.items():
        if not isinstance(meta, dict) or meta.get("use_pickle") is not False:
            raise _refuse(path, f"{str(name)[:40]!r} is pickled, not a raw tensor")
        if not _RAW_PAYLOAD.fullmatch(str(meta.get("path_name"))):
            raise _refuse(path, f"{str(name)[:40]!r} is not a raw tensor file")


def checked_pt2(path: Path, data: bytes | None = None) -> io.BytesIO:
    """The ``.pt2`` at ``path`` checked (module docstring) and rebuilt in memory for ``torch.export.load``;
    ``data``: its bytes, already read (else read here: a regular file of at most :data:`MAX_ARCHIVE_BYTES`)."""
    if data is None:
        data = read_regular(Path(path), MAX_ARCHIVE_BYTES, advice="export the run again (rlpilot export RUN)")
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, OSError):
        raise _refuse(path, "not a zip archive") from None
    with archive:
        names = archive.namelist()
        prefixes = {name.partition("/")[0] for name in names}
        if len(prefixes) != 1 or not all("/" in name for name in names):
            raise _refuse(path, "not a pt2 archive")
        prefix = prefixes.pop() + "/"
        odd = [name for name in names if not _ARCHIVE_FILES.fullmatch(name[len(prefix) :])]
        if odd:
            raise _refuse(path, f"it holds {odd[0][len(prefix) :][:60]!r}")
        if f"{prefix}models/model.json" not in names:
            raise _refuse(path, "no models/model.json")
        if sum(info.file_size for info in archive.infolist()) > 4 * MAX_ARCHIVE_BYTES:
            raise _refuse(path, "it unpacks to more than 2 GiB")
        contents = {name: archive.read(name) for name in names}
    try:
        _check_contents(path, contents, prefix)
    except (AttributeError, TypeError, KeyError, ValueError, RecursionError):  # JSON of another shape
        raise _refuse(path, "a malformed program or weights config") from None
    rebuilt = io.BytesIO()
    with zipfile.ZipFile(rebuilt, "w", zipfile.ZIP_STORED) as out:
        for name, data in contents.items():
            out.writestr(name, data)
    rebuilt.seek(0)
    return rebuilt


def _check_contents(path: Path, contents: dict[str, bytes], prefix: str) -> None:
    """The members' checks (module docstring); ``models/model.json`` is replaced by its metadata-free copy."""
    import torch

    for config in ("data/weights/model_weights_config.json", "data/constants/model_constants_config.json"):
        if prefix + config in contents:
            _check_payload_config(path, contents[prefix + config])
    sample = contents.get(f"{prefix}data/sample_inputs/model.pt")
    if sample:
        try:
            torch.load(io.BytesIO(sample), weights_only=True)
        except Exception:  # noqa: BLE001 (whatever the safe unpickler refuses, torch would retry unsafely)
            raise _refuse(path, "sample inputs that are not plain tensors") from None
    try:
        program = json.loads(contents[f"{prefix}models/model.json"])
    except ValueError:
        raise _refuse(path, "models/model.json is not JSON") from None
    if not isinstance(program, dict):
        raise _refuse(path, "models/model.json is not a program")
    _check_graph(path, program)
    contents[f"{prefix}models/model.json"] = json.dumps(program).encode()


def load_pt2(path: Path, data: bytes | None = None):
    """The checked archive's program as a module (torch's own logging of a failed load silenced); ``data`` as
    :func:`checked_pt2`'s."""
    import logging

    import torch

    buffer = checked_pt2(path, data)
    loggers = [logging.getLogger(name) for name in ("torch.export", "torch._export", "torch.export.pt2_archive")]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.CRITICAL)
    try:
        return torch.export.load(buffer).module()
    finally:
        for logger, level in zip(loggers, levels):
            logger.setLevel(level)
