"""Run records read from a CSV file, or from every `*.csv` of a folder (one file per launch, say), each row checked
into a `RunRecord` with its file and line in any error."""

from __future__ import annotations

from pathlib import Path

from planner.errors import PlannerError
from planner.load.catalog import _validate_rows, read_table_file
from planner.schema.runs import RunRecord


def load_runs(path: Path) -> tuple[list[RunRecord], tuple[Path, ...]]:
    """The records and the files they came from."""
    path = Path(path)
    if path.is_dir():
        files = tuple(sorted(path.glob("*.csv")))
        if not files:
            raise PlannerError(
                "no *.csv run records in this folder (docs/calibrate.md)", str(path)
            )
    else:
        files = (path,)
    records: list[RunRecord] = []
    seen: dict[str, str] = {}
    for file in files:
        frame, _, _ = read_table_file(file, "run records")
        rows = _validate_rows(RunRecord, frame, file, "run record")
        for line, record in zip(frame.index, rows):
            if record.run in seen:
                raise PlannerError(
                    f"run {record.run!r} appears twice (first at {seen[record.run]})",
                    f"{file}:{line}",
                )
            seen[record.run] = f"{file}:{line}"
            records.append(record)
    if not records:
        raise PlannerError("no run records (docs/calibrate.md)", str(path))
    return records, files
