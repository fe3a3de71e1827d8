"""The layers as folders, enforced: import-linter's contracts in pyproject.toml must hold."""

import os
from pathlib import Path

import pytest

importlinter = pytest.importorskip("importlinter.cli")
ROOT = Path(__file__).resolve().parents[1]


def test_the_layers_flow_one_way_and_no_solver_below_the_models(monkeypatch, capsys):
    monkeypatch.chdir(ROOT)
    status = importlinter.lint_imports(
        config_filename=str(ROOT / "pyproject.toml"), no_cache=True, no_logo=True
    )
    out = capsys.readouterr().out
    assert status == 0, out
    assert "3 kept, 0 broken" in out


def test_every_layer_is_a_folder_the_layout_page_names():
    readme = (ROOT / "docs" / "layout.md").read_text()
    packages = sorted(
        p.name
        for p in (ROOT / "planner").iterdir()
        if (p / "__init__.py").exists() and not p.name.startswith("_")
    )
    assert packages == [
        "batch",
        "candidates",
        "commands",
        "economics",
        "launch",
        "load",
        "physics",
        "replay",
        "report",
        "schema",
        "solve",
        "whatif",
    ]
    layout = readme[readme.index("# Layout") :]
    layout = layout[: layout.index("\n```\n", layout.index("```") + 3)]
    for name in packages:
        assert f"\n  {name}/ " in layout, name  # one line each, under planner/
    assert os.path.exists(ROOT / "planner" / "cli.py")


def test_each_package_map_lists_every_module():
    """A package's docstring is its map, one line per module: a module it does not name is found by nobody."""
    import ast

    for package in sorted(
        p for p in (ROOT / "planner").iterdir() if (p / "__init__.py").exists()
    ):
        doc = ast.get_docstring(ast.parse((package / "__init__.py").read_text())) or ""
        named = {
            line.split()[0]
            for line in doc.splitlines()[1:]
            if line and not line.startswith(" ")
        }
        modules = {p.stem for p in package.glob("*.py") if p.stem != "__init__"}
        assert modules <= named, (
            f"planner/{package.name}/__init__.py does not name {sorted(modules - named)}"
        )
