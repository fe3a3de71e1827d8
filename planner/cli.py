"""The `planner` command line: parse, call the library, format. No planning logic lives here.

Heavy libraries (pandas, OR-Tools, numpy) are imported inside commands so `planner --help`
answers instantly.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import warnings


def _interrupted_before_work(signum, frame) -> None:
    """A Ctrl-C of the `planner` command during start-up (imports, argument parsing): nothing has started,
    so stop at once with the interrupt's status."""
    os.write(2, b"interrupted\n")
    os._exit(130)


_COMMAND = __name__ == "__main__" or os.path.basename(sys.argv[0]).startswith("planner")
"""Run as the command (the `planner` script or `python -m planner.cli`), not imported by a library user."""
if (
    _COMMAND
    and threading.current_thread() is threading.main_thread()
    and signal.getsignal(signal.SIGINT) is signal.default_int_handler
):
    # before click and the commands' lazy imports
    signal.signal(signal.SIGINT, _interrupted_before_work)

import click  # noqa: E402

from planner.commands import catalog, inspect, launch, plan, whatif  # noqa: E402
from planner.commands.options import (  # noqa: E402
    EXIT_BAD_INPUT,
    EXIT_CLOSED_OUTPUT,
    EXIT_INFEASIBLE,
    EXIT_INTERRUPTED,
    EXIT_TIME_LIMIT,
)
from planner.errors import NoPlan, PlannerError, TimeLimitReached, printable  # noqa: E402

_interrupted = False


def _on_sigint(signum, frame) -> None:
    """Remember the interrupt: a Ctrl-C that lands inside an import can surface as another error."""
    global _interrupted
    _interrupted = True
    raise KeyboardInterrupt


def _unraisable(hook):
    """`sys.unraisablehook` that keeps quiet about our own KeyboardInterrupt raised where Python cannot pass it on
    (a weak reference's callback in the import machinery): the command still stops with one line `interrupted`."""

    def quiet(unraisable) -> None:
        if not (_interrupted and isinstance(unraisable.exc_value, KeyboardInterrupt)):
            hook(unraisable)

    return quiet


class PlannerGroup(click.Group):
    """Turns every PlannerError into one line on stderr and exit status 2, an interrupt into one line
    `interrupted` and status 130 (no traceback; outputs are written atomically, so nothing is half-written)."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        try:
            return super().parse_args(ctx, args)
        except click.UsageError as exc:
            _usage_error(exc, ctx)

    def invoke(self, ctx: click.Context):
        global _interrupted
        _interrupted = False
        # signals can be set only there
        main_thread = threading.current_thread() is threading.main_thread()
        previous = signal.getsignal(signal.SIGINT) if main_thread else None
        previous_hook = sys.unraisablehook
        if main_thread:
            signal.signal(signal.SIGINT, _on_sigint)
            sys.unraisablehook = _unraisable(previous_hook)
        try:
            with (
                warnings.catch_warnings()
            ):  # library notices (numpy overflow in a discarded candidate, pandas
                # deprecations) would break the one-line promise on stderr
                warnings.simplefilter("ignore")
                result = super().invoke(ctx)
            if _interrupted:  # a Ctrl-C swallowed on its way up (a C extension's import can do that): still a stop
                _stop_interrupted(ctx)
            if main_thread:  # the work is done and written: a Ctrl-C must not kill the command's shutdown (Python
                # resets its own handlers there, an ignored signal stays ignored); a library caller gets its own back
                signal.signal(signal.SIGINT, signal.SIG_IGN if _COMMAND else previous)
            return result
        except (
            NoPlan
        ) as exc:  # `simulate` planned the input itself and found nothing to replay
            click.echo(f"error: {exc}", err=True)
            ctx.exit(EXIT_INFEASIBLE if exc.status == "INFEASIBLE" else EXIT_TIME_LIMIT)
        except PlannerError as exc:
            click.echo(f"error: {exc}", err=True)
            ctx.exit(EXIT_BAD_INPUT)
        except TimeLimitReached as exc:
            click.echo(f"error: {exc}", err=True)
            ctx.exit(EXIT_TIME_LIMIT)
        except KeyboardInterrupt:
            _stop_interrupted(ctx)
        except click.UsageError as exc:
            _usage_error(exc, ctx)
        except (click.exceptions.Exit, click.ClickException):
            raise
        except BrokenPipeError:
            _closed_output(ctx)
        except Exception:
            if _interrupted:
                _stop_interrupted(ctx)
            raise
        finally:
            sys.unraisablehook = previous_hook


def _usage_error(exc: click.UsageError, ctx: click.Context) -> None:
    """A bad option or argument is bad input like any other: one line and exit status 2 (click's own three
    lines of usage, hint and error broke the one-line promise). A bare group still shows its help."""
    if isinstance(exc, click.exceptions.NoArgsIsHelpError):
        raise exc
    command = (exc.ctx or ctx).command_path
    click.echo(
        f"error: {printable(exc.format_message())} (see {command} --help)", err=True
    )
    ctx.exit(EXIT_BAD_INPUT)


def _closed_output(ctx: click.Context) -> None:
    """The reader of standard output went away (`planner ... | head -1`): stop quietly with 141, what a shell
    reports for a command ended by SIGPIPE, not 1 (infeasible) as a `pipefail` script would read it. What is
    left to print goes nowhere, so Python's shutdown does not fail on it again."""
    with contextlib.suppress(OSError, ValueError):
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    ctx.exit(EXIT_CLOSED_OUTPUT)


def _stop_interrupted(ctx: click.Context) -> None:
    if _COMMAND and threading.current_thread() is threading.main_thread():
        # stopping already: a second Ctrl-C must not kill the shutdown
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    # A KeyboardInterrupt raised in code run by exec() of a string (scipy's import runs `from numpy import *` so)
    # marks the interrupt unhandled in CPython even once caught, and the process then kills itself with SIGINT
    # at exit (status -2, not 130); each exec() of a string starts by clearing that mark.
    exec("")
    click.echo("interrupted", err=True)
    if _COMMAND and threading.current_thread() is threading.main_thread():
        # End without Python's shutdown: a thread beside the search may still be inside a native call (HiGHS's LP
        # bound beside `planner batch`'s), and Python ends such a thread where it takes the GIL back, which aborts
        # the C++ frames under it (std::terminate: status 134, not 130). What the command opened is closed by now.
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError):
                stream.flush()
        os._exit(EXIT_INTERRUPTED)
    ctx.exit(EXIT_INTERRUPTED)


@click.group(cls=PlannerGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="gpu-planner")
@click.option(
    "--max-input-size",
    default="64MiB",
    show_default=True,
    metavar="SIZE",
    help="Refuse scenario, quarter and catalog files larger than this (checked before parsing).",
)
def main(max_input_size: str) -> None:
    """Plan the cheapest cloud GPU rental that meets every deadline.

    Exit status: 0 a plan (or a successful command), 1 infeasible (the report says why),
    2 bad input (one line on stderr: file, line, key path, what was expected),
    3 the time limit was reached before any plan was found, 130 interrupted,
    141 standard output closed by its reader (`| head`).

    \b
    Example:
      planner validate scenarios/*.yaml
      planner catalog list --gpu H100 --format json
      planner --max-input-size 256MiB solve big-scenario.yaml
    """
    from planner.load import yaml as yamlio
    from planner.schema.units import MAX_GIB, parse_gib

    try:
        gib = parse_gib(max_input_size)
    except ValueError as exc:
        raise PlannerError(str(exc), "--max-input-size") from None
    if not (1 <= gib * 2**30 and gib <= MAX_GIB):
        raise PlannerError(
            f"expected a size of at least 1B and at most {MAX_GIB:g}GiB (an exabyte), "
            f"got {max_input_size!r}",
            "--max-input-size",
        )
    yamlio.MAX_FILE_BYTES = int(gib * 2**30)


for _command in (
    inspect.validate,
    plan.solve,
    plan.batch,
    plan.simulate,
    whatif.whatif,
    launch.export,
    launch.calibrate,
    inspect.estimate,
    inspect.gpus,
    inspect.examples,
    inspect.schema,
    catalog.catalog,
):
    main.add_command(_command)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
