"""Availability signals read from the providers (`planner catalog signals`): AWS's Spot Instance Advisor (public, no
account) and spot placement scores (boto3 and AWS credentials), Azure's spot eviction rates (Azure Resource Graph
through the `az` CLI and its login). Parsers take the recorded responses, so tests need no network; network and
credentials are only in the `fetch_*` functions, and every failure a user can meet is one line.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from typing import Any

from planner.errors import PlannerError
from planner.load.refresh import get, json_of, session
from planner.load.signals import BUCKET_LABELS, Signal, bucket_index

ADVISOR_URL = "https://spot-bid-advisor.s3.amazonaws.com/spot-advisor-data.json"
AZURE_EVICTION_QUERY = (
    "SpotResources | where type =~ 'microsoft.compute/skuspotevictionrate/location' "
    "| project skuName = tostring(sku.name), location, "
    "spotEvictionRate = tostring(properties.evictionRate)"
)


def fetch_aws_advisor(client: Any = None) -> dict:
    """The Spot Instance Advisor's feed (what the AWS console's advisor page reads)."""
    what = "the AWS Spot Instance Advisor"
    return json_of(get(session(client), ADVISOR_URL, what), what, ADVISOR_URL)


def aws_advisor_signals(
    data: dict, instance_types: set[str], as_of: str
) -> list[Signal]:
    """One `interruption_bucket` signal per (region, instance type) of `instance_types`, Linux."""
    try:
        regions = data["spot_advisor"]
    except (KeyError, TypeError):
        raise PlannerError(
            "the Spot Instance Advisor's answer has no spot_advisor table"
        ) from None
    out = []
    for region, systems in sorted(regions.items()):
        for instance_type, entry in sorted((systems.get("Linux") or {}).items()):
            if instance_type not in instance_types or "r" not in entry:
                continue
            label = bucket_label(entry["r"])
            if label is not None:
                out.append(
                    Signal(
                        "aws",
                        region,
                        instance_type,
                        "interruption_bucket",
                        label,
                        None,
                        as_of,
                        "AWS Spot Instance Advisor",
                    )
                )
    return out


def bucket_label(index) -> str | None:
    i = bucket_index(str(index))
    return None if i is None else BUCKET_LABELS[i]


def fetch_aws_placement_scores(
    instance_types: list[str], regions: list[str], nodes: list[int]
) -> list[tuple[str, int, dict]]:
    """get-spot-placement-scores per instance type and node count, over `regions` (boto3 and credentials)."""
    try:
        import boto3
        from botocore.exceptions import BotoCoreError, ClientError
    except ImportError:
        raise PlannerError(
            "spot placement scores need boto3 (pip install boto3) and AWS credentials"
        ) from None
    out = []
    try:
        ec2 = boto3.client("ec2", region_name=regions[0] if regions else "us-east-1")
        for instance_type in instance_types:
            for n in nodes:
                response = ec2.get_spot_placement_scores(
                    InstanceTypes=[instance_type],
                    TargetCapacity=n,
                    TargetCapacityUnitType="units",
                    SingleAvailabilityZone=False,
                    RegionNames=regions,
                )
                out.append((instance_type, n, response))
    except (BotoCoreError, ClientError) as exc:
        raise PlannerError(
            f"AWS spot placement scores: {' '.join(str(exc).split())}"
        ) from None
    return out


def aws_placement_signals(
    responses: list[tuple[str, int, dict]], as_of: str
) -> list[Signal]:
    return [
        Signal(
            "aws",
            score["Region"],
            instance_type,
            "placement_score",
            str(int(score["Score"])),
            n,
            as_of,
            "AWS spot placement scores",
        )
        for instance_type, n, response in responses
        for score in response.get("SpotPlacementScores", [])
        if "Region" in score and "Score" in score
    ]


def fetch_azure_eviction() -> dict:
    """Azure Resource Graph's spot eviction rates, through the `az` CLI (its login is the credential)."""
    az = shutil.which("az")
    if az is None:
        raise PlannerError(
            "Azure eviction rates are read with the Azure CLI: install it and run `az login` "
            "(and `az extension add --name resource-graph`)"
        )
    done = subprocess.run(
        [
            az,
            "graph",
            "query",
            "-q",
            AZURE_EVICTION_QUERY,
            "--first",
            "1000",
            "-o",
            "json",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    if done.returncode != 0:
        raise PlannerError(
            f"az graph query failed: {' '.join(done.stderr.split())[:200]}"
        )
    try:
        return json.loads(done.stdout)
    except ValueError:
        raise PlannerError(
            "az graph query answered something other than JSON"
        ) from None


def azure_eviction_signals(
    data: dict, instance_types: set[str], as_of: str
) -> list[Signal]:
    """One `interruption_bucket` signal per (location, size) of `instance_types`."""
    rows = data.get("data", data) if isinstance(data, dict) else data
    out = []
    for row in rows or []:
        size, location = row.get("skuName"), row.get("location")
        label = bucket_label(row.get("spotEvictionRate", ""))
        if size in instance_types and location and label is not None:
            out.append(
                Signal(
                    "azure",
                    location,
                    size,
                    "interruption_bucket",
                    label,
                    None,
                    as_of,
                    "Azure spot eviction rates",
                )
            )
    return sorted(out, key=lambda s: (s.region, s.instance_type))
