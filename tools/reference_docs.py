"""Write the documentation's reference pages from the code, so they cannot drift from it.

    python tools/reference_docs.py [--check]

docs/index.md: the README, its links made relative to docs/. docs/reference/scenario.md and quarter.md: every key of a scenario and a quarter file, with its type and unit,
its default and what it means, read from the pydantic models (`planner/schema/`); docs/reference/cli.md: every
command and option, read from the click commands. `--check` only reports which pages differ (a test runs it).
"""

from __future__ import annotations

import argparse
import inspect
import sys
import types
import typing
from pathlib import Path

import click
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from planner.cli import main as planner_main
from planner.schema import catalog, fields, workload
from planner.schema import scenario as s
from planner.schema.json_schema import file_schema
from planner.schema.quarter import Quarter, When

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "docs" / "reference"

ALIASES = [  # (alias, how it reads): units and the forms each takes
    (fields.Hours, "duration: `90s`, `30m`, `2h`, `3d`, `1w`; a bare number is hours"),
    (fields.HoursOrZero, "duration, 0 or more: `30m`, `2h`; a bare number is hours"),
    (fields.BillingStep, "duration: `1s`, `1m`, `1h`; a bare number is hours"),
    (fields.Seconds, "latency with its unit: `500ms`, `2s`"),
    (fields.GiB, "size: `80GiB`, `1.5TiB`, `500GB`; a bare number is GiB"),
    (fields.GiBOrZero, "size, 0 or more: `80GiB`; a bare number is GiB"),
    (fields.USD, "money: `$2.50`, `$50k`, `$1.2M`"),
    (fields.Count, "count: `20M`, `1.5B`, `300k`"),
    (fields.Fraction, "number between 0 and 1 (exclusive)"),
    (fields.Share, "share: `10%` or `0.1`"),
    (fields.Multiplier, "multiplier above 0"),
    (fields.PricePerHour, "dollars per hour"),
    (fields.Rate, "events per hour, 0 or more"),
    (workload.EstimateErrorSetting, "`published` or a spread such as `5%`"),
    (
        catalog.ModelSpec,
        "a catalog name, a Hugging Face id (`org/name`), `{hf_config: path}` or an inline [ModelArch](#modelarch)",
    ),
    (When, "date or date and time: `2027-01-04`, `2027-01-04T08:00`"),
]
SCALARS = {int: "whole number", float: "number", str: "text", bool: "`true` or `false`"}


def type_text(annotation, models: list) -> str:
    for alias, text in ALIASES:
        if annotation == alias:
            if alias is catalog.ModelSpec and catalog.ModelArch not in models:
                models.append(catalog.ModelArch)
            return text
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Annotated:
        base = type_text(args[0], models)
        marks = [
            c
            for m in args[1:]
            for c in (m.metadata if isinstance(m, FieldInfo) else [m])
        ]
        bounds = [
            f"{sign} {getattr(m, attr):g}"
            for m in marks
            for attr, sign in (("ge", "≥"), ("gt", ">"), ("le", "≤"), ("lt", "<"))
            if getattr(m, attr, None) is not None
        ]
        return base + (f" ({', '.join(dict.fromkeys(bounds))})" if bounds else "")
    if origin is typing.Literal:
        return "one of " + ", ".join(f"`{a}`" for a in args)
    if origin in (typing.Union, types.UnionType):
        parts = [type_text(a, models) for a in args if a is not type(None)]
        return " or ".join(parts) + (" or none" if type(None) in args else "")
    if origin is tuple:
        return "list of " + type_text(args[0], models)
    if origin is dict:
        return f"map of {type_text(args[0], models)} to {type_text(args[1], models)}"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        if annotation not in models:
            models.append(annotation)
        return f"[{annotation.__name__}](#{annotation.__name__.lower()})"
    return SCALARS.get(annotation, f"`{annotation}`")


def default_text(field) -> str:
    if field.default is PydanticUndefined and field.default_factory is None:
        return "required"
    value = (
        field.default_factory() if field.default_factory is not None else field.default
    )
    if isinstance(value, BaseModel):
        return "see below"
    if value is None:
        return "none"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, tuple | dict) and not value:
        return "`[]`" if isinstance(value, tuple) else "`{}`"
    if isinstance(value, tuple) and all(isinstance(v, str) for v in value):
        return "`[" + ", ".join(value) + "]`"
    if isinstance(value, tuple):
        return (
            "`"
            + ", ".join(
                str(
                    v.model_dump(exclude_defaults=True)
                    if isinstance(v, BaseModel)
                    else v
                )
                for v in value
            )
            + "`"
        )
    return f"`{value:g}`" if isinstance(value, float) else f"`{value}`"


def page_of(model: type[BaseModel]) -> str:
    """The reference page that documents `model` (a quarter's Run is a scenario's Workload and more)."""
    return "quarter.md" if model.__module__ == Quarter.__module__ else "scenario.md"


def model_page(root: type[BaseModel], title: str, intro: str) -> str:
    models, out = (
        [root],
        [
            f"# {title}\n",
            intro,
            "<!-- generated by tools/reference_docs.py: do not edit -->\n",
        ],
    )
    done = 0
    while done < len(models):
        model = models[done]
        done += 1
        hints = typing.get_type_hints(model, include_extras=True)
        out.append(f"## {model.__name__}\n")
        doc = (model.__doc__ or "").strip()
        if (
            doc
            and model.__doc__ is not BaseModel.__doc__
            and not doc.startswith("Usage docs")
        ):
            out.append(" ".join(doc.split()) + "\n")
        parent = next(
            (b for b in model.__bases__ if issubclass(b, BaseModel) and b.model_fields),
            None,
        )
        if parent is not None:
            out.append(
                f"Every key of [{parent.__name__}]({page_of(parent)}#{parent.__name__.lower()}), and:\n"
            )
        out.append("| key | type | default | meaning |\n|---|---|---|---|")
        for name, field in model.model_fields.items():
            if parent is not None and name in parent.model_fields:
                continue
            bounds = [
                c
                for c in field.metadata
                if any(hasattr(c, a) for a in ("ge", "gt", "le", "lt"))
            ]
            kind = type_text(
                typing.Annotated[(hints[name], *bounds)] if bounds else hints[name],
                models,
            ).replace("|", "\\|")
            meaning = " ".join((field.description or "").split()).replace("|", "\\|")
            out.append(f"| `{name}` | {kind} | {default_text(field)} | {meaning} |")
        out.append("")
    return "\n".join(out)


def cli_page() -> str:
    out = [
        "# Command line\n",
        "Every command and option, from the commands themselves (`planner COMMAND --help` "
        "prints the same).\n",
        "<!-- generated by tools/reference_docs.py: do not edit -->\n",
    ]

    def walk(group: click.Group, prefix: str):
        for name, command in sorted(group.commands.items()):
            path = f"{prefix} {name}"
            if isinstance(command, click.Group):
                yield from walk(command, path)
            else:
                yield path, command

    ctx = click.Context(planner_main, info_name="planner")
    for path, command in walk(planner_main, "planner"):
        out.append(f"## `{path}`\n")
        with click.Context(command, info_name=path, parent=ctx) as sub:
            pieces = " ".join(command.collect_usage_pieces(sub))
        out.append(f"```\n{path} {pieces}\n```\n")
        text, _, examples = inspect.cleandoc(command.help or "").partition(
            "\b\nExample:"
        )
        out.append(text.replace("\b\n", "").strip() + "\n")
        if examples.strip():
            out.append("Example:\n\n```\n" + inspect.cleandoc(examples) + "\n```\n")
        rows = []
        for param in command.params:
            if isinstance(param, click.Option) and "--help" not in param.opts:
                names = ", ".join(f"`{o}`" for o in param.opts + param.secondary_opts)
                meaning = " ".join((param.help or "").split())
                if isinstance(param.type, click.Choice):
                    meaning = (
                        (meaning + " " if meaning else "")
                        + "One of "
                        + ", ".join(f"`{c}`" for c in param.type.choices)
                        + "."
                    )
                default = param.default
                shown = (
                    ""
                    if default in (None, (), False)
                    or param.is_flag
                    or str(default).startswith("Sentinel")
                    else f"`{default}`"
                )
                rows.append(
                    f"| {names} | {meaning.replace('|', chr(92) + '|')} | {shown} |"
                )
        if rows:
            out.append(
                "| option | meaning | default |\n|---|---|---|\n"
                + "\n".join(rows)
                + "\n"
            )
    return "\n".join(out)


def home_page() -> str:
    """The site's home: the README, its links made relative to docs/."""
    text = (ROOT / "README.md").read_text()
    return (
        "<!-- generated from README.md by tools/reference_docs.py: do not edit -->\n\n"
        + text.replace("](docs/", "](").replace("](CHANGELOG.md)", "](changelog.md)")
    )


def pages() -> dict[Path, str]:
    return {
        ROOT / "docs" / "index.md": home_page(),
        OUT / "scenario.md": model_page(
            s.Scenario,
            "Scenario fields",
            "Every key of a scenario file, from the "
            "models that read it (`planner/schema/scenario.py`). A worked example is in "
            "[the scenario format](../scenario-format.md).\n",
        ),
        OUT / "quarter.md": model_page(
            Quarter,
            "Quarter fields",
            "Every key of a quarter file (`horizon:` and "
            "`runs:`), from `planner/schema/quarter.py`. A run takes every key of a "
            "[scenario's workload](scenario.md#workload) too.\n",
        ),
        OUT / "cli.md": cli_page(),
        ROOT / "docs" / "schema" / "scenario.schema.json": file_schema("scenario"),
        ROOT / "docs" / "schema" / "quarter.schema.json": file_schema("quarter"),
        ROOT / "docs" / "schema" / "plan.schema.json": file_schema("plan"),
        ROOT / "docs" / "schema" / "schedule.schema.json": file_schema("schedule"),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args(argv)
    stale = []
    for path, text in pages().items():
        if not path.exists() or path.read_text() != text:
            stale.append(path.relative_to(ROOT))
            if not args.check:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(text)
    for path in stale:
        print(("differs: " if args.check else "wrote: ") + str(path))
    return 1 if args.check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
