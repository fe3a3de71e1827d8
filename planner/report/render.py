"""One DataFrame rendered as table, CSV, JSON or Markdown (files are written by `planner.files`)."""
from __future__ import annotations

import shutil
from typing import Any

import simplejson


def to_json(data: Any) -> str:
    """`json.dumps(data, indent=2)` to the byte, by simplejson, whose C encoder also indents (the standard
    library's indents in Python: 2 s of a 20,000-workload plan's 12 s). The options pin the standard library's
    behaviour where simplejson's own defaults differ (namedtuples, Decimal, NaN)."""
    return simplejson.dumps(data, indent=2, default=_json_default, namedtuple_as_object=False, use_decimal=False,
                            allow_nan=True) + "\n"


def _json_default(value: Any) -> Any:
    if hasattr(value, "item"):  # numpy scalars
        return value.item()
    if isinstance(value, (set, tuple)):
        return list(value)
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def render_table(frame, title: str | None = None, footer: list[str] | None = None, width: int | None = None,
                 fold: tuple[str, ...] = ("note", "why")) -> str:
    """A rich table as plain text (no colour codes, so it pastes and diffs cleanly); `fold` columns wrap.

    As wide as the terminal (or $COLUMNS); 240 columns when writing to a pipe or a file, so nothing
    is cut. Money columns (`*usd*`) show cents."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title, title_justify="left", show_edge=False, pad_edge=False)
    for column in frame.columns:
        numeric = frame[column].dtype.kind in "if"
        wide = column in fold
        table.add_column(str(column), justify="right" if numeric else "left", no_wrap=not wide,
                         overflow="fold" if wide else "ellipsis", max_width=60 if wide else None)
    money = [is_money(c) for c in frame.columns]
    for row in frame.itertuples(index=False):
        table.add_row(*(_cell(v, m) for v, m in zip(row, money)))
    width = width or shutil.get_terminal_size((PIPE_WIDTH, 24)).columns
    console = Console(width=width, record=True, color_system=None, force_terminal=False)
    with console.capture() as capture:
        console.print(table)
        for line in footer or []:
            console.print(line, highlight=False, markup=False)
    return capture.get()


PIPE_WIDTH = 240


def is_money(column) -> bool:
    """Columns holding dollars: shown to the cent."""
    return "usd" in str(column).lower()


def _cell(value: Any, money: bool = False) -> str:
    if value is None or (isinstance(value, float) and value != value):
        return "-"
    if money and isinstance(value, (int, float)) and not isinstance(value, bool):
        return f"{value:,.2f}"
    if isinstance(value, float):
        return f"{value:,.4g}" if abs(value) < 1000 else f"{value:,.0f}"
    return str(value)


def render_markdown(frame) -> str:
    head = "| " + " | ".join(map(str, frame.columns)) + " |"
    rule = "|" + "|".join("---" for _ in frame.columns) + "|"
    money = [is_money(c) for c in frame.columns]
    rows = ["| " + " | ".join(_cell(v, m) for v, m in zip(row, money)) + " |" for row in frame.itertuples(index=False)]
    return "\n".join([head, rule, *rows]) + "\n"
