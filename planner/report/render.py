"""One DataFrame rendered as table, CSV, JSON or Markdown (files are written by `planner.files`)."""

from __future__ import annotations

import shutil
from typing import Any

import simplejson
from rich.console import Console


def to_json(data: Any) -> str:
    """`json.dumps(data, indent=2)` to the byte, by simplejson, whose C encoder also indents (the standard
    library's indents in Python: 2 s of a 20,000-workload plan's 12 s). The options pin the standard library's
    behaviour where simplejson's own defaults differ (namedtuples, Decimal, NaN)."""
    return (
        simplejson.dumps(
            data,
            indent=2,
            default=_json_default,
            namedtuple_as_object=False,
            use_decimal=False,
            allow_nan=True,
        )
        + "\n"
    )


FORMULA_LEADS = ("=", "+", "-", "@", "\t", "\r")
"""What makes a spreadsheet read a cell as a formula (OWASP's CSV injection list)."""


def to_csv(frame) -> str:
    """`frame.to_csv(index=False)` that a spreadsheet reads as data: a text cell or header that starts like a
    formula (a name `=HYPERLINK(...)`, `@SUM(...)`) gets a leading `'`, as spreadsheet-facing tools do; numbers,
    and text that reads as a number or a lone `-`, are left as they are (docs/commands.md)."""
    frame = frame.rename(columns=lambda c: _inert(c) if isinstance(c, str) else c)
    text = frame.select_dtypes(include=["object", "string"]).columns
    if len(text):
        frame = frame.copy()
        frame[text] = frame[text].map(lambda v: _inert(v) if isinstance(v, str) else v)
    return frame.to_csv(index=False)


def _inert(cell: str) -> str:
    if not cell.startswith(FORMULA_LEADS) or cell == "-":
        return cell
    try:
        float(cell)
        return cell
    except ValueError:
        return "'" + cell


def _json_default(value: Any) -> Any:
    if hasattr(value, "item"):  # numpy scalars
        return value.item()
    if isinstance(value, (set, tuple)):
        return list(value)
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def render_table(
    frame,
    title: str | None = None,
    footer: list[str] | None = None,
    width: int | None = None,
    fold: tuple[str, ...] = ("note", "why"),
    drop: tuple[str, ...] = (),
    headers: dict[str, str] | None = None,
) -> str:
    """A rich table as plain text (no colour codes, so it pastes and diffs cleanly), as wide as the terminal (or
    $COLUMNS; 240 columns to a pipe or a file, so nothing is cut there).

    A number is never cut: numbers and money (`*usd*`, to the cent) keep their whole width, and text wraps.
    Where even that does not fit, columns are left out, `drop` first (in its order), then the others from the
    right, never the first column or money, and a footer line names them. `headers`: shorter names to show
    for some columns (CSV and JSON keep the frame's)."""
    width = width or shutil.get_terminal_size((PIPE_WIDTH, 24)).columns
    columns = list(frame.columns)
    order = [c for c in drop if c in columns] + [
        c for c in reversed(columns[1:]) if c not in drop and not is_money(c)
    ]
    left_out = []
    headers = headers or {}
    # text on one line where it fits
    table = _table(frame, columns, title, fold, headers, wrap=False)
    if _least_width(table) > width:
        table = _table(frame, columns, title, fold, headers, wrap=True)
    while _least_width(table) > width and order:
        victim = order.pop(0)
        columns.remove(victim)
        left_out.append(headers.get(victim, str(victim)))
        table = _table(frame, columns, title, fold, headers, wrap=True)
    note = (
        [
            f"left out at {width} columns: {', '.join(left_out)} (a wider terminal, --format csv or json shows "
            "them)"
        ]
        if left_out
        else []
    )
    console = _console(width)
    with console.capture() as capture:
        console.print(table)
        for line in (footer or []) + note:
            console.print(line, highlight=False, markup=False)
    return capture.get()


def render_lines(lines: list[str], width: int | None = None) -> str:
    """Lines of prose wrapped as a table's footer is (to the terminal's width; 240 columns to a pipe)."""
    console = _console(width or shutil.get_terminal_size((PIPE_WIDTH, 24)).columns)
    with console.capture() as capture:
        for line in lines:
            console.print(line, highlight=False, markup=False)
    return capture.get()


def _table(
    frame,
    columns: list,
    title: str | None,
    fold: tuple[str, ...],
    headers: dict[str, str],
    wrap: bool,
):
    """`fold` columns wrap at 60 characters; with `wrap`, every text column may wrap."""
    from rich.table import Table

    table = Table(title=title, title_justify="left", show_edge=False, pad_edge=False)
    for column in columns:
        numeric = frame[column].dtype.kind in "if" or is_money(column)
        cells = [_cell(v, is_money(column)) for v in frame[column]]
        widest = max((len(c) for c in cells), default=1)
        header = headers.get(column, str(column))
        if numeric:  # never cut: its widest cell sets its width
            table.add_column(header, justify="right", no_wrap=True, min_width=widest)
        else:
            table.add_column(
                header,
                justify="left",
                overflow="fold",
                no_wrap=not (wrap or column in fold),
                max_width=60 if column in fold else None,
            )
    money = [is_money(c) for c in columns]
    for row in frame[columns].itertuples(index=False):
        table.add_row(*(_cell(v, m) for v, m in zip(row, money)))
    return table


def _console(width: int) -> Console:
    """A plain-text console (no colour codes, so output pastes and diffs cleanly) of `width` columns."""
    return Console(width=width, record=True, color_system=None, force_terminal=False)


def _least_width(table) -> int:
    """The narrowest the table can be drawn without cutting a number (text wraps at spaces, or folds)."""
    console = Console(width=10_000, color_system=None, force_terminal=False)
    return console.measure(table).minimum


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
    rows = [
        "| " + " | ".join(_cell(v, m) for v, m in zip(row, money)) + " |"
        for row in frame.itertuples(index=False)
    ]
    return "\n".join([head, rule, *rows]) + "\n"
