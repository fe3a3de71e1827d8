"""The README, the documentation site and the CLI agree, and `planner --help` stays fast (no heavy imports)."""

import os
import re
import subprocess
import sys

import click
from conftest import REPO

from planner.cli import main


def all_commands(group=main, prefix="planner"):
    for name, command in sorted(group.commands.items()):
        path = f"{prefix} {name}"
        if isinstance(command, click.Group):
            yield from all_commands(command, path)
        else:
            yield path, command


def test_every_command_is_in_the_readme_and_has_an_example():
    readme = (REPO / "README.md").read_text()
    for path, command in all_commands():
        assert f"`{path}" in readme, f"{path} is not documented in README.md"
        assert "Example:" in (command.help or ""), f"{path} --help has no example"


def test_the_readme_is_a_front_door():
    """What it does, the two commands, an example, links: measurements live in docs/benchmarks.md."""
    assert len((REPO / "README.md").read_text().splitlines()) < 250


def test_generated_pages_are_current():
    """docs/index.md (from the README) and the reference pages (from the pydantic models and the click
    commands): `python tools/reference_docs.py` rewrites them."""
    done = subprocess.run(
        [sys.executable, str(REPO / "tools" / "reference_docs.py"), "--check"],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_reference_names_every_field_and_option():
    from planner.schema.endpoint import Slo, Traffic
    from planner.schema.quarter import Quarter, Reservation, Run
    from planner.schema.scenario import Scenario
    from planner.schema.workload import Workload

    scenario = (REPO / "docs" / "reference" / "scenario.md").read_text()
    quarter = (REPO / "docs" / "reference" / "quarter.md").read_text()
    for model, page in (
        (Scenario, scenario),
        (Workload, scenario),
        (Traffic, scenario),
        (Slo, scenario),
        (Quarter, quarter),
        (Run, quarter),
        (Reservation, quarter),
    ):
        for name in model.model_fields:
            # "every key of Workload, and:"
            inherited = model is Run and name in Workload.model_fields
            assert f"| `{name}` |" in (scenario if inherited else page), (
                f"{model.__name__}.{name}"
            )
    cli = (REPO / "docs" / "reference" / "cli.md").read_text()
    missing = [
        f"{path} {opt}"
        for path, command in all_commands()
        for param in command.params
        for opt in param.opts
        if opt.startswith("--") and opt != "--help" and f"`{opt}`" not in cli
    ]
    assert not missing, f"not in docs/reference/cli.md: {', '.join(missing)}"


def test_the_documentation_site_builds_strictly(tmp_path):
    """MkDocs with warnings as errors: every page in the nav, every link and anchor found."""
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "mkdocs",
            "build",
            "--strict",
            "-q",
            "-d",
            str(tmp_path / "site"),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "site" / "reference" / "scenario" / "index.html").exists()


def test_readme_test_command_is_what_ci_runs():
    readme = (REPO / "README.md").read_text()
    blocks = re.findall(r"```bash\n(.*?)\n```", readme, re.S)
    ci = (REPO / ".ci" / "run").read_text()
    assert blocks[1].strip() in ci


def test_help_does_not_import_heavy_libraries():
    code = "import sys, planner.cli; print(','.join(m for m in ('pandas', 'ortools', 'numpy', 'pydantic') if m in sys.modules))"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert out == ""


def test_the_readme_excerpt_is_the_shipped_file():
    """The README's YAML is an excerpt of scenarios/team-quarter-mix.yaml: every key it shows has the file's value."""
    import yaml

    readme = (REPO / "README.md").read_text()
    excerpt = yaml.safe_load(re.search(r"```yaml\n(.*?)```", readme, re.S).group(1))
    shipped = yaml.safe_load((REPO / "scenarios" / "team-quarter-mix.yaml").read_text())

    def within(part, whole, where):
        if isinstance(part, dict):
            assert isinstance(whole, dict), where
            for key, value in part.items():
                assert key in whole, f"{where}.{key}"
                within(value, whole[key], f"{where}.{key}")
        else:
            assert part == whole, where

    by_name = {w["name"]: w for w in shipped["workloads"]}
    for workload in excerpt["workloads"]:
        within(workload, by_name[workload["name"]], workload["name"])
    within(excerpt["constraints"], shipped["constraints"], "constraints")
