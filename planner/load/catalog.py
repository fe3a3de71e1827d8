"""Shipped and user catalogs: CSV files loaded with pandas and validated into the domain model.

A catalog is named by provider (`aws`, `gcp`, ...: a file under `catalogs/offers/`) or given
as a path to an offers CSV in the same format (for example a company's negotiated prices).
"""

from __future__ import annotations

import csv
import io
import math
import os
from dataclasses import dataclass, field
from datetime import date, datetime
from functools import cached_property
from importlib import resources
from pathlib import Path

import numpy as np
import pandas as pd
from pydantic import TypeAdapter, ValidationError

from planner.errors import PlannerError, did_you_mean
from planner.load import yaml as yamlio
from planner.schema.calibration import Calibration
from planner.schema.catalog import (
    Gpu,
    LocalDisk,
    ModelArch,
    Offer,
    Provider,
    StorageOffer,
)


def _shipped(package: str) -> Path:
    """A folder of package data (installed wheel, or the checkout's top-level folder in an editable
    install: pyproject.toml maps both); wheels install unzipped, so it is a real directory."""
    return Path(str(resources.files(package)))


CATALOG_DIR = Path(
    os.environ.get("PLANNER_CATALOG_DIR") or _shipped("planner._catalogs")
)
"""The shipped catalogs; PLANNER_CATALOG_DIR points the planner at another folder of the same layout."""
EXAMPLES_DIR = _shipped("planner._scenarios")
"""The example scenarios and quarter files (`planner examples` copies them)."""

OFFER_COLUMNS = [
    "provider",
    "region",
    "instance_type",
    "gpu",
    "gpus_per_node",
    "vcpus",
    "ram_gib",
    "gpu_vram_gib",
    "intra_node",
    "intra_node_gbs",
    "inter_node",
    "inter_node_gbps",
    "on_demand_usd_h",
    "spot_usd_h",
    "spot_preemption_per_h",
    "max_nodes",
    "billing_granularity_h",
    "billing_minimum_h",
    "defaults",
    "notes",
]
_LIST_SEPARATOR = ";"


def shipped_catalog_names() -> list[str]:
    return sorted(p.stem for p in (CATALOG_DIR / "offers").glob("*.csv"))


def _header_comments(text: str) -> tuple[dict[str, str], int]:
    """`# key: value` lines at the top of a CSV -> metadata, and how many lines they take."""
    meta: dict[str, str] = {}
    count = 0
    for line in text.split("\n"):
        if not line.startswith("#"):
            break
        count += 1
        key, _, value = line[1:].partition(":")
        if value:
            meta[key.strip()] = value.strip()
    return meta, count


def _check_as_of(value: str, path: Path, text: str) -> None:
    """`# as_of:` dates the prices (and their age warning): a date that is not one would silently drop both."""
    try:
        datetime.fromisoformat(value)
    except ValueError:
        line = next(
            (
                n
                for n, row in enumerate(text.splitlines(), 1)
                if row.startswith("#") and "as_of" in row
            ),
            1,
        )
        raise PlannerError(
            f"# as_of: expected a date such as 2025-07-01 (or 2025-07-01T12:00), got {value!r}",
            f"{path}:{line}",
        ) from None


def read_table_file(path: Path, what: str) -> tuple[pd.DataFrame, dict[str, str], int]:
    """(rows as strings, empty cells missing, indexed by the line each starts on; the `# key: value` header;
    the header row's line). Comment lines (`#`) and blank lines may stand anywhere and are skipped; a row
    with more values than the header has columns is refused at its line (pandas would shift it silently)."""
    # one capped read: folders, devices and unreadable files are refused
    raw = yamlio.read_capped(path, what)
    if b"\x00" in raw[:65536]:
        raise PlannerError(f"this is a binary file, expected a CSV {what}", str(path))
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise PlannerError(
            f"cannot read {what}: not UTF-8 text ({exc.reason} at byte {exc.start})",
            str(path),
        ) from None
    meta, _ = _header_comments(text)
    if "as_of" in meta:
        _check_as_of(meta["as_of"], path, text)
    physical: list[int] = []  # the file's line number of each line the reader is given

    def uncommented():
        for number, line in enumerate(io.StringIO(text, newline=""), 1):
            if not line.startswith("#"):
                physical.append(number)
                yield line

    # an unclosed quote is an error, not the rest of the file
    reader = csv.reader(uncommented(), strict=True)
    header, header_line, rows, lines, consumed = None, 0, [], [], 0
    try:
        for record in reader:
            line, consumed = (
                physical[consumed],
                reader.line_num,
            )  # a quoted cell may span lines: where it begins
            if not "".join(record).strip():
                continue
            if header is None:
                header, header_line = record, line
                twice = sorted({c for c in record if record.count(c) > 1})
                if twice:
                    raise PlannerError(
                        f"column {twice[0]!r} appears twice in the header",
                        f"{path}:{line}",
                    )
                continue
            extra = [cell for cell in record[len(header) :] if cell.strip()]
            if extra:
                raise PlannerError(
                    f"{len(record)} values for the header's {len(header)} columns "
                    f"(a stray comma, or a value with a comma that is not quoted?)",
                    f"{path}:{line}",
                )
            rows.append(record[: len(header)] + [""] * (len(header) - len(record)))
            lines.append(line)
    except csv.Error as exc:
        raise PlannerError(
            f"cannot read {what}: {exc}",
            f"{path}:{physical[min(consumed, len(physical) - 1)]}",
        ) from None
    if header is None:
        raise PlannerError(f"no header row: expected a CSV {what}", str(path))
    frame = pd.DataFrame(
        rows, columns=header, index=pd.Index(lines, dtype=int), dtype=object
    )
    return frame.where(frame != "").astype(object), meta, header_line


def _records(frame: pd.DataFrame) -> list[dict]:
    """Rows as dicts without missing cells (so pydantic applies each field's default)."""
    columns = list(frame.columns)
    return [
        {k: v for k, v in zip(columns, row) if isinstance(v, str) and v != ""}
        for row in frame.to_numpy(dtype=object).tolist()
    ]


def _validate_rows(model, frame: pd.DataFrame, path: Path, what: str) -> list:
    records = _records(frame)
    for record in records:
        for list_field in ("defaults",):
            if list_field in record:
                record[list_field] = tuple(
                    x for x in record[list_field].split(_LIST_SEPARATOR) if x
                )
    try:
        return TypeAdapter(list[model]).validate_python(records)
    except ValidationError as exc:
        error = exc.errors()[0]
        row, *rest = error["loc"]
        column = ".".join(str(p) for p in rest)
        message = error["msg"]
        if error["type"] == "extra_forbidden":
            message = (
                f"unknown column {column!r}{did_you_mean(column, model.model_fields)}"
            )
        elif error["type"] == "missing":
            message = f"missing value for column {column!r}"
        else:
            message = f"column {column!r}: {message} (got {error.get('input')!r})"
        raise PlannerError(
            f"bad {what} row: {message}", f"{path}:{frame.index[int(row)]}"
        ) from None


VARIANT_TAGS = {"instruct", "chat", "it", "hf", "pt", "base"}
"""Name parts that mark a release of the same weights' shape: instruction or chat tuning, Meta's `-hf` conversions,
Google's `-pt`/`-it`, Mistral's `-Base`. Versions (`v0.2`) and dates are kept: they may change the shape."""


def base_repo(repo_id: str) -> str:
    """A Hub id without its variant tags, lower-case: `meta-llama/Llama-2-7b-chat-hf` -> `meta-llama/llama-2-7b`."""
    org, _, name = repo_id.lower().partition("/")
    return (
        org
        + "/"
        + "-".join(part for part in name.split("-") if part not in VARIANT_TAGS)
    )


@dataclass
class Catalog:
    """Everything the planner knows about hardware and prices, for one scenario."""

    gpus: dict[str, Gpu]
    providers: dict[str, Provider]
    models: dict[str, ModelArch]
    offers: pd.DataFrame
    sources: dict[str, dict[str, str]] = field(default_factory=dict)
    files: tuple[
        Path, ...
    ] = ()  # the tables and offer CSVs read, so no output is written over one
    # measured availability spot offers are held to; None: the shipped ones
    spot_traces: tuple | None = None
    # where a job's data and checkpoints can live, per provider (catalogs/storage.csv)
    storage: tuple[StorageOffer, ...] = ()
    # local NVMe GiB per (provider, instance type), where published (catalogs/local_disks.csv)
    local_gib: dict[tuple[str, str], float] = field(default_factory=dict)
    # what the runs that happened measured (`load/calibration.py`); None: the catalog's own assumptions
    calibration: Calibration | None = None
    # availability signals applied to the offers, (kind, in words) by offer key (`load/signals.py`)
    signals: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    # the providers each offer catalog in `sources` holds (the stale-price warning names their refresh)
    source_providers: dict[str, tuple[str, ...]] = field(default_factory=dict)

    @cached_property
    def storage_table(self) -> pd.DataFrame:
        """`storage` as a table the physics reads by position, with each option's `backing`: itself where
        persistent, else its provider's cheapest persistent shared option (where a local disk's data set and
        checkpoints persist); and its `origin`, that option, where a data set is copied from."""
        table = pd.DataFrame(
            [o.model_dump() for o in self.storage],
            columns=list(StorageOffer.model_fields),
        ).astype({"node_max_mbs": float, "max_mbs": float})
        home = {}
        for i, o in enumerate(self.storage):
            if o.persistent and o.shared:
                best = home.get(o.provider)
                if best is None or (o.usd_per_gib_month, o.name) < (
                    self.storage[best].usd_per_gib_month,
                    self.storage[best].name,
                ):
                    home[o.provider] = i
        table["backing"] = [
            i if o.persistent else home.get(o.provider, i)
            for i, o in enumerate(self.storage)
        ]
        table["origin"] = [home.get(o.provider, i) for i, o in enumerate(self.storage)]
        table["sized_for_bandwidth"] = False
        # a file system whose bandwidth grows with its size is also offered sized to what its clients can read
        grows = table[(table["scope"] == "tib") & table["node_max_mbs"].notna()]
        bandwidth = grows.assign(
            name=grows["name"] + BANDWIDTH_SIZED, sized_for_bandwidth=True
        )
        table = pd.concat([table, bandwidth], ignore_index=True)
        # measured checkpoint and restart times over the modelled ones (a calibration), by option
        factors = [
            self.calibration.storage_factors(name)
            if self.calibration is not None
            else (1.0, 1.0)
            for name in table["name"]
        ]
        table["checkpoint_factor"] = [c for c, _ in factors]
        table["restart_factor"] = [r for _, r in factors]
        return table

    @cached_property
    def storage_arrays(self) -> dict[str, np.ndarray]:
        """`storage_table`'s columns as arrays, as the storage physics reads them row by row."""
        return {c: self.storage_table[c].to_numpy() for c in self.storage_table.columns}

    def gpu(self, name: str) -> Gpu:
        """A GPU by canonical name, or by family (`H100` -> its fastest member, H100-SXM)."""
        for gpu in self.gpus.values():
            if gpu.name.lower() == name.lower():
                return gpu
        family = [g for g in self.gpus.values() if g.family.lower() == name.lower()]
        if family:
            return max(family, key=lambda g: (g.mem_bandwidth_gbs, g.name))
        raise KeyError(f"unknown GPU {name!r}{did_you_mean(name, self.gpus)}")

    def model(self, name: str) -> ModelArch:
        """A model by catalog name or by the Hugging Face id the catalog row records, or by the id of a
        fine-tuned variant of it (`meta-llama/Llama-3.1-8B-Instruct`, `google/gemma-2-9b-it`): the same shape."""
        for model in self.models.values():
            if name.lower() in (model.name.lower(), model.hf_repo.lower()):
                return model
        base = base_repo(name)
        for model in self.models.values():
            if "/" in name and model.hf_repo and base_repo(model.hf_repo) == base:
                return model
        raise KeyError(f"unknown model {name!r}{did_you_mean(name, self.models)}")

    def gpu_matches(self, gpu_name: str, query: str) -> bool:
        """A GPU filter names a canonical GPU (`H100-SXM`) or a family (`H100`)."""
        gpu = self.gpus.get(gpu_name)
        query = query.lower()
        return gpu_name.lower() == query or (
            gpu is not None and gpu.family.lower() == query
        )

    def accelerator_matches(
        self, gpu_name: str, gpus_per_node: int, query: str
    ) -> bool:
        """`H100` (a GPU or family, any node size) or `H100:8` (nodes of 8: SkyPilot's syntax, as scenario files
        and every `--gpu` option take it)."""
        name, count = split_accelerator(query)
        return self.gpu_matches(gpu_name, name) and (
            count is None or int(gpus_per_node) == count
        )

    def knows_gpu(self, query: str) -> bool:
        """A GPU or family the catalog knows, with a whole number of GPUs per node if it gives one."""
        name, colon, count = query.lower().partition(":")
        if colon and not (count.isdigit() and int(count) > 0):
            return False
        return any(
            g.name.lower() == name or g.family.lower() == name
            for g in self.gpus.values()
        )

    def gpu_names_and_families(self) -> list[str]:
        return sorted(
            {g.name for g in self.gpus.values()}
            | {g.family for g in self.gpus.values()}
        )

    def prices_as_of(self) -> date | None:
        """The oldest `# as_of:` date of the offer catalogs used (a catalog without one is not counted)."""
        dates = []
        for meta in self.sources.values():
            try:
                dates.append(date.fromisoformat(str(meta.get("as_of", ""))[:10]))
            except ValueError:
                continue
        return min(dates) if dates else None

    @cached_property
    def offer_models(self) -> dict[str, Offer]:
        return {
            key: Offer(**_offer_fields(row))
            for key, row in self.offers.set_index("key").iterrows()
        }


def _offer_fields(row: pd.Series) -> dict:
    fields = {
        k: v for k, v in row.items() if k in Offer.model_fields and not _missing(v)
    }
    fields["defaults"] = (
        tuple(row["defaults"]) if isinstance(row.get("defaults"), (tuple, list)) else ()
    )
    return fields


def _missing(value) -> bool:
    return value is None or (isinstance(value, float) and pd.isna(value))


def load_gpus(directory: Path = CATALOG_DIR) -> dict[str, Gpu]:
    path = directory / "gpus.csv"
    frame, _, _ = read_table_file(path, "GPU table")
    frame = frame.drop(columns=["aliases"], errors="ignore")
    return {g.name: g for g in _validate_rows(Gpu, frame, path, "GPU")}


def load_models(directory: Path = CATALOG_DIR) -> dict[str, ModelArch]:
    path = directory / "models.csv"
    frame, _, _ = read_table_file(path, "model table")
    return {m.name: m for m in _validate_rows(ModelArch, frame, path, "model")}


def load_providers(directory: Path = CATALOG_DIR) -> dict[str, Provider]:
    path = directory / "providers.csv"
    frame, _, _ = read_table_file(path, "provider table")
    frame = frame.rename(columns={"provider": "name"})
    for seconds, hours in (
        ("billing_granularity_s", "billing_granularity_h"),
        ("billing_minimum_s", "billing_minimum_h"),
    ):
        frame[hours] = (frame.pop(seconds).astype(float) / 3600).astype(str)
    frame = frame.drop(columns=["notes"], errors="ignore")
    return {p.name: p for p in _validate_rows(Provider, frame, path, "provider")}


BANDWIDTH_SIZED = "-for-bandwidth"
"""The name suffix of a shared file system provisioned for its clients' bandwidth rather than its contents."""


def load_storage(directory: Path = CATALOG_DIR) -> tuple[StorageOffer, ...]:
    path = directory / "storage.csv"
    frame, _, _ = read_table_file(path, "storage table")
    frame = frame.rename(columns={"class": "storage_class"}).drop(
        columns=["notes"], errors="ignore"
    )
    return tuple(_validate_rows(StorageOffer, frame, path, "storage"))


def load_local_disks(directory: Path = CATALOG_DIR) -> dict[tuple[str, str], float]:
    path = directory / "local_disks.csv"
    frame, _, _ = read_table_file(path, "local disk table")
    frame = frame.drop(columns=["notes"], errors="ignore")
    return {
        (d.provider, d.instance_type): d.local_gib
        for d in _validate_rows(LocalDisk, frame, path, "local disk")
    }


def read_offers(
    path: Path, gpus: dict[str, Gpu], providers: dict[str, Provider]
) -> tuple[pd.DataFrame, dict[str, str]]:
    """One offers CSV -> validated frame (typed columns) and its `# source/as_of` header."""
    frame, meta, header_line = read_table_file(path, "offers catalog")
    missing = [
        c
        for c in ("provider", "region", "instance_type", "gpu", "gpus_per_node")
        if c not in frame.columns
    ]
    if missing:
        raise PlannerError(
            f"offers catalog lacks column(s) {', '.join(missing)}; expected {', '.join(OFFER_COLUMNS)}",
            f"{path}:{header_line}",
        )
    offers = _validate_rows(Offer, frame, path, "offer")
    for line, offer in zip(frame.index, offers):
        if offer.gpu not in gpus:
            raise PlannerError(
                f"unknown GPU {offer.gpu!r}{did_you_mean(offer.gpu, gpus)}",
                f"{path}:{line}",
            )
        if offer.provider not in providers:
            raise PlannerError(
                f"unknown provider {offer.provider!r}{did_you_mean(offer.provider, providers)}; "
                f"known: {', '.join(sorted(providers))}",
                f"{path}:{line}",
            )
        if offer.on_demand_usd_h is None and offer.spot_usd_h is None:
            raise PlannerError(
                "offer has neither an on-demand nor a spot price", f"{path}:{line}"
            )
        if (
            offer.inter_node != "none" and not offer.inter_node_gbps
        ):  # the speed model needs the link's rate
            raise PlannerError(
                f"inter_node {offer.inter_node} needs inter_node_gbps above 0 (Gbit/s per node), "
                "or inter_node none for single-node offers",
                f"{path}:{line}",
            )
    typed = pd.DataFrame([o.model_dump() for o in offers], columns=OFFER_COLUMNS)
    typed["source_file"] = str(path)
    return typed, meta


def offers_text_error(text: str) -> tuple[PlannerError, int | None] | None:
    """What `read_offers` refuses in an offers CSV not yet written (`catalog import` and `catalog refresh` check
    what they would write), with the index of the data row at fault (None: no one row); None when it loads."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        trial = Path(tmp) / "offers.csv"
        trial.write_text(text, encoding="utf-8")
        try:
            read_offers(trial, load_gpus(), load_providers())
        except PlannerError as exc:
            where = exc.where or ""
            if not where.startswith(f"{trial}:"):
                return exc, None
            # header comments, column names
            first_line = text.count("\n", 0, text.index("\nprovider,")) + 3
            return exc, int(where.rsplit(":", 1)[1]) - first_line
    return None


def load_catalog(names_or_paths, base_dir: Path | None = None) -> Catalog:
    """Load the GPU, model and provider tables plus the named offer catalogs (later ones win on duplicate keys)."""
    gpus, models, providers = load_gpus(), load_models(), load_providers()
    frames, sources, files, source_providers = [], {}, [], {}
    shipped = shipped_catalog_names()
    for item in names_or_paths:
        if item in shipped:
            path = CATALOG_DIR / "offers" / f"{item}.csv"
        elif "/" in item or item.endswith(".csv"):
            path = (
                (base_dir / item)
                if base_dir and not Path(item).is_absolute()
                else Path(item)
            )
        else:
            raise KeyError(
                f"unknown catalog {item!r}{did_you_mean(item, shipped)}; shipped: {', '.join(shipped)}"
            )
        frame, meta = read_offers(path, gpus, providers)
        files.append(Path(path))
        source_providers[item] = tuple(sorted(set(frame["provider"])))
        if (
            not frame.empty
        ):  # an empty frame's untyped columns would make every column untyped
            frames.append(frame)
        sources[item] = meta
    offers = (
        pd.concat(frames, ignore_index=True)
        if frames
        else pd.DataFrame(columns=OFFER_COLUMNS)
    )
    offers["key"] = (
        offers["provider"] + "/" + offers["region"] + "/" + offers["instance_type"]
    )
    offers = (
        offers.drop_duplicates("key", keep="last")
        .sort_values("key", kind="stable")
        .reset_index(drop=True)
    )
    fill = {p.name: p.spot_preemption_per_node_h for p in providers.values()}
    defaulted = offers["spot_usd_h"].notna() & offers["spot_preemption_per_h"].isna()
    if defaulted.any():
        offers.loc[defaulted, "spot_preemption_per_h"] = (
            offers.loc[defaulted, "provider"].map(fill).astype(float)
        )
    spot = offers["spot_usd_h"].notna()
    for column, none in (
        ("spot_correlation", 0.0),
        ("spot_capacity_wait_h", 0.0),
        ("spot_capacity_wait_cv", 1.0),
    ):  # the provider's trace fit (cost model §3)
        value = (
            offers["provider"]
            .map({p.name: getattr(p, column) for p in providers.values()})
            .astype(float)
        )
        offers[column] = value.where(spot).fillna(none)
    return Catalog(
        gpus=gpus,
        providers=providers,
        models=models,
        offers=offers,
        sources=sources,
        files=(*catalog_tables(), *files),
        storage=load_storage(),
        local_gib=load_local_disks(),
        source_providers=source_providers,
    )


def catalog_tables() -> tuple[Path, ...]:
    """The catalog folder's own tables (GPUs, models, providers, the spot trace fits): facts every command reads,
    so no output may be written over one."""
    return tuple(sorted(CATALOG_DIR.glob("*.csv")))


def gpu_summary(catalog: Catalog, queries: tuple[str, ...] = ()) -> pd.DataFrame:
    """Per GPU model on offer (like `sky show-gpus`): VRAM, bandwidth, FP8, the cheapest on-demand and
    spot price per GPU-hour across providers (and who offers it), and the GPU counts per node on offer."""
    offers = catalog.offers
    if queries:
        offers = offers[
            [
                any(catalog.accelerator_matches(g, n, q) for q in queries)
                for g, n in zip(offers["gpu"], offers["gpus_per_node"])
            ]
        ]
    rows = []
    for name, group in offers.groupby("gpu", sort=True):
        gpu = catalog.gpus[name]
        row = {
            "gpu": name,
            "vram_gib": gpu.vram_gib,
            "bandwidth_gbs": gpu.mem_bandwidth_gbs,
            "fp8": "yes" if gpu.fp8_tflops else "no",
        }
        for market, column in (
            ("on_demand", "on_demand_usd_h"),
            ("spot", "spot_usd_h"),
        ):
            per_gpu = (group[column] / group["gpus_per_node"]).dropna()
            cheapest = group.loc[per_gpu.idxmin()] if not per_gpu.empty else None
            row[f"{market}_usd_per_gpu_h"] = (
                round(float(per_gpu.min()), 4) if cheapest is not None else None
            )
            row[f"{market}_from"] = cheapest["provider"] if cheapest is not None else ""
        row["gpus_per_node"] = ",".join(
            str(c) for c in sorted(group["gpus_per_node"].unique())
        )
        row["providers"] = group["provider"].nunique()
        rows.append(row)
    return pd.DataFrame(rows)


STALE_AFTER_DAYS = 90


def price_age_warning(catalog: Catalog, today: date | None = None) -> str | None:
    """One line when the oldest prices used are older than STALE_AFTER_DAYS, else None; it names the
    command that brings each stale catalog's prices up to date (`catalog refresh` for a provider with a
    price API, `catalog import` for the others)."""
    as_of = catalog.prices_as_of()
    if as_of is None:
        return None
    today = today or date.today()
    age = (today - as_of).days
    if age <= STALE_AFTER_DAYS:
        return None
    from planner.load.refresh_sources import PRICE_APIS

    stale = set()
    for item, meta in catalog.sources.items():
        try:
            dated = date.fromisoformat(str(meta.get("as_of", ""))[:10])
        except ValueError:
            continue
        if (today - dated).days > STALE_AFTER_DAYS:
            stale.update(catalog.source_providers.get(item, ()))
    refreshable = sorted(p for p in stale if p in PRICE_APIS)
    others = sorted(stale - set(refreshable))
    how = (
        f"planner catalog refresh {'|'.join(refreshable)}"
        if refreshable
        else "planner catalog refresh PROVIDER"
    )
    if others:
        imports = f"planner catalog import for {', '.join(others)}"
        how = f"{how} (or {imports})" if refreshable else imports
    return f"prices as of {as_of.isoformat()} are {age} days old; refresh them: {how}"


def split_accelerator(query: str) -> tuple[str, int | None]:
    """SkyPilot's accelerator syntax: `H100:8` is an H100 node of 8 GPUs; `H100` any node size."""
    name, _, count = query.partition(":")
    return name, int(count) if count else None


def offers_for(
    catalog: Catalog, allow, forbid, offers: pd.DataFrame | None = None
) -> pd.DataFrame:
    """The offers a workload's `allow`/`forbid` placement rules leave (GPU filters match families)."""
    offers = catalog.offers if offers is None else offers
    return offers[offer_mask(catalog, allow, forbid, offers)]


def offer_mask(catalog: Catalog, allow, forbid, offers: pd.DataFrame) -> pd.Series:
    """`offers_for` as a mask over `offers`."""
    mask = pd.Series(True, index=offers.index)

    def gpu_mask(queries) -> pd.Series:
        hit = pd.Series(False, index=offers.index)
        for query in queries:
            hit |= pd.Series(
                [
                    catalog.accelerator_matches(g, n, query)
                    for g, n in zip(offers["gpu"], offers["gpus_per_node"])
                ],
                index=offers.index,
                dtype=bool,
            )
        return hit

    for column, values in (
        ("provider", allow.providers),
        ("region", allow.regions),
        ("instance_type", allow.instance_types),
    ):
        if values:
            mask &= offers[column].isin(values)
    if allow.gpus:
        mask &= gpu_mask(allow.gpus)
    for column, values in (
        ("provider", forbid.providers),
        ("region", forbid.regions),
        ("instance_type", forbid.instance_types),
    ):
        if values:
            mask &= ~offers[column].isin(values)
    if forbid.gpus:
        mask &= ~gpu_mask(forbid.gpus)
    return mask


def filter_offers(
    catalog: Catalog,
    providers=(),
    gpus=(),
    regions=(),
    min_vram: str | None = None,
    spot: bool = False,
) -> pd.DataFrame:
    """`planner catalog list`'s filters: names checked against the catalog (one located line each,
    placed at the option that gave them)."""
    from planner.schema.units import parse_gib

    offers = catalog.offers
    for provider in providers:
        if provider not in set(offers["provider"]):
            raise PlannerError(
                f"unknown provider {provider!r}{did_you_mean(provider, catalog.providers)}",
                "--provider",
            )
    for gpu in gpus:
        if not catalog.knows_gpu(gpu):
            raise PlannerError(
                f"unknown GPU {gpu!r}{did_you_mean(gpu, catalog.gpu_names_and_families())}",
                "--gpu",
            )
    if providers:
        offers = offers[offers["provider"].isin(providers)]
    if regions:
        offers = offers[offers["region"].isin(regions)]
    if gpus:
        offers = offers[
            [
                any(catalog.accelerator_matches(g, n, q) for q in gpus)
                for g, n in zip(offers["gpu"], offers["gpus_per_node"])
            ]
        ]
    if min_vram:
        try:
            floor = parse_gib(min_vram)
        except ValueError as exc:
            raise PlannerError(str(exc), "--min-vram") from None
        if not 0 <= floor < math.inf:
            raise PlannerError(
                f"expected a size of 0 or more such as 48GiB, got {min_vram!r}",
                "--min-vram",
            )
        offers = offers[offers["gpu_vram_gib"] >= floor - 1e-9]
    if spot:
        offers = offers[offers["spot_usd_h"].notna()]
    return offers


def offer_listing(offers):
    """The columns a person compares, sorted by price per GPU-hour (on-demand, else spot)."""
    frame = offers.copy()
    price = frame["on_demand_usd_h"].where(
        frame["on_demand_usd_h"].notna(), frame["spot_usd_h"]
    )
    frame["usd_per_gpu_h"] = (price / frame["gpus_per_node"]).round(4)
    frame = frame.sort_values(["usd_per_gpu_h", "key"], kind="stable")
    frame["defaults"] = frame["defaults"].map(lambda d: ";".join(d))
    columns = [
        "provider",
        "region",
        "instance_type",
        "gpu",
        "gpus_per_node",
        "gpu_vram_gib",
        "on_demand_usd_h",
        "spot_usd_h",
        "usd_per_gpu_h",
        "spot_preemption_per_h",
        "intra_node",
        "inter_node",
        "inter_node_gbps",
        "defaults",
        "notes",
    ]
    return frame[columns].reset_index(drop=True)
