"""Safe YAML loading that keeps line numbers, refuses hostile input, and maps key paths to lines."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from .errors import PlannerError

MAX_FILE_BYTES = 5 * 2**20  # scenario files are a few KiB; a quarter file with 500 runs ~ 200 KiB
MAX_EXPANDED_NODES = 200_000  # guards against alias ("billion laughs") bombs
_CORE_TAGS = {f"tag:yaml.org,2002:{name}" for name in ("str", "int", "float", "bool", "null", "map", "seq")}


def read_text(path: Path, what: str = "file") -> str:
    """Read a user file as UTF-8 text, refusing missing, huge, empty and binary files."""
    if not path.exists():
        raise PlannerError(f"no such {what}", str(path))
    if path.is_dir():
        raise PlannerError(f"expected a {what}, found a directory", str(path))
    size = path.stat().st_size
    if size > MAX_FILE_BYTES:
        raise PlannerError(
            f"file is {size / 2**20:.1f} MiB; refusing files above {MAX_FILE_BYTES // 2**20} MiB", str(path)
        )
    raw = path.read_bytes()
    if b"\x00" in raw:
        raise PlannerError(f"this is a binary file, expected a YAML {what}", str(path))
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise PlannerError(f"not UTF-8 text (byte {exc.start}); expected a YAML {what}", str(path)) from None
    if not text.strip():
        raise PlannerError(f"the file is empty; expected a YAML {what}", str(path))
    return text


def load_yaml(path: Path, what: str = "scenario file") -> Any:
    """Parse YAML with the round-trip loader (keeps line numbers, builds no Python objects from tags)."""
    from ruamel.yaml import YAML
    from ruamel.yaml.error import MarkedYAMLError, YAMLError

    text = read_text(path, what)
    yaml = YAML(typ="rt", pure=True)
    try:
        data = yaml.load(text)
    except MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = f":{mark.line + 1}" if mark is not None else ""
        problem = " ".join(str(exc.problem or exc.context or "invalid YAML").split())
        raise PlannerError(f"YAML syntax error: {problem}", f"{path}{line}") from None
    except YAMLError as exc:
        raise PlannerError(f"YAML error: {' '.join(str(exc).split())}", str(path)) from None
    if data is None:
        raise PlannerError(f"the file holds no YAML document; expected a {what}", str(path))
    _refuse_tags_and_bombs(data, path)
    return data


def _refuse_tags_and_bombs(data: Any, path: Path) -> None:
    """Reject explicit tags (no object construction) and alias expansions that would explode."""
    sizes: dict[int, int] = {}

    def size(node: Any) -> int:
        key = id(node)
        if key in sizes:
            return sizes[key]
        tag = getattr(node, "tag", None)
        tag_value = getattr(tag, "value", None)
        if tag_value and tag_value not in _CORE_TAGS:
            raise PlannerError(f"YAML tags such as {tag_value!r} are not allowed", where(path, data, _path_of(data, node)))
        sizes[key] = 1  # provisional, breaks recursive aliases
        if isinstance(node, dict):
            total = 1 + sum(size(k) + size(v) for k, v in node.items())
        elif isinstance(node, list):
            total = 1 + sum(size(v) for v in node)
        else:
            total = 1
        sizes[key] = total
        if total > MAX_EXPANDED_NODES:
            raise PlannerError(
                f"YAML expands to more than {MAX_EXPANDED_NODES:,} nodes (alias bomb?); refusing it", str(path)
            )
        return total

    size(data)


def _path_of(root: Any, target: Any) -> tuple:
    """Find the key path of `target` inside `root` (for error messages; small documents only)."""
    stack: list[tuple[Any, tuple]] = [(root, ())]
    seen: set[int] = set()
    while stack:
        node, loc = stack.pop()
        if node is target:
            return loc
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, dict):
            stack.extend((v, loc + (k,)) for k, v in node.items())
        elif isinstance(node, list):
            stack.extend((v, loc + (i,)) for i, v in enumerate(node))
    return ()


def line_of(data: Any, loc: tuple) -> int | None:
    """1-based line of the deepest part of key path `loc` that exists in the parsed YAML."""
    line = None
    node = data
    for part in loc:
        lc = getattr(node, "lc", None)
        try:
            if isinstance(node, dict) and part in node:
                if lc is not None:
                    line = lc.key(part)[0] + 1
                node = node[part]
            elif isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
                if lc is not None:
                    line = lc.item(part)[0] + 1
                node = node[part]
            else:
                break
        except (KeyError, TypeError, AttributeError):
            break
    if line is None and getattr(data, "lc", None) is not None:
        line = data.lc.line + 1
    return line


def key_path(loc: tuple) -> str:
    """('workloads', 0, 'memory') -> 'workloads[0].memory'."""
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def where(path: Path, data: Any, loc: tuple) -> str:
    """'file:line (key.path)' for an error message."""
    line = line_of(data, loc)
    place = f"{path}:{line}" if line else str(path)
    return f"{place} ({key_path(loc)})" if loc else place


def to_plain(data: Any) -> Any:
    """Round-trip containers -> plain dicts/lists (pydantic validates plain data)."""
    if isinstance(data, dict):
        return {str(k) if not isinstance(k, (str, int, float, bool)) else k: to_plain(v) for k, v in data.items()}
    if isinstance(data, list):
        return [to_plain(v) for v in data]
    if hasattr(data, "value") and type(data).__name__ == "TaggedScalar":
        return data.value
    for plain in (bool, int, float, str):
        if isinstance(data, plain):
            return plain(data)
    return data
