"""A Hugging Face `config.json` to a `ModelArch`: the shape, and parameters counted from it.

    arch_from_config(config, name)   the config (a dict) -> ModelArch
    load_config_file(path)           a local config.json (or a model directory holding one) -> dict

Each architecture's keys, defaults and parameter count are in `hf_architectures`; fetching a
config from the Hub by id is in `hf_fetch`. All errors are ValueError with a one-line message.
"""

from __future__ import annotations

from pathlib import Path

from planner.errors import PlannerError
from planner.load.hf_architectures import (
    Reader,
    deepseek_v3,
    falcon,
    gemma3,
    gpt2,
    llama_like,
    mixtral,
    qwen3_moe,
)
from planner.load.yaml import parse_json, read_capped
from planner.schema.catalog import ModelArch

SUPPORTED = (
    "deepseek_v3",
    "falcon",
    "gemma2",
    "gemma3",
    "gemma3_text",
    "gpt2",
    "llama",
    "mistral",
    "mixtral",
    "phi3",
    "qwen2",
    "qwen3",
    "qwen3_moe",
)

# an old config without model_type still names its class
_ARCHITECTURES = {
    "LlamaForCausalLM": "llama",
    "MistralForCausalLM": "mistral",
    "MixtralForCausalLM": "mixtral",
    "Qwen2ForCausalLM": "qwen2",
    "Qwen3ForCausalLM": "qwen3",
    "Qwen3MoeForCausalLM": "qwen3_moe",
    "Gemma2ForCausalLM": "gemma2",
    "Gemma3ForConditionalGeneration": "gemma3",
    "Gemma3ForCausalLM": "gemma3_text",
    "Phi3ForCausalLM": "phi3",
    "GPT2LMHeadModel": "gpt2",
    "DeepseekV3ForCausalLM": "deepseek_v3",
    "FalconForCausalLM": "falcon",
}


# ---------------------------------------------------------------- public functions


def arch_from_config(
    config: dict, name: str, *, hf_repo: str = "", source: str = ""
) -> ModelArch:
    """A Hugging Face config.json (as a dict) to a ModelArch named `name`.

    `hf_repo` (the Hub id it came from, if any) is kept on the ModelArch; `source` replaces the
    generated description of where the numbers came from."""
    if not isinstance(config, dict):
        raise ValueError(
            f"HF config for {name!r} must be a JSON object, not {type(config).__name__}"
        )
    model_type = config.get("model_type")
    if model_type is None:
        archs = config.get("architectures") or []
        model_type = next(
            (_ARCHITECTURES[a] for a in archs if a in _ARCHITECTURES), None
        )
        if model_type is None:
            raise ValueError(f"HF config for {name!r} is missing 'model_type'")
    if model_type not in SUPPORTED:
        raise ValueError(
            f"HF config for {name!r}: model_type {model_type!r} is not supported "
            f"(supported: {', '.join(SUPPORTED)})"
        )
    r = Reader(config, name, model_type)
    if model_type in (
        "llama",
        "mistral",
        "qwen2",
        "qwen3",
        "phi3",
        "gemma2",
        "gemma3_text",
    ):
        fields, note = llama_like(r, model_type)
    elif model_type == "gemma3":
        fields, note = gemma3(config, name)
    elif model_type == "mixtral":
        fields, note = mixtral(r)
    elif model_type == "qwen3_moe":
        fields, note = qwen3_moe(r)
    elif model_type == "deepseek_v3":
        fields, note = deepseek_v3(r)
    elif model_type == "gpt2":
        fields, note = gpt2(r)
    else:
        fields, note = falcon(r)
    if "experts" in fields:
        note = ", ".join(
            filter(None, [note, "active = params less the unused routed experts"])
        )
    if not source:
        where = hf_repo or "a local file"
        source = (
            f"HF config.json ({where}, model_type {model_type}); params computed from the config "
            f"by planner.hf_config" + (f"; note: {note}" if note else "")
        )
    try:
        return ModelArch(name=name, hf_repo=hf_repo, source=source, **fields)
    except (
        ValueError
    ) as exc:  # pydantic: a shape the model rejects (e.g. experts_per_token > experts)
        errors = getattr(exc, "errors", lambda: [])()
        detail = errors[0].get("msg", str(exc)) if errors else str(exc).splitlines()[0]
        raise ValueError(
            f"HF config for {name!r} (model_type {model_type}) gives an invalid shape: "
            f"{detail}"
        ) from None


def load_config_file(path: Path) -> dict:
    """Read a config.json (or the config.json inside a model directory) into a dict."""
    p = Path(path).expanduser()
    if p.is_dir():
        p = p / "config.json"
    if not p.exists():
        raise ValueError(f"HF config file {p} not found")
    try:
        # capped: /dev/zero would never end
        text = read_capped(p, "config.json").decode("utf-8")
    except PlannerError as exc:
        raise ValueError(f"HF config file {p}: {exc.message}") from None
    except UnicodeDecodeError:
        raise ValueError(
            f"HF config file {p} is not UTF-8 text (is it a config.json?)"
        ) from None
    try:
        data = parse_json(text, p, "config.json")
    except PlannerError as exc:
        raise ValueError(f"HF config file {exc.where}: {exc.message}") from None
    if not isinstance(data, dict):
        raise ValueError(
            f"HF config file {p} holds a JSON {type(data).__name__}, not an object"
        ) from None
    return data
