"""DigitalOcean's prices: the API's droplet sizes (an access token needed) read into offer rows.

``GET https://api.digitalocean.com/v2/sizes`` answers pages of ``{"sizes": [...], "links":
{"pages": {"next": URL}}}``; a GPU size has ``gpu_info`` (``count``, ``model``, ``vram``),
``slug`` (``gpu-h100x8-640gb``, the name SkyPilot's catalog and the shipped one use),
``vcpus``, ``memory`` (MiB), ``price_hourly`` (USD), ``regions`` (where it can be created) and
``available`` -- the fields dstack's gpuhunt reads.  The token is DIGITALOCEAN_TOKEN (or doctl's
DIGITALOCEAN_ACCESS_TOKEN, or the ``access-token`` of doctl's ~/.config/doctl/config.yaml).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any
from urllib.parse import urlsplit

import pandas as pd

from planner.errors import PlannerError
from planner.load import refresh
from planner.load.offer_facts import load_shipped_offers
from planner.schema.catalog import Gpu

DO_SIZES_URL = "https://api.digitalocean.com/v2/sizes"
DO_TOKEN_ENV = ("DIGITALOCEAN_TOKEN", "DIGITALOCEAN_ACCESS_TOKEN")
DO_TOKEN_FILE = (
    ".config/doctl/config.yaml"  # `doctl auth init` writes `access-token: ...`
)


def fetch_do(
    session: Any = None,
    token: str | None = None,
    max_pages: int = 20,
    timeout: float = refresh.TIMEOUT_S,
) -> Iterator[dict]:
    """Pages of DigitalOcean's droplet sizes, following ``links.pages.next`` (only to
    api.digitalocean.com); one line when offline, on an HTTP error or a malformed answer."""
    token = token or refresh.api_key(
        "DigitalOcean API token",
        DO_TOKEN_ENV,
        DO_TOKEN_FILE,
        r"^access-token:\s*[\"']?([^\"'\s]+)",
    )
    session = refresh.session(session)
    what = "the DigitalOcean API"
    url: str | None = DO_SIZES_URL
    params: dict | None = {"per_page": 200}
    for _ in range(max_pages):
        response = refresh.get(
            session,
            url,
            what,
            params=params,
            headers={"Authorization": f"Bearer {token}"},
            timeout=timeout,
            auth_hint=f"check {DO_TOKEN_ENV[0]}",
        )
        page = refresh.json_of(response, what, url)
        if not isinstance(page, dict) or not isinstance(page.get("sizes"), list):
            raise PlannerError(
                f"{what} answered JSON without a 'sizes' list ({DO_SIZES_URL})"
            )
        yield page
        url = ((page.get("links") or {}).get("pages") or {}).get("next")
        params = None
        if not url:
            return
        if urlsplit(str(url)).hostname != "api.digitalocean.com":
            raise PlannerError(
                f"{what} sent a next-page link off api.digitalocean.com; refusing it"
            )
    raise PlannerError(f"{what} has more than {max_pages} pages of sizes; stopped")


def do_offers(
    pages: Iterable[Mapping[str, Any]],
    gpus: Mapping[str, Gpu] | None = None,
    shipped: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """DigitalOcean sizes -> offers: each GPU size (``gpu_info``) in each region it can be
    created in, at ``price_hourly``; vCPUs and memory from the answer.  A size marked
    ``available: false`` is tagged ``capacity_unavailable``.  Sizes the shipped catalog lacks
    are counted in ``attrs["unknown_instance_types"]``; shipped sizes no region offers now in
    ``attrs["unpriced_offers"]``."""
    if shipped is None:
        shipped = load_shipped_offers("do")
    rows, unknown = [], []
    for page in pages:
        for size in page.get("sizes") or []:
            if not isinstance(size, Mapping) or not size.get("gpu_info"):
                continue
            slug = str(size.get("slug") or "")
            regions = [str(r) for r in size.get("regions") or []]
            if not regions:
                unknown.append(slug)
                continue
            try:
                ram_gib = float(size.get("memory")) / 1024
            except (TypeError, ValueError):
                ram_gib = float("nan")
            notes = [] if size.get("available", True) else ["capacity_unavailable"]
            rows += [
                refresh.price_row(
                    "do",
                    region,
                    slug,
                    size.get("price_hourly"),
                    notes=notes,
                    vcpus=size.get("vcpus"),
                    ram_gib=ram_gib,
                )
                for region in sorted(regions)
            ]
    known = set(map(str, shipped["instance_type"]))
    gone = [  # shipped sizes no region offers now
        f"{r}/{t}"
        for r, t in zip(shipped["region"], shipped["instance_type"])
        if t in unknown
    ]
    return refresh.offers_frame(
        rows,
        "do",
        gpus,
        shipped,
        unknown=[u for u in unknown if u not in known],
        unpriced=gone,
    )
