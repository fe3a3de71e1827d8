"""`planner export`: every shipped example's plan written for SkyPilot, dstack and Kueue, each file held to its
launcher's own schema (tests/data/launchers, offline), and to the launchers' own parsers where they are installed;
what the files say is the plan's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
from conftest import REPO, SCENARIOS, quarter_files, scenario_files
from ruamel.yaml import YAML
from test_bad_input import assert_one_line_error

GOLDEN = REPO / "tests" / "golden"
SCHEMAS = REPO / "tests" / "data" / "launchers"
EXAMPLES = scenario_files() + quarter_files()


def _schema(name: str):
    data = json.loads((SCHEMAS / f"{name}.schema.json").read_text())
    cls = jsonschema.validators.validator_for(data, jsonschema.Draft202012Validator)
    return cls(data)


VALIDATORS = {
    name: _schema(name)
    for name in (
        "skypilot-task",
        "dstack-task",
        "dstack-service",
        "resourceflavor",
        "clusterqueue",
        "localqueue",
        "job",
    )
}
KUEUE_KINDS = {
    "ResourceFlavor": "resourceflavor",
    "ClusterQueue": "clusterqueue",
    "LocalQueue": "localqueue",
    "Job": "job",
}


def _documents(path: Path) -> list[dict]:
    return [d for d in YAML(typ="safe").load_all(path.read_text()) if d is not None]


def _problems(path: Path) -> list[str]:
    """Every schema error of an exported file, by its launcher's schema."""
    out = []
    for document in _documents(path):
        if path.name.endswith(".sky.yaml"):
            schema = "skypilot-task"
        elif path.name.endswith(".dstack.yml"):
            schema = f"dstack-{document.get('type')}"
        else:
            schema = KUEUE_KINDS.get(document.get("kind"), "missing")
        validator = VALIDATORS.get(schema)
        if validator is None:
            out.append(f"{path.name}: no schema for {schema}")
            continue
        out += [
            f"{path.name}: {'/'.join(map(str, e.absolute_path))}: {e.message}"
            for e in validator.iter_errors(document)
        ]
    return out


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """Every shipped example's golden plan exported to every launcher: {(example, launcher): folder}."""
    from click.testing import CliRunner

    from planner.cli import main

    root = tmp_path_factory.mktemp("exports")
    runner = CliRunner()
    out = {}
    for example in EXAMPLES:
        for launcher in ("skypilot", "dstack", "kueue"):
            folder = root / example.stem / launcher
            result = runner.invoke(
                main,
                [
                    "export",
                    str(example),
                    "--plan",
                    str(GOLDEN / f"{example.stem}.json"),
                    "--to",
                    launcher,
                    "-o",
                    str(folder),
                ],
                catch_exceptions=False,
            )
            assert result.exit_code == 0, (example, launcher, result.stderr)
            out[example.stem, launcher] = (folder, result)
    return out


def test_every_example_exports_files_the_launchers_schemas_accept(exported):
    files = 0
    for (example, launcher), (folder, _) in exported.items():
        for path in sorted(folder.iterdir()):
            if path.name == "launch.sh":
                continue
            assert not _problems(path), _problems(path)
            files += 1
    assert files > 200  # every job and endpoint pool of 19 examples, three launchers


def test_the_schemas_refuse_what_the_launchers_refuse(exported):
    """The check can fail: an unknown key, a cloud or backend the launcher lacks, a bad quota."""
    folder, _ = exported["pretrain-multinode", "skypilot"]
    (task,) = _documents(next(folder.glob("*.sky.yaml")))
    for bad in (
        {**task, "resource": {}},
        {**task, "resources": {**task["resources"], "cloud": "tensordock"}},
        {**task, "resources": {**task["resources"], "gpu_type": "H100"}},
    ):
        assert list(VALIDATORS["skypilot-task"].iter_errors(bad))
    folder, _ = exported["pretrain-multinode", "dstack"]
    (task,) = _documents(next(folder.glob("*.dstack.yml")))
    for bad in (
        {**task, "backends": ["coreweave"]},
        {**task, "spot_policy": "on_demand"},
        {**task, "nodes": 0},
    ):
        assert list(VALIDATORS["dstack-task"].iter_errors(bad))
    folder, _ = exported["quarter-team", "kueue"]
    queue = next(
        d for d in _documents(folder / "aws.queues.yaml") if d["kind"] == "ClusterQueue"
    )
    flavour = queue["spec"]["resourceGroups"][0]["flavors"][0]
    flavour["resources"][0]["nominalQuota"] = "eight"
    assert list(VALIDATORS["clusterqueue"].iter_errors(queue))


def test_a_file_says_what_the_plan_says(exported):
    """Offer, nodes, market, GPUs and the checkpoint cadence, as the plan placed them."""
    plan = json.loads((GOLDEN / "pretrain-multinode.json").read_text())
    for a in plan["assignments"]:
        folder, _ = exported["pretrain-multinode", "skypilot"]
        (task,) = _documents(folder / f"{a['workload']}.sky.yaml")
        resources = task["resources"]
        assert (
            resources["cloud"],
            resources["region"],
            resources["instance_type"],
        ) == (
            a["provider"],
            a["region"],
            a["instance_type"],
        )
        assert task["num_nodes"] == a["nodes"]
        assert resources["accelerators"].endswith(f":{a['gpus_per_node']}")
        spot = a["market"] in ("spot", "spot_fallback")
        assert resources.get("use_spot", spot) == spot
        interval = int(task["envs"]["PLANNER_CHECKPOINT_INTERVAL_S"])
        assert abs(interval - a["checkpoint_interval_h"] * 3600) <= 0.5
        assert (
            task["envs"]["PLANNER_EXPECTED_USD"] == f"{a['expected']['cost_usd']:.2f}"
        )
        folder, _ = exported["pretrain-multinode", "dstack"]
        (task,) = _documents(folder / f"{a['workload']}.dstack.yml")
        assert task["nodes"] == a["nodes"]
        assert task["spot_policy"] == {"spot": "spot", "on_demand": "on-demand"}.get(
            a["market"], "auto"
        )
        assert task["instance_types"] == [a["instance_type"]]


def test_spot_with_fallback_is_spot_first_then_on_demand(exported):
    plan = json.loads((GOLDEN / "pretrain-deadline.json").read_text())
    (a,) = plan["assignments"]
    assert a["market"] == "spot_fallback"
    folder, _ = exported["pretrain-deadline", "skypilot"]
    path = folder / f"{a['workload']}.sky.yaml"
    (task,) = _documents(path)
    assert task["resources"]["ordered"] == [{"use_spot": True}, {"use_spot": False}]
    assert "job_recovery" in task["resources"]
    assert (
        "cannot express" in path.read_text()
    )  # the switch rule, said where it cannot be held
    folder, _ = exported["pretrain-deadline", "dstack"]
    (task,) = _documents(folder / f"{a['workload']}.dstack.yml")
    assert task["spot_policy"] == "auto"
    assert set(task["retry"]["on_events"]) == {"no-capacity", "interruption"}


def test_placeholders_are_named_never_invented(exported):
    for (example, launcher), (folder, result) in exported.items():
        text = "".join(p.read_text() for p in folder.iterdir())
        named = [
            line for line in result.stdout.splitlines() if line.startswith("fill in")
        ]
        assert len(named) == (1 if "REPLACE-ME" in text.upper() else 0), (
            example,
            launcher,
        )
        for placeholder in named[0].split(": ", 1)[1].split(", ") if named else ():
            assert placeholder in text
        assert "@" not in text.replace("@2", "")  # no invented accounts or e-mails


def test_endpoints_become_services_scaled_between_the_plans_node_counts(exported):
    plan = json.loads((GOLDEN / "serving-chat.json").read_text())
    (endpoint,) = plan["endpoints"]
    nodes = [p["pools"][0]["nodes"] for p in endpoint["periods"]]
    folder, _ = exported["serving-chat", "skypilot"]
    (path,) = folder.glob("*.sky.yaml")
    (task,) = _documents(path)
    policy = task["service"]["replica_policy"]
    assert (policy["min_replicas"], policy["max_replicas"]) == (min(nodes), max(nodes))
    folder, _ = exported["serving-chat", "dstack"]
    (path,) = folder.glob("*.dstack.yml")
    (task,) = _documents(path)
    assert (
        task["type"] == "service" and task["replicas"] == f"{min(nodes)}..{max(nodes)}"
    )
    _, result = exported["serving-chat", "kueue"]
    assert "Kueue queues batch jobs" in result.stderr


def test_a_quarter_exports_its_quotas_reservations_and_launch_order(exported):
    schedule = json.loads((GOLDEN / "quarter-team.json").read_text())
    folder, _ = exported["quarter-team", "kueue"]
    queue = next(
        d for d in _documents(folder / "aws.queues.yaml") if d["kind"] == "ClusterQueue"
    )
    flavours = [
        f["name"] for g in queue["spec"]["resourceGroups"] for f in g["flavors"]
    ]
    # reserved, then on demand, then spot
    assert flavours == sorted(
        flavours,
        key=lambda n: ["reserved", "on-demand", "spot"].index(n.split("-48xlarge-")[1]),
    )
    quota = {
        f["name"]: f["resources"][0]["nominalQuota"]
        for g in queue["spec"]["resourceGroups"]
        for f in g["flavors"]
    }
    bought = sum(
        r["nodes"]
        for r in schedule["reservations"]
        if "p5.48xlarge" in r.get("instance_type", "")
    )
    assert quota["aws-p5-48xlarge-reserved"] == bought * 8
    assert quota["aws-p5-48xlarge-on-demand"] == 48  # the quarter's quota of 48 H100s
    folder, _ = exported["quarter-team", "skypilot"]
    script = (folder / "launch.sh").read_text()
    starts = [
        line.split()[1]
        for line in script.splitlines()
        if line.startswith("wait_until ")
    ]
    assert starts == sorted(starts) and len(starts) >= 30
    runs = {r["run"]: r for r in schedule["runs"] if r["scheduled"]}
    for name, run in runs.items():
        if any(e["workload"] == name for e in schedule.get("endpoints", [])):
            continue
        # every predecessor is launched before the run that waits for it
        launched = (
            script.index(f"-n {name.lower()} ")
            if f"-n {name.lower()} " in script
            else None
        )
        assert launched is not None, name
    assert os.access(folder / "launch.sh", os.X_OK)
    sh = subprocess.run(["sh", "-n", folder / "launch.sh"], capture_output=True)
    assert sh.returncode == 0, sh.stderr


def test_an_edited_file_is_never_replaced(run, tmp_path):
    plan = GOLDEN / "lora-finetune.json"
    args = (
        "export",
        SCENARIOS / "lora-finetune.yaml",
        "--plan",
        plan,
        "--to",
        "skypilot",
    )
    assert run(*args, "-o", tmp_path).exit_code == 0
    assert run(*args, "-o", tmp_path).exit_code == 0  # the same files: written again
    (path,) = tmp_path.glob("*.sky.yaml")
    path.write_text(path.read_text().replace("REPLACE-ME-command", "python train.py"))
    edited = path.read_text()
    assert_one_line_error(run(*args, "-o", tmp_path), "differs", path.name)
    assert path.read_text() == edited


def test_export_refuses_bad_input_in_one_line(run, tmp_path):
    scenario = SCENARIOS / "lora-finetune.yaml"
    assert_one_line_error(
        run("export", scenario, "--to", "slurm", "-o", tmp_path), "--to"
    )
    bad = tmp_path / "plan.json"
    bad.write_text("{}")
    assert_one_line_error(
        run("export", scenario, "--plan", bad, "--to", "dstack", "-o", tmp_path / "x"),
        "plan.json",
    )


LAUNCHER_CHECK = """
import sys, yaml
from pathlib import Path
import sky
from dstack._internal.core.models.configurations import parse_apply_configuration
failed = []
for path in sorted(Path(sys.argv[1]).rglob("*")):
    try:
        if path.name.endswith(".sky.yaml"):
            sky.Task.from_yaml(str(path))
        elif path.name.endswith(".dstack.yml"):
            parse_apply_configuration(yaml.safe_load(path.read_text()))
    except Exception as exc:
        failed.append(f"{path}: {exc}")
print("\\n".join(failed))
sys.exit(1 if failed else 0)
"""


def test_the_launchers_own_parsers_accept_every_file(exported, tmp_path):
    """With the `launchers` extra: SkyPilot's `Task.from_yaml` and dstack's `parse_apply_configuration`."""
    pytest.importorskip("sky")
    pytest.importorskip("dstack")
    root = next(iter(exported.values()))[0].parent.parent
    done = subprocess.run(
        [sys.executable, "-c", LAUNCHER_CHECK, str(root)],
        capture_output=True,
        text=True,
        env={**os.environ, "HOME": str(tmp_path)},  # SkyPilot writes ~/.sky on import
    )
    assert done.returncode == 0, done.stdout + done.stderr
