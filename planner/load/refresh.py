"""Refresh offer prices from the providers' public price APIs.

Price lists say what an instance costs, not what it is: GPU model and count, vCPUs, RAM,
VRAM and the interconnect come from the shipped catalog (``planner.offer_facts``), so a
refreshed p5.48xlarge keeps its 8 x H100-SXM and EFA 3200 Gbit/s.  Sizes the shipped
catalog does not know are dropped and counted (``frame.attrs["unknown_instance_types"]``):
without their facts they could not be planned on.

Network access is only in the ``fetch_*`` functions (``requests``, imported lazily, or any
object with the same ``get``/``post``); the parsers take the recorded responses, so tests need
no network.  Every failure a user can meet is a one-line ``PlannerError``.

This module holds what every provider's refresh shares: the HTTP GET and POST that turn
failures into one line, the provider's API key read from its usual environment variable or
file (never stored), a price row with the importer's price rules, prices joined to the shipped
facts into offer rows, and writing the offers CSV.  Each provider's price API is read in its
own module (``refresh_azure``, ``refresh_aws``, ``refresh_gcp``, ...); ``refresh_sources``
says which providers have one.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from datetime import date
from pathlib import Path
from typing import Any

import pandas as pd

from planner.errors import PlannerError
from planner.files import write_atomic
from planner.load.catalog import OFFER_COLUMNS, offers_text_error
from planner.load.offer_facts import (
    join_tags,
    keep_known_facts,
    load_shipped_offers,
    missing,
    order_defaults,
    split_tags,
)
from planner.load.skypilot import (
    SPOT_PREEMPTION_DEFAULT,
    SPOT_PREEMPTION_FALLBACK,
    catalog_header,
    clean_prices,
)
from planner.schema.catalog import Gpu

TIMEOUT_S = 60.0
PRICE_COLUMNS = [
    "provider",
    "region",
    "instance_type",
    "vcpus",
    "ram_gib",
    "on_demand_usd_h",
    "spot_usd_h",
    "defaults",
    "notes",
]

# ---------------------------------------------------------------- HTTP (requests or a look-alike)


def session(session: Any) -> Any:
    if session is not None:
        return session
    try:
        import requests
    except ImportError:  # pragma: no cover - requests is a dependency
        raise PlannerError(
            "fetching prices needs the 'requests' package (pip install requests)"
        ) from None
    return requests.Session()


def one_line(text: Any, limit: int = 160) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def redact(text: str) -> str:
    """Text without the query strings of the URLs in it (an API key may ride in one)."""
    return re.sub(r"\?[^\s)'\"]*", "", str(text))


def network_reason(exc: BaseException) -> str:
    """The short cause of a connection failure ('[Errno 111] Connection refused', 'ReadTimeout')
    rather than requests' whole retry chain."""
    text = redact(" ".join(str(exc).split()))
    m = re.search(r"\[Errno [^\]]+\][^)\"'(]*", text)
    if m:
        return m.group(0).strip()
    return (
        f"{type(exc).__name__}: {one_line(text, 100)}" if text else type(exc).__name__
    )


def get(
    session: Any,
    url: str,
    what: str,
    *,
    params: dict | None = None,
    headers: dict | None = None,
    stream: bool = False,
    timeout: float = TIMEOUT_S,
    auth_hint: str = "",
) -> Any:
    """GET that turns "offline" and "the API said no" into one clear line each.

    requests' exceptions derive from OSError (IOError), as do the built-in connection errors.
    ``auth_hint`` (e.g. "check LAMBDA_API_KEY") ends the line of an HTTP 401 or 403.
    """
    kwargs = _given(timeout=timeout, params=params, headers=headers, stream=stream)
    return _answer(session.get, url, what, kwargs, stream, auth_hint)


def post(
    session: Any,
    url: str,
    what: str,
    *,
    json: Any,
    params: dict | None = None,
    headers: dict | None = None,
    timeout: float = TIMEOUT_S,
    auth_hint: str = "",
) -> Any:
    """POST of a JSON body (a GraphQL query, a search), failures as one line like ``get``."""
    kwargs = _given(json=json, timeout=timeout, params=params, headers=headers)
    return _answer(session.post, url, what, kwargs, False, auth_hint)


def _given(**kwargs: Any) -> dict[str, Any]:
    """The request's keyword arguments, without those left out (None, or no stream)."""
    return {k: v for k, v in kwargs.items() if v is not None and v is not False}


def _answer(
    send: Any, url: str, what: str, kwargs: dict, stream: bool, auth_hint: str
) -> Any:
    try:
        response = send(url, **kwargs)
    except OSError as exc:
        raise PlannerError(
            f"cannot reach {what} ({url.split('?')[0]}): {network_reason(exc)}; "
            "check the network connection or proxy and retry"
        ) from None
    status = int(getattr(response, "status_code", 200))
    if status >= 400:
        detail = ""
        if not stream:
            detail = one_line(redact(getattr(response, "text", "") or ""), 120)
        close(response)
        hint = f"; {auth_hint}" if auth_hint and status in (401, 403) else ""
        raise PlannerError(
            f"{what} answered HTTP {status} for {url.split('?')[0]}"
            + (f": {detail}" if detail else "")
            + hint
        )
    return response


def json_of(response: Any, what: str, url: str) -> Any:
    """The JSON body of an answer, or one line saying it is not JSON."""
    try:
        return response.json()
    except ValueError:
        raise PlannerError(
            f"{what} answered something that is not JSON ({url.split('?')[0]})"
        ) from None
    finally:
        close(response)


def get_json(
    session: Any, url: str, what: str, shaped: Any, expected: str, **kwargs: Any
) -> Any:
    """``get`` then ``json_of``, and one line when the JSON is not the shape ``shaped(answer)`` checks
    (``expected`` says what was missing: "without a 'data' object")."""
    answer = json_of(get(session, url, what, **kwargs), what, url)
    if not shaped(answer):
        raise PlannerError(f"{what} answered JSON {expected} ({url.split('?')[0]})")
    return answer


def close(response: Any) -> None:
    close = getattr(response, "close", None)
    if callable(close):
        close()


# ---------------------------------------------------------------- credentials (read, never stored)


def api_key(
    what: str,
    env: tuple[str, ...],
    file: str | None = None,
    pattern: str | None = None,
    required: bool = True,
) -> str | None:
    """A provider's API key from the first of ``env`` that is set, else from ``file`` (under the
    home folder: the whole file, or the first group of ``pattern`` in it, as the provider's CLI
    writes it).  None when there is none and it is not ``required``; else one line naming the
    variable to set.  The key is only sent to the provider's API; it is never written anywhere.
    """
    import os

    for name in env:
        value = os.environ.get(name, "").strip()
        if value:
            return value
    if file:
        path = Path.home() / file
        try:
            text = path.read_text(encoding="utf-8", errors="replace")[:65536]
        except OSError:
            text = ""
        if pattern:
            m = re.search(pattern, text, re.MULTILINE)
            text = m.group(1) if m else ""
        if text.strip():
            return text.strip()
    if not required:
        return None
    where = f" (or save it in ~/{file})" if file else ""
    raise PlannerError(f"no {what}: set {env[0]}{where}")


# ---------------------------------------------------------------- shared finishing


def _preemption_defaults(frame: pd.DataFrame, provider: str) -> pd.DataFrame:
    """Spot rows need a preemption rate (shipped one where known, else the provider default,
    listed in `defaults`); rows without spot have none."""
    default = SPOT_PREEMPTION_DEFAULT.get(provider, SPOT_PREEMPTION_FALLBACK)
    frame = frame.copy()
    has_spot = frame["spot_usd_h"].notna()
    need = has_spot & frame["spot_preemption_per_h"].isna()
    frame.loc[need, "spot_preemption_per_h"] = default
    frame.loc[need, "defaults"] = [
        order_defaults([*split_tags(d), "spot_preemption_per_h"])
        for d in frame.loc[need, "defaults"]
    ]
    frame.loc[~has_spot, "spot_preemption_per_h"] = math.nan
    frame.loc[~has_spot, "defaults"] = [
        order_defaults(t for t in split_tags(d) if t != "spot_preemption_per_h")
        for d in frame.loc[~has_spot, "defaults"]
    ]
    return frame


def with_facts(
    prices: pd.DataFrame,
    provider: str,
    gpus: Mapping[str, Gpu] | None,
    shipped: pd.DataFrame | None,
) -> pd.DataFrame:
    """Prices + shipped facts -> offer rows.  Rows of sizes the shipped catalog lacks are
    dropped: attrs["unknown_instance_types"] names the sizes, attrs["dropped_rows"] counts rows."""
    if shipped is None:
        shipped = load_shipped_offers(provider)
    merged = keep_known_facts(prices, shipped)
    unmatched = set(merged.attrs.get("unmatched", []))
    keys = list(zip(merged["provider"], merged["region"], merged["instance_type"]))
    out = merged[[k not in unmatched for k in keys]].reindex(columns=OFFER_COLUMNS)
    out["defaults"] = out["defaults"].fillna("")
    out["notes"] = out["notes"].fillna("")
    # a shipped row without VRAM: the GPU's marketed memory, marked as a default
    no_vram = out["gpu_vram_gib"].isna() & out["gpu"].isin(list(gpus or ()))
    if no_vram.any():  # (assigning nothing fails on an int column)
        out["gpu_vram_gib"] = out["gpu_vram_gib"].astype(float)
        out.loc[no_vram, "gpu_vram_gib"] = [
            gpus[g].vram_gib for g in out.loc[no_vram, "gpu"]
        ]
        out.loc[no_vram, "defaults"] = [
            order_defaults([*split_tags(d), "gpu_vram_gib"])
            for d in out.loc[no_vram, "defaults"]
        ]
    if len(out):
        out = _preemption_defaults(out, provider)
    out = out[out["on_demand_usd_h"].notna() | out["spot_usd_h"].notna()]
    out = out.sort_values(["instance_type", "region"], kind="mergesort").reset_index(
        drop=True
    )
    out.attrs = {
        "unknown_instance_types": sorted({it for _, _, it in unmatched}),
        "dropped_rows": len(unmatched),
    }
    return out


def price_row(
    provider: str,
    region: str,
    instance_type: str,
    on_demand: float,
    spot: float = math.nan,
    notes: tuple[str, ...] | list[str] = (),
    vcpus: float = math.nan,
    ram_gib: float = math.nan,
) -> dict:
    """One row of PRICE_COLUMNS, prices under the importer's rules (``clean_prices``: a spot
    price of 0 or one at on-demand is no spot price) with the tags that explain them."""
    od, spot, price_notes = clean_prices(_number(on_demand), _number(spot), provider)
    return {
        "provider": provider,
        "region": str(region),
        "instance_type": str(instance_type),
        "vcpus": _number(vcpus),
        "ram_gib": _number(ram_gib),
        "on_demand_usd_h": od,
        "spot_usd_h": spot,
        "defaults": "",
        "notes": join_tags([*notes, *price_notes]),
    }


def _number(value: Any) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return math.nan
    return number if math.isfinite(number) else math.nan


def offers_frame(
    rows: list[dict],
    provider: str,
    gpus: Mapping[str, Gpu] | None,
    shipped: pd.DataFrame | None,
    unknown: Iterable[str] = (),
    unpriced: Iterable[str] = (),
) -> pd.DataFrame:
    """Price rows -> offer rows (``with_facts``).  ``unknown`` adds sizes the answer named but no
    row was made for (no region to place them in) to ``attrs["unknown_instance_types"]``;
    ``attrs["unpriced_offers"]`` names the shipped offers (``region/instance_type``) the answer
    gave no price for: left out, their shipped prices not carried over."""
    frame = with_facts(
        pd.DataFrame(rows, columns=PRICE_COLUMNS), provider, gpus, shipped
    )
    frame.attrs["unknown_instance_types"] = sorted(
        {*frame.attrs["unknown_instance_types"], *map(str, unknown)}
    )
    frame.attrs["unpriced_offers"] = sorted(set(map(str, unpriced)))
    return frame


def summary(frame: pd.DataFrame) -> str:
    """What a refresh left out, as the end of its `wrote ...` line ('' when nothing)."""
    parts = []
    unknown = len(frame.attrs.get("unknown_instance_types", ()))
    if unknown:
        parts.append(f"skipped {unknown} sizes the shipped catalog lacks")
    unpriced = len(frame.attrs.get("unpriced_offers", ()))
    if unpriced:
        parts.append(f"left out {unpriced} shipped offers the answer has no price for")
    return "".join(f"; {p}" for p in parts)


# ---------------------------------------------------------------- writing


def _cell(value: Any) -> str:
    """The shipped number format: up to 12 significant digits, integral floats without '.0'."""
    if isinstance(value, (tuple, list)):
        return ";".join(str(v) for v in value)
    if missing(value):
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)) or hasattr(value, "item"):
        try:
            number = float(value)
        except (TypeError, ValueError):
            return str(value)
        return str(int(number)) if number.is_integer() else format(number, ".12g")
    return str(value)


def write_offers_csv(
    frame: pd.DataFrame, path: str | Path, source: str, as_of: str
) -> None:
    """Write offers in the shipped catalog format, atomically (temp file + os.replace), once what
    would be written loads as a catalog (`check_offers_csv`): a bad refresh never replaces a good file.

    ``as_of`` is the ISO date (YYYY-MM-DD) of the fetch; ``source`` names the API or file.
    Columns follow planner.load.catalog.OFFER_COLUMNS (missing ones blank), rows are sorted by
    instance type and region, as the shipped files are.
    """
    try:
        date.fromisoformat(as_of)
    except (TypeError, ValueError):
        raise PlannerError(
            f"as_of must be an ISO date YYYY-MM-DD, got {as_of!r}"
        ) from None
    if len(as_of) != 10:
        raise PlannerError(f"as_of must be an ISO date YYYY-MM-DD, got {as_of!r}")
    out = frame.reindex(columns=OFFER_COLUMNS)
    if len(out):
        out = out.sort_values(["instance_type", "region"], kind="mergesort")
    body = out.astype(object).map(_cell).to_csv(index=False, lineterminator="\n")
    text = (
        catalog_header(source=source, as_of=as_of, built_by="planner price refresh")
        + body
    )
    check_offers_csv(out, text, Path(path))
    write_atomic(Path(path), text)


def check_offers_csv(out: pd.DataFrame, text: str, path: Path) -> None:
    """`text` (the rows of `out`, in order) must load as an offers catalog, with the checks `catalog import`
    runs before it writes (`read_offers`: every row's fields and bounds, known GPUs and providers); else one
    line at `path`, which is left as it was, naming the offer the price source got wrong."""
    found = offers_text_error(text)
    if found:
        exc, index = found
        offer = (
            f" ({out.iloc[index]['instance_type']} in {out.iloc[index]['region']})"
            if index is not None and 0 <= index < len(out)
            else ""
        )
        raise PlannerError(
            f"not written, the refreshed offers do not load as a catalog: {exc.message}{offer}",
            str(path),
        )
