"""The README and the CLI agree, and `planner --help` stays fast (no heavy imports)."""
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


def test_every_option_is_in_the_readme():
    """Each command's long options appear in README.md (`--output` as `-o FILE`)."""
    readme = (REPO / "README.md").read_text()
    missing = [f"{path} {opt}" for path, command in all_commands() for param in command.params
               for opt in param.opts if opt.startswith("--") and opt not in ("--help", "--output")
               and opt not in readme]
    assert not missing, f"not in README.md: {', '.join(missing)}"


def test_readme_test_command_is_what_ci_runs():
    readme = (REPO / "README.md").read_text()
    blocks = re.findall(r"```bash\n(.*?)\n```", readme, re.S)
    ci = (REPO / ".ci" / "run").read_text()
    assert blocks[1].strip() in ci


def test_help_does_not_import_heavy_libraries():
    code = "import sys, planner.cli; print(','.join(m for m in ('pandas', 'ortools', 'numpy', 'pydantic') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == ""
