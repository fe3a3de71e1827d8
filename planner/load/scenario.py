"""Load a scenario file: YAML -> validated `Scenario` plus the `Catalog` it names.

Every problem becomes one `PlannerError` naming the file, the line and key path, and what was
expected (with the closest valid name where there is one).
"""

from __future__ import annotations

import types
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
from pydantic import BaseModel, ValidationError

from planner.errors import PlannerError, did_you_mean
from planner.load.catalog import Catalog, load_catalog
from planner.load.team_config import with_team_config
from planner.load.yaml import is_quarter, key_path, load_yaml, to_plain, where
from planner.schema.scenario import Scenario


@dataclass
class LoadedScenario:
    path: Path
    scenario: Scenario
    catalog: Catalog
    raw: Any  # the parsed YAML, for line numbers in later errors
    hf_configs: tuple[
        Path, ...
    ] = ()  # the Hugging Face config files its models were read from
    configs: tuple[
        Path, ...
    ] = ()  # the team's planner.toml files it was read with (`team_config`)

    @property
    def inputs(self) -> tuple[Path, ...]:
        """Every file the scenario was read from: no output may be written over one."""
        return (self.path, *self.catalog.files, *self.hf_configs, *self.configs)

    def where(self, loc: tuple) -> str:
        return where(self.path, self.raw, loc)


def load_scenario(path: str | Path, text: str | None = None) -> LoadedScenario:
    """A scenario file, or `text` as its content (`path` then names it, and relative paths in it start from its
    folder)."""
    path = Path(path)
    raw = load_yaml(path, text=text)
    if not isinstance(raw, dict):
        raise PlannerError(
            f"expected a mapping of scenario keys (name, workloads, ...), got a {type(to_plain(raw)).__name__}",
            where(path, raw, ()),
        )
    if is_quarter(raw):
        raise PlannerError(
            "this is a quarter file (it has a horizon): plan it with `planner batch`",
            where(path, raw, ("horizon",)),
        )
    check_duplicate_names(path, raw)
    raw, configs = with_team_config(raw, path.parent, "workloads")
    scenario = validate_model(Scenario, raw, path)
    try:
        catalog = load_catalog(scenario.catalogs, base_dir=path.parent)
    except KeyError as exc:
        bad = str(exc.args[0])
        index = next((i for i, c in enumerate(scenario.catalogs) if repr(c) in bad), 0)
        raise PlannerError(bad, where(path, raw, ("catalogs", index))) from None
    except PlannerError as exc:
        raise located_catalog_error(exc, scenario.catalogs, path, raw) from None
    check_some_offers(catalog, path, raw)
    # the providers' signals first: what runs measured (a calibration) is laid over them
    scenario = with_signals(scenario, catalog, path, raw)
    if scenario.calibration is not None:
        from planner.load.calibration import calibrate_catalog

        scenario = scenario.model_copy(
            update={
                "overrides": calibrate_catalog(
                    scenario.calibration,
                    path.parent,
                    catalog,
                    path,
                    raw,
                    ("calibration",),
                )
                + scenario.overrides
            }
        )
    hf_configs = hf_config_files(scenario.workloads, path)
    scenario = scenario.model_copy(
        update={"workloads": resolve_models(scenario.workloads, catalog, path, raw)}
    )
    loaded = LoadedScenario(path, scenario, catalog, raw, hf_configs, configs)
    check_references(loaded)
    return loaded


def with_signals(scenario, catalog: Catalog, path: Path, raw: Any):
    """The catalogs' stock tags and the scenario's `signals` file laid over the offers; its placement scores
    join the defaults' (`load/signals.py`)."""
    from planner.load.signals import apply_signals, read_signals

    signals = []
    if scenario.signals is not None:
        named = Path(scenario.signals)
        file = named if named.is_absolute() else path.parent / named
        if not file.is_file():
            raise PlannerError(
                f"signals file {scenario.signals!r} not found (write one with `planner catalog signals`)",
                where(path, raw, ("signals",)),
            )
        signals = read_signals(file)
        catalog.files = (*catalog.files, file)
    scores = apply_signals(catalog, signals)
    if not scores:
        return scenario
    from planner.schema.scenario import PlacementScore

    added = tuple(
        PlacementScore(
            provider=s.provider,
            region=s.region,
            instance_type=s.instance_type,
            nodes=s.nodes,
            score=int(s.value),
        )
        for s in scores
    )
    defaults = scenario.defaults.model_copy(
        update={
            "spot_placement_scores": scenario.defaults.spot_placement_scores + added
        }
    )
    return scenario.model_copy(update={"defaults": defaults})


def check_some_offers(catalog: Catalog, path: Path, raw: Any) -> None:
    """Catalogs without a single offer leave nothing to plan: say so here, not per workload in the plan."""
    if catalog.offers.empty:
        from planner.load.catalog import shipped_catalog_names

        shipped = ", ".join(shipped_catalog_names())
        raise PlannerError(
            f"the catalogs hold no offers; name one that does (shipped: {shipped})",
            where(path, raw, ("catalogs",)),
        )


def located_catalog_error(
    exc: PlannerError, catalogs: tuple[str, ...], path: Path, raw: Any
) -> PlannerError:
    """A problem inside an offers file, located also at the scenario line that named the file."""
    index = next(
        (i for i, c in enumerate(catalogs) if Path(c).name in (exc.where or "")), 0
    )
    return PlannerError(
        f"catalog {catalogs[index]!r}: {exc}", where(path, raw, ("catalogs", index))
    )


def resolve_models(
    workloads: tuple,
    catalog: Catalog,
    path: Path,
    raw: Any,
    collection: str = "workloads",
) -> tuple:
    """Models given as a Hugging Face config (a local `{hf_config: path}`, or an `org/name` id the catalog
    does not hold, fetched through huggingface_hub's cache) become inline shapes; catalog names stay."""
    from planner.load import hf_config, hf_fetch
    from planner.schema.catalog import HfConfigFile

    out = []
    for i, workload in enumerate(workloads):
        model, loc = workload.model, (collection, i, "model")
        try:
            if isinstance(model, HfConfigFile):
                file = hf_config_path(model, path)
                config = hf_config.load_config_file(file)
                arch = hf_config.arch_from_config(
                    config,
                    file.resolve().parent.name
                    if file.name == "config.json"
                    else file.stem,
                )
            elif (
                isinstance(model, str)
                and hf_fetch.looks_like_hf_id(model)
                and not _in_catalog(catalog, model)
            ):
                arch = hf_config.arch_from_config(
                    hf_fetch.fetch_config(model),
                    model.split("/")[-1].lower(),
                    hf_repo=model,
                )
            else:
                out.append(workload)
                continue
        except ValueError as exc:
            raise PlannerError(str(exc), where(path, raw, loc)) from None
        out.append(workload.model_copy(update={"model": arch}))
    return tuple(out)


def hf_config_path(model, path: Path) -> Path:
    """A `{hf_config: path}` model's file, relative to the scenario or quarter file `path`."""
    file = Path(model.hf_config)
    return file if file.is_absolute() else path.parent / file


def hf_config_files(workloads: tuple, path: Path) -> tuple[Path, ...]:
    from planner.schema.catalog import HfConfigFile

    return tuple(
        hf_config_path(w.model, path)
        for w in workloads
        if isinstance(w.model, HfConfigFile)
    )


def _in_catalog(catalog: Catalog, name: str) -> bool:
    try:
        catalog.model(name)
        return True
    except KeyError:
        return False


def validate_model(model: type[BaseModel], raw: Any, path: Path):
    """pydantic validation with the first error turned into one located, actionable line."""
    try:
        return model.model_validate(to_plain(raw))
    except ValidationError as exc:
        message, loc = validation_problem(model, exc, raw)
        raise PlannerError(message, where(path, raw, loc)) from None


def validation_problem(
    model: type[BaseModel], exc: ValidationError, raw: Any
) -> tuple[str, tuple]:
    """The most useful error of a failed `model` validation of `raw`: what was expected and found, and the key
    path into `raw` where (pydantic's union-branch labels dropped)."""
    error = _most_useful(exc.errors())
    loc = _data_loc(raw, error["loc"])
    return _describe(model, error, loc), loc


def _most_useful(errors: list[dict]) -> dict:
    """With unions pydantic reports every branch; prefer an unknown key, then the deepest error."""
    for kind in ("extra_forbidden", "missing"):
        hits = [e for e in errors if e["type"] == kind]
        if hits:
            return max(hits, key=lambda e: len(e["loc"]))
    return errors[0]


def _data_loc(raw: Any, loc: tuple) -> tuple:
    """Drop pydantic's union-branch labels from a loc, keeping the keys that are in the file."""
    result: list = []
    node = raw
    for i, part in enumerate(loc):
        if isinstance(node, dict) and part in node:
            node = node[part]
            result.append(part)
        elif isinstance(node, list) and isinstance(part, int) and part < len(node):
            node = node[part]
            result.append(part)
        elif i == len(loc) - 1 and isinstance(part, str) and isinstance(node, dict):
            result.append(part)  # a missing key: name it
    return tuple(result)


def _describe(model: type[BaseModel], error: dict, loc: tuple) -> str:
    kind, message, value = error["type"], error["msg"], error.get("input")
    if kind == "extra_forbidden":
        key = loc[-1]
        allowed = _allowed_keys(model, loc[:-1])
        hint = did_you_mean(key, allowed) if allowed else ""
        expected = (
            f"; expected one of: {', '.join(sorted(allowed))}"
            if allowed and not hint
            else ""
        )
        return f"unknown key {key!r}{hint}{expected}"
    if kind == "missing":
        return f"missing required key {loc[-1]!r}" if loc else "missing required key"
    if message.startswith("Value error, "):
        message = message[len("Value error, ") :]
    if kind == "literal_error":
        options = error.get("ctx", {}).get("expected", "")
        hint = (
            did_you_mean(
                value, [o.strip(" '") for o in options.replace(" or ", ",").split(",")]
            )
            if isinstance(value, str)
            else ""
        )
        return f"got {value!r}; {message.lower()}{hint}"
    if kind in ("value_error", "assertion_error"):
        return message
    if (
        kind == "model_type"
    ):  # a section given as something other than a mapping of its keys
        keys = _allowed_keys(model, loc)
        listed = f" ({', '.join(keys)})" if keys else ""
        return f"expected a mapping of keys{listed}, got {value!r}"
    if kind in ("list_type", "tuple_type"):
        return f"expected a list, got {value!r}"
    shown = f" (got {value!r})" if not isinstance(value, (dict, list)) else ""
    return f"{message[0].lower()}{message[1:]}{shown}"


def _allowed_keys(model: type[BaseModel], loc: tuple) -> list[str]:
    """The field names of the model found at key path `loc` (for 'did you mean')."""
    current: Any = model
    for part in loc:
        current = _unwrap(current)
        if isinstance(current, type) and issubclass(current, BaseModel):
            if isinstance(part, str) and part in current.model_fields:
                current = current.model_fields[part].annotation
            else:
                return []
        elif isinstance(part, int):
            args = typing.get_args(current)
            current = args[0] if args else current
    current = _unwrap(current)
    return (
        list(current.model_fields)
        if isinstance(current, type) and issubclass(current, BaseModel)
        else []
    )


def _unwrap(annotation: Any) -> Any:
    """Optional[X] / Annotated[X, ...] / X | str -> the pydantic model inside, if any."""
    for _ in range(5):
        origin = typing.get_origin(annotation)
        if origin is typing.Annotated:
            annotation = typing.get_args(annotation)[0]
        elif origin in (typing.Union, types.UnionType):
            members = [
                _unwrap(a) for a in typing.get_args(annotation)
            ]  # also tagged, discriminated members
            models = [
                a for a in members if isinstance(a, type) and issubclass(a, BaseModel)
            ]
            annotation = models[0] if models else annotation
            if not models:
                break
        else:
            break
    return annotation


def check_duplicate_names(path: Path, raw: dict, collection: str = "workloads") -> None:
    """Two items of `collection` (`runs` in a quarter file) with one name: at the second's line."""
    items = raw.get(collection)
    if not isinstance(items, list):
        return
    what = "run" if collection == "runs" else "workload"
    first: dict[str, int] = {}
    for index, item in enumerate(items):
        name = item.get("name") if isinstance(item, dict) else None
        if isinstance(name, str):
            if name in first:
                raise PlannerError(
                    f"duplicate {what} name {name!r} (first used at {collection}[{first[name]}])",
                    where(path, raw, (collection, index, "name")),
                )
            first[name] = index


def check_references(loaded: LoadedScenario, collection: str = "workloads") -> None:
    """Names that must exist: in the catalog (models, GPUs, providers, offers) and in the file (the workloads a
    placement group names).

    `collection` is the key the workloads sit under in the file (`runs` in a quarter file).
    """
    scenario, catalog = loaded.scenario, loaded.catalog
    providers = set(catalog.providers)
    offer_keys = set(catalog.offers["key"])

    def fail(message: str, loc: tuple) -> None:
        raise PlannerError(message, loaded.where(loc))

    def check_gpu(name: str, loc: tuple) -> None:
        if not catalog.knows_gpu(name):
            fail(
                f"unknown GPU {name!r}{did_you_mean(name, catalog.gpu_names_and_families())}",
                loc,
            )

    def check_provider(name: str, loc: tuple) -> None:
        if name not in providers:
            fail(
                f"unknown provider {name!r}{did_you_mean(name, providers)}; known: {', '.join(sorted(providers))}",
                loc,
            )

    storage_names = set(catalog.storage_table["name"]) | set(
        catalog.storage_table["storage_class"]
    )
    for i, workload in enumerate(scenario.workloads):
        base = (collection, i)
        if isinstance(workload.model, str):
            try:
                catalog.model(workload.model)
            except KeyError as exc:
                fail(str(exc.args[0]), base + ("model",))
        if workload.work and workload.work.reference_gpu:
            check_gpu(workload.work.reference_gpu, base + ("work", "reference_gpu"))
        for placement in ("allow", "forbid"):
            spec = getattr(workload, placement)
            for j, gpu in enumerate(spec.gpus):
                check_gpu(gpu.partition(":")[0], base + (placement, "gpus", j))
            for j, provider in enumerate(spec.providers):
                check_provider(provider, base + (placement, "providers", j))
            for j, storage in enumerate(spec.storage):
                if storage not in storage_names:
                    fail(
                        f"unknown storage {storage!r}{did_you_mean(storage, storage_names)}; "
                        "give a class (local, block, shared_fs, object, network_volume) or a name "
                        "from `planner catalog storage`",
                        base + (placement, "storage", j),
                    )
        if workload.data.location:
            check_provider(
                workload.data.location.split("/")[0], base + ("data", "location")
            )
    names = {w.name for w in scenario.workloads}
    for kind in ("same_region", "same_provider"):
        for g, group in enumerate(getattr(scenario.constraints, kind)):
            for k, name in enumerate(group):
                if name not in names:
                    what = "run" if collection == "runs" else "workload"
                    fail(
                        f"unknown {what} {name!r}{did_you_mean(name, names)}",
                        ("constraints", kind, g, k),
                    )
    for key in scenario.constraints.gpu_quotas:
        provider, _, gpu = key.partition("/")
        check_provider(provider, ("constraints", "gpu_quotas", key))
        if gpu:
            check_gpu(gpu, ("constraints", "gpu_quotas", key))
    for key in scenario.constraints.node_limits:
        if key not in offer_keys:
            fail(
                f"unknown offer {key!r}{did_you_mean(key, offer_keys)}; expected provider/region/instance_type",
                ("constraints", "node_limits", key),
            )
    for i, override in enumerate(scenario.overrides):
        if override.provider:
            check_provider(override.provider, ("overrides", i, "provider"))
        if override.gpu:
            check_gpu(override.gpu, ("overrides", i, "gpu"))
    offers = catalog.offers.set_index("key")
    for i, option in enumerate(getattr(scenario, "purchase_options", ())):
        if option.offer not in offer_keys:
            fail(
                f"unknown offer {option.offer!r}{did_you_mean(option.offer, offer_keys)}; expected "
                "provider/region/instance_type",
                ("purchase_options", i, "offer"),
            )
        if getattr(option, "discount", None) is not None and pd.isna(
            offers.at[option.offer, "on_demand_usd_h"]
        ):
            fail(
                f"{option.offer} has no on-demand price to take a discount off; give price_per_node_h",
                ("purchase_options", i, "discount"),
            )


__all__ = [
    "LoadedScenario",
    "load_scenario",
    "validate_model",
    "validation_problem",
    "key_path",
]
