"""What every command shares: option types, exit statuses, output files written atomically (and together),
progress bars on stderr, the old-prices warning."""

from __future__ import annotations

import contextlib
import math
import os
import sys
from pathlib import Path

import click

from planner.errors import PlannerError

FORMATS = ("table", "json", "csv")


class FiniteFloatRange(click.FloatRange):
    """A float option that refuses nan and inf: nan passes every range check (and then hangs a bisection or
    ends a search at once), inf is no number of seconds or precision."""

    def convert(self, value, param, ctx):
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return number


class OutputPath(click.Path):
    """A file to write: `out/` names a folder, so it is refused rather than written as a file `out`; `-` is
    standard output where the output can go there (`stdout_dash`: a report's `-o`), else refused, not written
    as a file named `-`."""

    def __init__(self, path_type=None, stdout_dash: bool = False):
        super().__init__(dir_okay=False, path_type=path_type)
        self.stdout_dash = stdout_dash

    def convert(self, value, param, ctx):
        if value == "-":
            if self.stdout_dash:
                return None  # what the option's absence means: print
            self.fail(
                "'-' (standard output) cannot take this output; expected a file name",
                param,
                ctx,
            )
        if isinstance(value, str) and value.endswith(("/", os.sep)):
            self.fail(f"{value!r} names a folder; expected a file name", param, ctx)
        return super().convert(value, param, ctx)


MAX_TRIALS, MAX_SEED, MAX_PROCESSES = 1_000_000, 2**32 - 1, 256
"""Monte-Carlo trials (memory grows with them), seeds numpy takes, local processes (the sweep's points are fewer)."""

(
    EXIT_PLAN,
    EXIT_INFEASIBLE,
    EXIT_BAD_INPUT,
    EXIT_TIME_LIMIT,
    EXIT_INTERRUPTED,
    EXIT_CLOSED_OUTPUT,
) = 0, 1, 2, 3, 130, 141
"""The exit statuses every command keeps (docs/commands.md, `planner --help`)."""


def exit_for(status: str) -> None:
    """Exit 1 when infeasible, 3 when the time limit ended the search before any plan; else return."""
    from planner.solve.outcome import SOLVED

    if status == "INFEASIBLE":
        sys.exit(EXIT_INFEASIBLE)
    if status == "MODEL_INVALID":  # not the time limit: more time would not help
        click.echo(
            "error: CP-SAT refused the model as invalid (its figures passed 64-bit integers, which only "
            "sizes far beyond real ones reach); please report it with the input",
            err=True,
        )
        sys.exit(EXIT_TIME_LIMIT)
    if status not in SOLVED:
        click.echo(
            "error: the time limit was reached before any plan was found; raise --time-limit",
            err=True,
        )
        sys.exit(EXIT_TIME_LIMIT)


def warn_old_prices(catalog) -> None:
    """One line on stderr when the prices used are old (never an error: old prices still plan)."""
    from planner.load.catalog import price_age_warning

    line = price_age_warning(catalog)
    if line:
        click.echo(f"warning: {line}", err=True)


def check_outputs(inputs: tuple[Path, ...], *outputs: str | Path | None) -> None:
    """Every output path checked before any work is spent: not over an input, in a folder that takes it."""
    from planner.files import check_target, same_target

    given: list[Path] = []
    for output in outputs:
        if output:
            check_target(Path(output), inputs)
            if any(same_target(Path(output), other) for other in given):
                raise PlannerError(
                    "given for two outputs of this command, so one would replace the other; "
                    "give each output its own file",
                    str(output),
                )
            given.append(Path(output))


def emit(text: str, output: str | None, inputs: tuple[Path, ...] = ()) -> None:
    """Print, or write atomically to `output` (never over an input file)."""
    if output:
        from planner.files import write_atomic

        write_atomic(Path(output), text, protected=inputs)
        wrote(output)
    else:
        click.echo(text, nl=not text.endswith("\n"))


# inside `outputs_together`: the files written, said once they are in place
_written: list[str] | None = None


def wrote(path) -> None:
    """`wrote PATH` on stderr, once the file is in place."""
    if _written is not None:
        _written.append(str(path))
    else:
        click.echo(f"wrote {path}", err=True)


@contextlib.contextmanager
def outputs_together():
    """A command's output files land as a set, all or none (`planner.files.outputs_together`), and each
    `wrote` line is printed only once they have."""
    global _written
    from planner import files

    _written = []
    try:
        with files.outputs_together():
            yield
        written = _written
    finally:
        _written = None
    for path in written:
        click.echo(f"wrote {path}", err=True)


def inputs_of(*paths) -> tuple[Path, ...]:
    """Files given on the command line that an output must never replace (None: not given)."""
    return tuple(Path(p) for p in paths if p)


def building_candidates(work, fmt: str, output: str | None):
    """Run work(progress) with a bar for candidate generation on a terminal (none for JSON on stdout)."""
    bar = LazyProgress("building candidates", show=fmt != "json" or output is not None)
    try:
        return work(bar.update)
    finally:
        bar.close()


def with_progress(work, show: bool):
    """Run work(progress) with a rich progress bar on stderr when it is long enough to need one."""
    if not show:
        return work(None)
    from rich.progress import Progress

    with Progress(transient=True, console=stderr_console()) as bar:
        task = bar.add_task("simulating", total=1.0)
        return work(lambda fraction: bar.update(task, completed=fraction))


def stderr_console():
    from rich.console import Console

    return Console(stderr=True)


class LazyProgress:
    """A progress bar on stderr, started at the first update (after worker processes are forked); only on a
    terminal, never on a pipe or a file."""

    def __init__(self, label: str, show: bool = True):
        self.label, self.bar, self.task = label, None, None
        self.show = show and sys.stderr.isatty()

    def update(self, done: int, total: int) -> None:
        if not self.show:
            return
        if self.bar is None:
            from rich.progress import Progress

            self.bar = Progress(transient=True, console=stderr_console())
            self.bar.start()
            self.task = self.bar.add_task(self.label, total=total)
        self.bar.update(self.task, completed=done, total=total)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()


def format_option(choices: tuple[str, ...] = FORMATS):
    """`--format`, a table unless told otherwise."""
    return click.option(
        "--format",
        "fmt",
        type=click.Choice(choices),
        default="table",
        show_default=True,
    )


output_option = click.option(
    "-o",
    "--output",
    type=OutputPath(stdout_dash=True),
    help="Write to this file (atomically) instead of stdout (`-`: stdout).",
)
"""`-o FILE`: a report written atomically instead of printed (`-`: printed)."""
