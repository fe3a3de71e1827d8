"""Safe reading of user files: YAML that keeps line numbers, refuses hostile input and maps key paths to lines,
and JSON (traces, plans, HF configs) that cannot crash the reader."""

from __future__ import annotations

import functools
import json
import math
import stat
import warnings
from pathlib import Path
from typing import Any

from planner.errors import PlannerError

MAX_FILE_BYTES = 64 * 2**20
"""Input files above this size are refused before parsing (`planner --max-input-size` raises it);
a 20,000-workload scenario is about 4 MiB."""
MAX_DEPTH = 64  # a scenario nests about 5 levels; deeper input is refused before anything recurses
# nodes that aliases may add by expansion ("billion laughs" guard)
MAX_ALIAS_NODES = 100_000
_CORE_TAGS = {
    f"tag:yaml.org,2002:{name}"
    for name in ("str", "int", "float", "bool", "null", "map", "seq", "timestamp")
}


class YamlMapping(dict):
    """A parsed YAML mapping (the document root) that knows the line of every key path."""

    lines: dict[tuple, int]


READ_PIECE_BYTES = 1 << 24


def read_capped(path: Path, what: str = "file") -> bytes:
    """A user file's bytes, refusing missing files, folders, devices and pipes, unreadable files and
    files above MAX_FILE_BYTES; reads at most the cap plus one byte, as a reported size can lie
    (/dev/zero and /proc files report 0)."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        raise PlannerError(f"no such {what}", str(path)) from None
    except OSError as exc:
        raise PlannerError(
            f"cannot read {what}: {exc.strerror or exc}", str(path)
        ) from None
    if stat.S_ISDIR(mode):
        raise PlannerError(f"expected a file ({what}), found a directory", str(path))
    if not stat.S_ISREG(mode):
        raise PlannerError(
            f"expected a regular file ({what}), found a device, pipe or socket",
            str(path),
        )
    _check_size(path, path.stat().st_size)  # before reading, when the size is known
    try:
        with (
            path.open("rb") as handle
        ):  # in pieces: read(n) allocates n bytes first, and the cap may be 100GiB
            pieces, left = [], MAX_FILE_BYTES + 1
            while left > 0 and (piece := handle.read(min(left, READ_PIECE_BYTES))):
                pieces.append(piece)
                left -= len(piece)
        raw = b"".join(pieces)
    except OSError as exc:
        raise PlannerError(
            f"cannot read {what}: {exc.strerror or exc}", str(path)
        ) from None
    _check_size(path, len(raw))
    return raw


def _check_size(path: Path, size: int) -> None:
    if size > MAX_FILE_BYTES:
        raise PlannerError(
            f"file is {size / 2**20:.1f} MiB; refusing input above {MAX_FILE_BYTES / 2**20:g} MiB "
            f"(raise the limit with: planner --max-input-size {math.ceil(size / 2**20) + 1}MiB ...)",
            str(path),
        )


def read_text(path: Path, what: str = "file", language: str = "YAML") -> str:
    """Read a user file as UTF-8 text, refusing missing, huge, empty and binary files; errors name what was
    expected (`a JSON plan file`, `a TOML config file`)."""
    raw = read_capped(path, what)
    if b"\x00" in raw:
        raise PlannerError(
            f"this is a binary file, expected a {language} {what}", str(path)
        )
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise PlannerError(
            f"not UTF-8 text (byte {exc.start}); expected a {language} {what}",
            str(path),
        ) from None
    if not text.strip():
        raise PlannerError(
            f"the file is empty; expected a {language} {what}", str(path)
        )
    return text


def parse_json(text: str, path: Path, what: str) -> Any:
    """JSON from a user file, or one located line: a syntax error (file:line), nesting deeper than MAX_DEPTH (the
    parser would recurse until Python stops it) and integers of thousands of digits (which Python refuses to
    read) alike. The nesting is checked before anything recurses into the result."""
    deep = f"nested deeper than {MAX_DEPTH} levels; expected a {what}"
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise PlannerError(
            f"not valid JSON: {exc.msg} (column {exc.colno}); expected a {what}",
            f"{path}:{exc.lineno}",
        ) from None
    except RecursionError:
        raise PlannerError(deep, str(path)) from None
    except ValueError:  # Python reads integers of at most 4,300 digits
        raise PlannerError(
            f"an integer of thousands of digits; expected a {what}", str(path)
        ) from None
    level, depth = [data], 0
    while level:
        depth += 1
        if depth > MAX_DEPTH:
            raise PlannerError(deep, str(path))
        level = [
            child
            for node in level
            if isinstance(node, (dict, list))
            for child in (node.values() if isinstance(node, dict) else node)
        ]
    return data


def is_quarter(raw: Any) -> bool:
    """Whether parsed YAML is a quarter file (it has a horizon; a scenario has none): how the commands that take
    either tell them apart, and how the others name the one to use."""
    return isinstance(raw, dict) and "horizon" in raw


def load_yaml(path: Path, what: str = "scenario file", text: str | None = None) -> Any:
    """Parse YAML 1.2 safely and fast, keeping the line of every key path for error messages; `text`, when
    given, is the file's content (the Python API's YAML text or dict), `path` then only names it.

    One pass over the C parser's events (ruamel.yaml.clib) bounds nesting depth and alias expansion,
    refuses tags and notes lines (`_scan`), and builds the plain data as it goes (`_Builder`). A document
    the builder leaves to the library (merge keys, a duplicate key, ...) is built, or refused, by its
    safe loader.
    """
    from ruamel.yaml import YAML
    from ruamel.yaml.error import MarkedYAMLError, YAMLError
    from ruamel.yaml.reader import ReaderError

    text = read_text(path, what) if text is None else text
    yaml = YAML(typ="safe")
    line_at = _Lines(text)
    try:
        with warnings.catch_warnings():
            # YAML library notices: the errors below say what matters
            warnings.simplefilter("ignore")
            builder = _Builder(yaml)
            lines = _scan(yaml.parse(text), path, line_at, builder)
            data = yaml.load(text) if builder.deferred else builder.root
    except MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = f":{line_at(mark)}" if mark is not None else ""
        context = exc.context or ""
        if context and exc.context_mark is not None and exc.problem_mark is not None:
            context += f" (line {line_at(exc.context_mark)})"
        problem = (
            " ".join(", ".join(p for p in (context, exc.problem) if p).split())
            or "invalid YAML"
        )
        raise PlannerError(f"YAML syntax error: {problem}", f"{path}{line}") from None
    except ReaderError as exc:  # a character YAML does not allow
        line = text.count("\n", 0, exc.position) + 1
        code = (
            exc.character
            if isinstance(exc.character, int)
            else ord(str(exc.character)[:1] or "?")
        )
        raise PlannerError(
            f"character U+{code:04X} is not allowed in YAML (control characters are not)",
            f"{path}:{line}",
        ) from None
    except _BadScalar as exc:
        raise PlannerError(
            f"a number of {exc.length:,} characters (Python reads integers of at most 4,300 digits); "
            "quote it if it is text",
            f"{path}:{line_at(exc.mark)}",
        ) from None
    except (YAMLError, ValueError, TypeError) as exc:
        raise PlannerError(
            f"YAML error: {' '.join(str(exc).split())}", str(path)
        ) from None
    if data is None:
        raise PlannerError(
            f"the file holds no YAML document; expected a {what}", str(path)
        )
    if isinstance(data, dict):
        data = YamlMapping(data)
        data.lines = lines
    return data


class _BadScalar(Exception):
    """A scalar the core schema reads as a number Python cannot build, where it starts."""

    def __init__(self, mark, length: int) -> None:
        super().__init__(mark)
        self.mark, self.length = mark, length


class _Lines:
    """1-based line of a parser mark, counting newlines only (as editors do; the YAML scanner also
    breaks lines at U+2028 and U+0085, which would put errors on the wrong line). Marks come in
    increasing order during a scan, so counting is incremental."""

    def __init__(self, text: str):
        self.text, self.index, self.line = text, 0, 1

    def __call__(self, mark) -> int:
        index = getattr(mark, "index", None)
        if index is None:
            return mark.line + 1
        if index < self.index:
            return self.text.count("\n", 0, index) + 1
        self.line += self.text.count("\n", self.index, index)
        self.index = index
        return self.line


class _Builder:
    """Plain Python data from the parser's events, as the library's safe loader builds it, in the common case:
    YAML 1.2 core scalars (the library's own resolver table and constructors), sequences, mappings with
    distinct keys, aliases. Anything else sets `deferred` and is left to the safe loader, which is exact
    but builds a node tree first and resolves each scalar through several layers: 12.9 s against 2.1 s
    for a 20,000-workload scenario. Deferred: merge keys (`<<`), a duplicate or unhashable key, a reused
    anchor name, an undefined alias, a scalar the core schema does not construct, a `%YAML` directive, a
    second document."""

    CONSTRUCTED = tuple(
        f"tag:yaml.org,2002:{name}"
        for name in ("null", "bool", "int", "float", "timestamp")
    )
    STR = "tag:yaml.org,2002:str"

    def __init__(self, yaml):
        from ruamel.yaml.events import (
            AliasEvent,
            CollectionStartEvent,
            MappingStartEvent,
            ScalarEvent,
        )
        from ruamel.yaml.nodes import ScalarNode

        self.events = (
            AliasEvent,
            CollectionStartEvent,
            MappingStartEvent,
            ScalarEvent,
            ScalarNode,
        )
        # first character -> [(tag, regexp)], YAML 1.2
        self.table = yaml.resolver.versioned_resolver
        self.constructor = yaml.constructor
        self.makers = {
            tag: yaml.constructor.yaml_constructors[tag] for tag in self.CONSTRUCTED
        }
        self.stack: list[
            list
        ] = []  # per open collection: [container, key read (mappings; _NO_KEY if none)]
        self.anchors: dict[str, Any] = {}
        self.root, self.roots, self.deferred = None, 0, False

    def node(self, event) -> None:
        """A scalar, an alias or the start of a collection: build it and put it in its place."""
        AliasEvent, CollectionStartEvent, MappingStartEvent, ScalarEvent, ScalarNode = (
            self.events
        )
        if (
            self.deferred
            or isinstance(event, AliasEvent)
            and event.anchor not in self.anchors
        ):
            self.deferred = True
            if isinstance(event, CollectionStartEvent):
                self.stack.append([None, None])  # kept for its end
            return
        if isinstance(event, AliasEvent):
            value = self.anchors[event.anchor]
        elif isinstance(event, ScalarEvent):
            tag = event.tag
            if tag is None or tag == "!":
                tag = self.STR
                if event.implicit[0]:
                    tag = next(
                        (
                            t
                            for t, regexp in self.table.get(event.value[:1], ())
                            if regexp.match(event.value)
                        ),
                        self.STR,
                    )
            if tag == self.STR:
                value = event.value
            elif tag in self.makers:
                try:
                    value = self.makers[tag](
                        self.constructor, ScalarNode(tag, event.value)
                    )
                except ValueError:  # Python reads integers of at most 4,300 digits
                    raise _BadScalar(event.start_mark, len(event.value)) from None
            else:
                self.deferred = True
                return
        else:
            value = {} if isinstance(event, MappingStartEvent) else []
        if getattr(event, "anchor", None) and not isinstance(event, AliasEvent):
            # the library refuses a second anchor of one name
            self.deferred |= event.anchor in self.anchors
            self.anchors[event.anchor] = value
        self._place(value)
        if not isinstance(event, (AliasEvent, ScalarEvent)):
            self.stack.append(
                [value, _NO_KEY] if isinstance(value, dict) else [value, None]
            )

    def _place(self, value) -> None:
        if not self.stack:
            self.root, self.roots = value, self.roots + 1
            self.deferred |= self.roots > 1
            return
        frame = self.stack[-1]
        container, key = frame
        if isinstance(container, list):
            container.append(value)
        elif key is _NO_KEY:
            frame[1] = value
        else:
            frame[1] = _NO_KEY
            try:
                clash = key in container
            except TypeError:  # an unhashable key (an alias of a list)
                clash = True
            if clash:
                self.deferred = True
            else:
                container[key] = value

    def end(self) -> None:
        self.stack.pop()


_NO_KEY = object()


def _scan(events, path: Path, line_at: _Lines, builder: _Builder) -> dict[tuple, int]:
    """Walk the parser's events once: refuse deep nesting, alias bombs, recursive aliases and tags;
    return the 1-based line of each key path (a mapping key's line, a sequence item's first line);
    hand each node to `builder` once it passes."""
    from ruamel.yaml.events import (
        AliasEvent,
        CollectionEndEvent,
        CollectionStartEvent,
        DocumentStartEvent,
        MappingStartEvent,
        NodeEvent,
        ScalarEvent,
    )

    lines: dict[tuple, int] = {}
    stack: list[
        list
    ] = []  # per open collection: [is_mapping, path, next index or current key, key read]
    sizes: dict[str, int] = {}  # anchor -> nodes it stands for
    open_anchors: list[tuple[str | None, int]] = []
    nodes = expanded = 0

    def place(line: int) -> tuple | None:
        """Where the node that starts now sits; for a mapping key, None (it names the next node)."""
        if not stack:
            return ()
        frame = stack[-1]
        if frame[0]:
            if not frame[3]:
                return None
            frame[3] = False
            return frame[1] + (frame[2],)
        loc = frame[1] + (frame[2],)
        lines.setdefault(loc, line)
        frame[2] += 1
        return loc

    for event in events:
        if not isinstance(event, (NodeEvent, CollectionEndEvent)):
            builder.deferred |= (
                isinstance(event, DocumentStartEvent) and event.version is not None
            )
            continue
        line = line_at(event.start_mark)
        tag = getattr(event, "tag", None)
        if tag and tag != "!" and tag not in _CORE_TAGS:
            raise PlannerError(
                f"YAML tags such as {tag!r} are not allowed", f"{path}:{line}"
            )
        if isinstance(event, CollectionEndEvent):
            stack.pop()
            builder.end()
            anchor, before = open_anchors.pop()
            if anchor:
                sizes[anchor] = nodes - before
            continue
        loc = place(line)
        if (
            isinstance(event, ScalarEvent)
            and event.implicit[0]
            and event.value[:1].isdigit()
        ):
            _check_timestamp(
                event.value, path, line, stack[-1][1] if loc is None else loc
            )
        if loc is None:  # a mapping key
            if isinstance(
                event, CollectionStartEvent
            ):  # `[a]: 1`, `? [a, b]`: the loader cannot build these
                raise PlannerError(
                    "mapping keys must be plain strings, not a list or mapping",
                    _place(path, line, stack[-1][1]),
                )
            key = (
                event.value
                if isinstance(event, ScalarEvent)
                else f"<{type(event).__name__}>"
            )
            stack[-1][2], stack[-1][3] = _key(key), True
            lines.setdefault(stack[-1][1] + (stack[-1][2],), line)
            nodes += 1
            builder.node(event)
            continue
        if isinstance(event, AliasEvent):
            if event.anchor in (a for a, _ in open_anchors):
                raise PlannerError(
                    f"recursive YAML alias *{event.anchor} (it refers to a node that contains it)",
                    f"{path}:{line}",
                )
            grow = sizes.get(event.anchor, 1)
            nodes += grow
            expanded += grow
            if expanded > MAX_ALIAS_NODES:
                raise PlannerError(
                    f"YAML aliases expand to more than {MAX_ALIAS_NODES:,} nodes (alias bomb?); "
                    "refusing it",
                    f"{path}:{line}",
                )
            builder.node(event)
            continue
        nodes += 1
        if isinstance(event, CollectionStartEvent):
            if len(stack) >= MAX_DEPTH:
                raise PlannerError(
                    f"YAML nested deeper than {MAX_DEPTH} levels; refusing it",
                    f"{path}:{line}",
                )
            stack.append([isinstance(event, MappingStartEvent), loc, 0, False])
            open_anchors.append((event.anchor, nodes - 1))
        elif event.anchor:
            sizes[event.anchor] = 1
        builder.node(event)
    return lines


def _place(path: Path, line: int, loc: tuple) -> str:
    return f"{path}:{line} ({key_path(loc)})" if loc else f"{path}:{line}"


def _check_timestamp(value: str, path: Path, line: int, loc: tuple) -> None:
    """An unquoted date YAML reads as a timestamp must be a real one: the loader's own error
    (`day is out of range for month`) comes with no place, so check here where the line is known."""
    from ruamel.yaml.constructor import SafeConstructor, create_timestamp

    if not any(regexp.match(value) for regexp in _timestamp_patterns()):
        return
    try:
        create_timestamp(**SafeConstructor.timestamp_regexp.match(value).groupdict())
    except ValueError as exc:
        raise PlannerError(
            f"{value!r} is not a valid date or date-time ({exc})",
            _place(path, line, loc),
        ) from None


@functools.cache
def _timestamp_patterns() -> tuple:
    from ruamel.yaml.resolver import implicit_resolvers

    return tuple(
        regexp
        for _, tag, regexp, _ in implicit_resolvers
        if tag == "tag:yaml.org,2002:timestamp"
    )


def _key(value: str):
    """A mapping key as the safe loader will build it, for key paths (numbers and booleans too)."""
    if value.lstrip("-").isdigit():
        return int(value)
    return {"true": True, "false": False}.get(value.lower(), value)


def line_of(data: Any, loc: tuple) -> int | None:
    """1-based line of the deepest part of key path `loc` that is in the parsed YAML."""
    lines = getattr(data, "lines", None)
    if not lines:
        return None
    for end in range(len(loc), 0, -1):
        if loc[:end] in lines:
            return lines[loc[:end]]
    return 1


def key_path(loc: tuple) -> str:
    """('workloads', 0, 'memory') -> 'workloads[0].memory'."""
    text = ""
    for part in loc:
        text += (
            f"[{part}]"
            if isinstance(part, int)
            else (f".{part}" if text else str(part))
        )
    return text


def where(path: Path, data: Any, loc: tuple) -> str:
    """'file:line (key.path)' for an error message."""
    line = line_of(data, loc)
    place = f"{path}:{line}" if line else str(path)
    return f"{place} ({key_path(loc)})" if loc else place


def to_plain(data: Any) -> Any:
    """Parsed YAML -> plain dicts/lists with str/int/float/bool keys (pydantic validates plain data);
    depth is bounded by the scan, so the recursion is too."""
    if isinstance(data, dict):
        return {
            k if isinstance(k, (str, int, float, bool)) else str(k): to_plain(v)
            for k, v in data.items()
        }
    if isinstance(data, list):
        return [to_plain(v) for v in data]
    return data
