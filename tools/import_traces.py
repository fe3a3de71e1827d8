"""Copy the public spot traces `planner simulate --traces` replays into catalogs/spot_traces/.

Each trace is written in Can't Be Late's JSON format (`{"metadata": {"gap_seconds": G}, "data": [n, ...]}`,
n = spot nodes up at each tick), its metadata extended with what the replay matches on: cloud, zone,
instance_type, gpu, nodes (the most the collector asked for), kind and source. Sources (data/README.md
of the shared set): Can't Be Late's `skypilot-org/spot-traces`@221da1ab (AWS p3.2xlarge: the 4-node
preemption runs, the 16-node availability probes, the 1-node preemption runs of 2023-04-22) and
SkyNomad's GCP H100 16-node probes (`andylizf/skynomad-artifact`@62b9aaa1; n = instances created
of the 16 requested each 10 minutes).

    python tools/import_traces.py [SHARED_DATA_DIR]
"""

from __future__ import annotations

import csv
import json
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "catalogs" / "spot_traces"
CBL = "github.com/skypilot-org/spot-traces@221da1ab9bdf"
SKYNOMAD = "github.com/andylizf/skynomad-artifact@62b9aaa1942e"
SETS = [  # (folder, nodes, kind, date)
    ("preemption/4-node/aws-08-03-2023", 4, "preemption_run", "2023-08-03"),
    ("availability/16-node/aws-08-27-2023", 16, "availability_probe", "2023-08-27"),
    ("preemption/1-node/aws-04-22-2023", 1, "preemption_run", "2023-04-22"),
]


def write(name: str, metadata: dict, data: list[int]) -> None:
    (OUT / f"{name}.json").write_text(
        json.dumps({"metadata": metadata, "data": data}, separators=(",", ":")) + "\n"
    )


def main() -> None:
    shared = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT.parent / "shared" / "data"
    traces = shared / "spot_traces"
    for folder, nodes, kind, date in SETS:
        for path in sorted(
            (traces / "skypilot-spot-traces" / folder).glob("*_v100_1.json")
        ):
            zone = path.name.split("_")[0]
            raw = json.loads(path.read_text())
            metadata = {
                "gap_seconds": raw["metadata"]["gap_seconds"],
                "cloud": "aws",
                "zone": zone,
                "instance_type": "p3.2xlarge",
                "gpu": "V100-16GB",
                "nodes": nodes,
                "kind": kind,
                "start": date,
                "source": f"{CBL} {folder}/{path.name}",
            }
            write(
                f"aws_{zone}_p3.2xlarge_{nodes}node_{kind.split('_')[0]}_{date}",
                metadata,
                raw["data"],
            )
    created = defaultdict(list)
    with open(
        traces / "skynomad" / "gcp_h100_a3-highgpu-1g_probe16_2025-10.csv", newline=""
    ) as f:
        for row in csv.DictReader(f):
            created[row["zone"]].append(int(row["created"]))
    for zone, data in sorted(created.items()):
        metadata = {
            "gap_seconds": 600,
            "cloud": "gcp",
            "zone": zone,
            "instance_type": "a3-highgpu-1g",
            "gpu": "H100-80GB",
            "nodes": 16,
            "kind": "availability_probe",
            "start": "2025-10-04",
            "source": f"{SKYNOMAD} data/h100_16_runs (instances created of 16 requested)",
        }
        write(
            f"gcp_{zone}_a3-highgpu-1g_16node_availability_2025-10-04", metadata, data
        )
    print(f"wrote {len(list(OUT.glob('*.json')))} traces to {OUT}")


if __name__ == "__main__":
    main()
