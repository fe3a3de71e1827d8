"""planner.hf_config: Hugging Face config.json -> ModelArch, checked against catalogs/models.csv.

No network: the shipped configs are in tests/data/hf/ (see its README.md for where each came
from) and huggingface_hub is replaced by a stand-in module."""

from __future__ import annotations

import json
import sys
import time
import types
from pathlib import Path

import pytest

from planner.load.catalog import load_models
from planner.load.hf_config import SUPPORTED, arch_from_config, load_config_file
from planner.load.hf_fetch import fetch_config, looks_like_hf_id
from planner.schema.catalog import ModelArch

DATA = Path(__file__).resolve().parent / "data" / "hf"
CATALOG = load_models()

# catalog name -> Hub id (file tests/data/hf/<org>__<name>.json)
SHIPPED = {
    "llama-3.1-8b": "meta-llama/Llama-3.1-8B",
    "mixtral-8x7b": "mistralai/Mixtral-8x7B-v0.1",
    "qwen3-30b-a3b": "Qwen/Qwen3-30B-A3B",
    "deepseek-v3": "deepseek-ai/DeepSeek-V3",
    "gemma-2-9b": "google/gemma-2-9b",
    "gpt2": "openai-community/gpt2",
    "qwen2.5-7b": "Qwen/Qwen2.5-7B",
    "qwen3-8b": "Qwen/Qwen3-8B",
}

# Fields where the catalog row deliberately differs from what config.json says.
KNOWN_DIFFERENCES = {
    # the catalog takes the paper's 128K context; config.json says 163840 (YaRN factor 40 x 4096)
    "deepseek-v3": {"max_context": (163840, 131072)},
}


def shipped(hub_id: str) -> dict:
    return load_config_file(DATA / (hub_id.replace("/", "__") + ".json"))


def fields(arch: ModelArch) -> dict:
    return {k: v for k, v in arch.model_dump().items() if k != "source"}


def differences(got: ModelArch, want: ModelArch) -> dict:
    a, b = fields(got), fields(want)
    return {k: (a[k], b[k]) for k in a if a[k] != b[k]}


def one_line(exc: pytest.ExceptionInfo) -> str:
    text = str(exc.value)
    assert "\n" not in text and text.strip() == text and text
    return text


# ---------------------------------------------------------------- the shipped configs


@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_shipped_config_matches_catalog_row(name):
    arch = arch_from_config(shipped(SHIPPED[name]), name, hf_repo=SHIPPED[name])
    row = CATALOG[name]
    assert row.hf_repo == SHIPPED[name]
    assert differences(arch, row) == KNOWN_DIFFERENCES.get(name, {})
    # exact: the catalog row was computed from the same config with the same counting rules
    assert arch.params == row.params
    assert abs(arch.params - row.params) <= 0.005 * row.params
    assert arch.active_params == row.active_params


def test_published_parameter_counts():
    """The figures the brief and the model cards give."""
    llama = arch_from_config(shipped("meta-llama/Llama-3.1-8B"), "llama-3.1-8b")
    assert llama.params == 8_030_261_248
    gpt2 = arch_from_config(shipped("openai-community/gpt2"), "gpt2")
    assert gpt2.params == 124_439_808
    assert (gpt2.ffn, gpt2.head_dim, gpt2.max_context, gpt2.tied_embeddings) == (
        3072,
        64,
        1024,
        True,
    )
    mixtral = arch_from_config(shipped("mistralai/Mixtral-8x7B-v0.1"), "mixtral-8x7b")
    assert mixtral.params == 46_702_792_704
    assert mixtral.expert_params == 32 * 8 * 3 * 4096 * 14336 == 45_097_156_608
    assert mixtral.active_params == 12_879_925_248  # "12.9B active"
    assert (mixtral.experts, mixtral.experts_per_token, mixtral.ffn) == (8, 2, 14336)


def test_qwen3_moe_counts():
    q = arch_from_config(shipped("Qwen/Qwen3-30B-A3B"), "qwen3-30b-a3b")
    assert q.expert_params == 48 * 128 * 3 * 2048 * 768
    assert (q.experts, q.experts_per_token, q.ffn, q.head_dim, q.kv_heads) == (
        128,
        8,
        768,
        128,
        4,
    )
    assert round(q.params / 1e9, 1) == 30.5  # model card: 30.5B total, 3.3B active
    # 3.35B: the catalog counts both embedding matrices as active
    assert abs(q.active_params - 3.3e9) < 0.1e9


def test_qwen3_moe_dense_layers():
    """mlp_only_layers and decoder_sparse_step make some layers dense (intermediate_size 6144)."""
    base = shipped("Qwen/Qwen3-30B-A3B")
    moe_layer = 128 * 2048 + 128 * 3 * 2048 * 768  # router + experts
    dense_layer = 3 * 2048 * 6144
    full = arch_from_config(base, "q")
    one_dense = arch_from_config(dict(base, mlp_only_layers=[0]), "q")
    assert one_dense.params == full.params - moe_layer + dense_layer
    assert one_dense.expert_params == 47 * 128 * 3 * 2048 * 768
    every_other = arch_from_config(dict(base, decoder_sparse_step=2), "q")
    assert every_other.expert_params == 24 * 128 * 3 * 2048 * 768
    assert every_other.params == full.params - 24 * (moe_layer - dense_layer)
    dense = arch_from_config(dict(base, num_experts=0), "q")
    assert (
        dense.experts is None
        and dense.ffn == 6144
        and dense.active_params == dense.params
    )


def test_deepseek_v3_mla_and_moe():
    d = arch_from_config(shipped("deepseek-ai/DeepSeek-V3"), "deepseek-v3")
    # kv_lora_rank + qk_rope_head_dim cached
    assert 2 * d.kv_heads * d.head_dim == 512 + 64
    assert (d.heads, d.kv_heads, d.head_dim, d.ffn, d.layers) == (128, 1, 288, 2048, 61)
    assert d.expert_params == 58 * 256 * 3 * 7168 * 2048
    # paper: 671B / 37B
    assert round(d.params / 1e9) == 671 and round(d.active_params / 1e9) == 38
    # what config.json says (the catalog row keeps 131072)
    assert d.max_context == 163840
    assert "MTP module not counted" in d.source


def test_deepseek_without_q_lora():
    """q_lora_rank null (DeepSeek-V2-Lite style): one q_proj hidden x heads*(nope+rope)."""
    cfg = shipped("deepseek-ai/DeepSeek-V3")
    with_lora = arch_from_config(cfg, "d")
    without = arch_from_config(dict(cfg, q_lora_rank=None), "d")
    per_layer_lora = 7168 * 1536 + 1536 + 1536 * 128 * 192
    assert without.params - with_lora.params == 61 * (7168 * 128 * 192 - per_layer_lora)


def test_source_and_repo():
    arch = arch_from_config(
        shipped("openai-community/gpt2"), "gpt2", hf_repo="openai-community/gpt2"
    )
    assert arch.hf_repo == "openai-community/gpt2"
    assert "openai-community/gpt2" in arch.source and "model_type gpt2" in arch.source
    local = arch_from_config(shipped("openai-community/gpt2"), "mine")
    assert local.hf_repo == "" and "a local file" in local.source
    given = arch_from_config(
        shipped("openai-community/gpt2"), "mine", source="my notes"
    )
    assert given.source == "my notes"


# ---------------------------------------------------------------- other architectures
# Configs written inline from the shape keys of the published config.json files (as quoted in
# the catalog rows' sources); the counts must reproduce the catalog rows.


def _llama_shape(model_type, vocab, hidden, layers, heads, kv, ffn, ctx, tied, **extra):
    return dict(
        model_type=model_type,
        vocab_size=vocab,
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv,
        intermediate_size=ffn,
        max_position_embeddings=ctx,
        tie_word_embeddings=tied,
        **extra,
    )


GEMMA3_VISION = dict(
    hidden_size=1152,
    image_size=896,
    intermediate_size=4304,
    model_type="siglip_vision_model",
    num_attention_heads=16,
    num_hidden_layers=27,
    patch_size=14,
    vision_use_head=False,
)

INLINE = {
    "mistral-7b": _llama_shape(
        "mistral", 32000, 4096, 32, 32, 8, 14336, 32768, False, sliding_window=4096
    ),
    "mistral-small-24b": _llama_shape(
        "mistral", 131072, 5120, 40, 32, 8, 32768, 32768, False, head_dim=128
    ),
    "phi-4": _llama_shape("phi3", 100352, 5120, 40, 40, 10, 17920, 16384, False),
    "llama-3.2-1b": _llama_shape(
        "llama", 128256, 2048, 16, 32, 8, 8192, 131072, True, head_dim=64
    ),
    "llama-2-7b": _llama_shape("llama", 32000, 4096, 32, 32, 32, 11008, 4096, False),
    "qwen3-32b": _llama_shape(
        "qwen3", 151936, 5120, 64, 64, 8, 25600, 40960, False, head_dim=128
    ),
    # Gemma2Config: tie_word_embeddings defaults to true (the published configs leave it out)
    "gemma-2-27b": {
        k: v
        for k, v in _llama_shape(
            "gemma2", 256000, 4608, 46, 32, 16, 36864, 8192, True, head_dim=128
        ).items()
        if k != "tie_word_embeddings"
    },
    "gemma-3-27b": dict(
        model_type="gemma3",
        architectures=["Gemma3ForConditionalGeneration"],
        text_config=dict(
            head_dim=128,
            hidden_size=5376,
            intermediate_size=21504,
            model_type="gemma3_text",
            num_attention_heads=32,
            num_hidden_layers=62,
            num_key_value_heads=16,
            query_pre_attn_scalar=168,
            sliding_window=1024,
        ),
        vision_config=GEMMA3_VISION,
    ),
    "gemma-3-12b": dict(
        model_type="gemma3",
        text_config=dict(
            hidden_size=3840,
            intermediate_size=15360,
            model_type="gemma3_text",
            num_attention_heads=16,
            num_hidden_layers=48,
            num_key_value_heads=8,
        ),
        vision_config=GEMMA3_VISION,
    ),
    "falcon-40b": dict(
        model_type="falcon",
        architectures=["FalconForCausalLM"],
        alibi=False,
        bias=False,
        hidden_size=8192,
        new_decoder_architecture=True,
        num_attention_heads=128,
        num_hidden_layers=60,
        num_kv_heads=8,
        parallel_attn=True,
        vocab_size=65024,
    ),
    "gpt2-xl": dict(
        model_type="gpt2",
        n_embd=1600,
        n_head=25,
        n_layer=48,
        n_positions=1024,
        vocab_size=50257,
    ),
}


@pytest.mark.parametrize("name", sorted(INLINE))
def test_inline_config_matches_catalog_row(name):
    row = CATALOG[name]
    arch = arch_from_config(INLINE[name], name, hf_repo=row.hf_repo)
    assert differences(arch, row) == {}


def test_gemma3_text_only():
    cfg = {k: v for k, v in INLINE["gemma-3-27b"].items() if k != "vision_config"}
    arch = arch_from_config(cfg, "g")
    # "text decoder alone" in the catalog row's source
    assert arch.params == 27_009_346_304
    assert "text decoder only" in arch.source


def test_falcon_7b_older_layout():
    """multi_query, parallel attention with one LayerNorm: the well-known 6,921,720,704."""
    cfg = dict(
        model_type="falcon",
        hidden_size=4544,
        num_hidden_layers=32,
        num_attention_heads=71,
        multi_query=True,
        parallel_attn=True,
        bias=False,
        new_decoder_architecture=False,
        vocab_size=65024,
    )
    arch = arch_from_config(cfg, "falcon-7b")
    assert arch.params == 6_921_720_704
    assert (arch.kv_heads, arch.head_dim, arch.ffn, arch.max_context) == (
        1,
        64,
        4 * 4544,
        2048,
    )


def test_llama_biases():
    cfg = INLINE["llama-2-7b"]
    plain = arch_from_config(cfg, "l").params
    attn = arch_from_config(dict(cfg, attention_bias=True), "l").params
    mlp = arch_from_config(dict(cfg, mlp_bias=True), "l").params
    # q, k, v (32 KV heads x 128) and o
    assert attn - plain == 32 * (4096 + 2 * 4096 + 4096)
    assert mlp - plain == 32 * (2 * 11008 + 4096)


def test_defaults_where_configs_are_silent():
    llama = {
        k: v
        for k, v in INLINE["llama-2-7b"].items()
        if k
        not in ("num_key_value_heads", "max_position_embeddings", "tie_word_embeddings")
    }
    arch = arch_from_config(llama, "l")
    assert (
        arch.kv_heads == 32
        and arch.max_context is None
        and arch.tied_embeddings is False
    )
    gpt = dict(INLINE["gpt2-xl"], n_inner=None)
    assert arch_from_config(gpt, "g").ffn == 6400
    assert arch_from_config(dict(gpt, n_inner=4096), "g").ffn == 4096


def test_model_type_from_architectures():
    cfg = {
        k: v for k, v in shipped("meta-llama/Llama-3.1-8B").items() if k != "model_type"
    }
    assert arch_from_config(cfg, "l").params == 8_030_261_248


# ---------------------------------------------------------------- bad configs


def test_unknown_model_type():
    with pytest.raises(ValueError) as exc:
        arch_from_config({"model_type": "bert", "hidden_size": 768}, "b")
    text = one_line(exc)
    assert (
        "'bert'" in text and "supported" in text and all(t in text for t in SUPPORTED)
    )


@pytest.mark.parametrize(
    "hub_id, key",
    [
        ("meta-llama/Llama-3.1-8B", "hidden_size"),
        ("meta-llama/Llama-3.1-8B", "vocab_size"),
        ("mistralai/Mixtral-8x7B-v0.1", "num_local_experts"),
        ("mistralai/Mixtral-8x7B-v0.1", "num_key_value_heads"),
        ("Qwen/Qwen3-30B-A3B", "moe_intermediate_size"),
        ("deepseek-ai/DeepSeek-V3", "kv_lora_rank"),
        ("openai-community/gpt2", "n_embd"),
        ("google/gemma-2-9b", "intermediate_size"),
    ],
)
def test_missing_key(hub_id, key):
    cfg = {k: v for k, v in shipped(hub_id).items() if k != key}
    with pytest.raises(ValueError) as exc:
        arch_from_config(cfg, "m")
    text = one_line(exc)
    assert f"missing '{key}'" in text and "'m'" in text


def test_missing_model_type_and_text_config():
    with pytest.raises(ValueError) as exc:
        arch_from_config({"hidden_size": 8}, "m")
    assert "missing 'model_type'" in one_line(exc)
    with pytest.raises(ValueError) as exc:
        arch_from_config({"model_type": "gemma3"}, "m")
    assert "missing 'text_config'" in one_line(exc)
    cfg = dict(
        INLINE["gemma-3-27b"],
        text_config={"hidden_size": 5376, "num_hidden_layers": 62},
    )
    with pytest.raises(ValueError) as exc:
        arch_from_config(cfg, "m")
    assert "missing 'text_config.intermediate_size'" in one_line(exc)


@pytest.mark.parametrize("value", ["4096", -1, 0, 40.5, True, [4096]])
def test_bad_values(value):
    cfg = dict(shipped("meta-llama/Llama-3.1-8B"), hidden_size=value)
    with pytest.raises(ValueError) as exc:
        arch_from_config(cfg, "m")
    assert "'hidden_size' must be a positive integer" in one_line(exc)


@pytest.mark.parametrize(
    "repo, key, value, words",
    [
        (
            "Qwen/Qwen3-30B-A3B",
            "num_hidden_layers",
            10**15,
            "no model is that large",
        ),  # looped over per layer: hung
        (
            "Qwen/Qwen3-30B-A3B",
            "vocab_size",
            1e308,
            "no model is that large",
        ),  # overflowed float() in the count
        ("meta-llama/Llama-3.1-8B", "hidden_size", 10**8, "at most 10,000,000"),
        (
            "meta-llama/Llama-3.1-8B",
            "num_hidden_layers",
            10**6,
            "invalid shape",
        ),  # the shape's own bound on layers
    ],
)
def test_absurdly_large_values(repo, key, value, words):
    with pytest.raises(ValueError) as exc:
        arch_from_config(dict(shipped(repo), **{key: value}), "m")
    assert words in one_line(exc)


def test_bad_flag_and_shape():
    with pytest.raises(ValueError) as exc:
        arch_from_config(
            dict(shipped("meta-llama/Llama-3.1-8B"), tie_word_embeddings="no"), "m"
        )
    assert "'tie_word_embeddings' must be true or false" in one_line(exc)
    with pytest.raises(ValueError) as exc:
        arch_from_config(
            dict(shipped("mistralai/Mixtral-8x7B-v0.1"), num_experts_per_tok=9), "m"
        )
    assert "invalid shape" in one_line(exc)
    with pytest.raises(ValueError) as exc:
        arch_from_config(["not", "a", "dict"], "m")
    assert "JSON object" in one_line(exc)


# ---------------------------------------------------------------- files


def test_load_config_file(tmp_path):
    assert load_config_file(DATA / "openai-community__gpt2.json")["n_embd"] == 768
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "gpt2"}))
    assert load_config_file(tmp_path) == {"model_type": "gpt2"}  # a model directory


@pytest.mark.parametrize(
    "content, words",
    [
        (None, "not found"),
        ('{"model_type": "llama",', "not valid JSON"),
        ("[1, 2]", "holds a JSON list, not an object"),
        (b"\xff\xfe\x00garbage", "not UTF-8"),
    ],
)
def test_load_config_file_errors(tmp_path, content, words):
    path = tmp_path / "config.json"
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif content is not None:
        path.write_text(content)
    with pytest.raises(ValueError) as exc:
        load_config_file(path)
    text = one_line(exc)
    assert words in text and str(path) in text


def test_looks_like_hf_id():
    for good in (
        "meta-llama/Llama-3.1-8B",
        "Qwen/Qwen3-30B-A3B",
        "openai-community/gpt2",
        "a/b",
        "x_y/z.v1",
    ):
        assert looks_like_hf_id(good), good
    for bad in (
        "gpt2",
        "llama-3.1-8b",
        "a/b/c",
        "/abs/path",
        "./x/y",
        "org/",
        "/name",
        "org/name.json",
        "configs/model.yaml",
        "org--x/name",
        "org/na..me",
        "org/-name",
        "org name/x",
        "",
        "o/" + "n" * 95,
    ):
        assert not looks_like_hf_id(bad), bad


# ---------------------------------------------------------------- fetching (no network)


def _fake_hub(monkeypatch, download):
    """Install a stand-in huggingface_hub whose exceptions carry the real class names."""
    module = types.ModuleType("huggingface_hub")
    module.hf_hub_download = download
    monkeypatch.setitem(sys.modules, "huggingface_hub", module)
    return module


class HfHubHTTPError(OSError):
    pass


class RepositoryNotFoundError(HfHubHTTPError):
    pass


class GatedRepoError(RepositoryNotFoundError):
    pass


class RevisionNotFoundError(HfHubHTTPError):
    pass


class EntryNotFoundError(HfHubHTTPError):
    pass


class LocalEntryNotFoundError(EntryNotFoundError, FileNotFoundError):
    pass


class ConnectionError(OSError):  # the name requests and httpx use   # noqa: A001
    pass


@pytest.fixture
def online(monkeypatch):
    from planner.load import hf_fetch

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(hf_fetch, "_hub_reachable", lambda: True)


def test_an_unreachable_hub_reads_the_cache_at_once(monkeypatch):
    """No network and no HF_HUB_OFFLINE: the cache alone, without huggingface_hub's half a minute of retries."""
    from planner.load import hf_fetch

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    # the discard port: nothing listens
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    started = time.perf_counter()
    assert not hf_fetch._hub_reachable()
    assert time.perf_counter() - started < hf_fetch.HUB_PROBE_S + 1
    seen = {}

    def download(repo_id, filename, **kwargs):
        seen.update(kwargs)
        raise LocalEntryNotFoundError(
            "Cannot find the requested files in the disk cache"
        )

    _fake_hub(monkeypatch, download)
    with pytest.raises(ValueError) as exc:
        fetch_config("meta-llama/Llama-3.1-8B")
    assert seen.get("local_files_only") is True and "could not be reached" in one_line(
        exc
    )


def test_fetch_without_huggingface_hub(monkeypatch, online):
    monkeypatch.setitem(sys.modules, "huggingface_hub", None)  # import fails
    with pytest.raises(ValueError) as exc:
        fetch_config("meta-llama/Llama-3.1-8B")
    text = one_line(exc)
    assert (
        "pip install huggingface_hub" in text
        and "hf_config" in text
        and "meta-llama/Llama-3.1-8B" in text
    )


def test_fetch_reads_the_downloaded_file(monkeypatch, online):
    calls = []

    def download(repo_id, filename, **kwargs):
        calls.append((repo_id, filename, kwargs))
        return str(DATA / "openai-community__gpt2.json")

    _fake_hub(monkeypatch, download)
    assert fetch_config("openai-community/gpt2", revision="main")["n_layer"] == 12
    assert calls == [("openai-community/gpt2", "config.json", {"revision": "main"})]


def test_fetch_offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    seen = {}

    def download(repo_id, filename, **kwargs):
        seen.update(kwargs)
        raise LocalEntryNotFoundError(
            "Cannot find the requested files in the disk cache and outgoing "
            "traffic has been disabled.\nTo enable hf.co look-ups, set HF_HUB_OFFLINE=0."
        )

    _fake_hub(monkeypatch, download)
    with pytest.raises(ValueError) as exc:
        fetch_config("meta-llama/Llama-3.1-8B")
    text = one_line(exc)
    assert seen.get("local_files_only") is True
    assert (
        "could not fetch" in text and "HF_HUB_OFFLINE" in text and "hf_config" in text
    )


@pytest.mark.parametrize(
    "error, words",
    [
        (GatedRepoError("403 Client Error.\nCannot access gated repo"), "gated"),
        (
            RepositoryNotFoundError("404 Client Error.\nRepository Not Found"),
            "no such repository",
        ),
        (RevisionNotFoundError("404 revision"), "revision 'v9' not found"),
        (EntryNotFoundError("404 entry"), "no config.json"),
        (
            LocalEntryNotFoundError(
                "An error happened while trying to locate the file on the Hub"
            ),
            "could not be reached",
        ),
        (
            ConnectionError(
                "Max retries exceeded with url\n(Caused by NameResolutionError)"
            ),
            "could not be reached",
        ),
        (HfHubHTTPError("500 Server Error"), "answered with an error"),
    ],
)
def test_fetch_failures(monkeypatch, online, error, words):
    def download(repo_id, filename, **kwargs):
        raise error

    _fake_hub(monkeypatch, download)
    with pytest.raises(ValueError) as exc:
        fetch_config("meta-llama/Llama-3.1-8B", revision="v9")
    text = one_line(exc)
    assert words in text and "'meta-llama/Llama-3.1-8B'" in text and "hf_config" in text


def test_fetch_lets_bugs_through(monkeypatch, online):
    def download(repo_id, filename, **kwargs):
        raise TypeError("unexpected keyword")

    _fake_hub(monkeypatch, download)
    with pytest.raises(TypeError):
        fetch_config("meta-llama/Llama-3.1-8B")


def test_fetch_rejects_non_ids():
    with pytest.raises(ValueError) as exc:
        fetch_config("llama-3.1-8b")
    assert "not a Hugging Face model id" in one_line(exc)


def test_fetch_with_real_huggingface_hub(monkeypatch, online):
    """Only where huggingface_hub is installed: its own exception, through a patched download."""
    hub = pytest.importorskip("huggingface_hub")
    from huggingface_hub.utils import LocalEntryNotFoundError as RealLocalEntryNotFound

    def download(repo_id, filename, **kwargs):
        raise RealLocalEntryNotFound(
            "Connection error, and we cannot find the requested files in the cache."
        )

    monkeypatch.setattr(hub, "hf_hub_download", download)
    with pytest.raises(ValueError) as exc:
        fetch_config("meta-llama/Llama-3.1-8B")
    assert "could not be reached" in one_line(exc)
    monkeypatch.setattr(
        hub,
        "hf_hub_download",
        lambda *a, **k: str(DATA / "openai-community__gpt2.json"),
    )
    assert fetch_config("openai-community/gpt2")["vocab_size"] == 50257


@pytest.mark.parametrize(
    "repo_id, name",
    [
        ("meta-llama/Llama-3.1-8B-Instruct", "llama-3.1-8b"),
        ("google/gemma-2-9b-it", "gemma-2-9b"),
        ("meta-llama/Llama-2-7b-chat-hf", "llama-2-7b"),
        ("Qwen/Qwen2.5-7B-Instruct", "qwen2.5-7b"),
        ("google/gemma-3-12b-it", "gemma-3-12b"),
        ("mistralai/Mistral-Small-24B-Instruct-2501", "mistral-small-24b"),
        ("meta-llama/Meta-Llama-3-70B-Instruct", "llama-3-70b"),
    ],
)
def test_a_tuned_variants_id_is_its_base_models_shape(repo_id, name):
    """The id people copy from a model card (-Instruct, -chat, -it) is the catalog's base row: the same shape."""
    from planner.load.catalog import load_catalog

    assert load_catalog(["aws"]).model(repo_id).name == name


def test_another_version_is_not_taken_for_the_catalogs():
    from planner.load.catalog import load_catalog

    with pytest.raises(KeyError):
        # the catalog has v0.1
        load_catalog(["aws"]).model("mistralai/Mistral-7B-Instruct-v0.2")


def test_a_scenario_naming_an_instruct_id_plans_without_the_hub(
    run, tmp_path, monkeypatch
):
    monkeypatch.setitem(sys.modules, "huggingface_hub", None)  # any fetch would fail
    path = tmp_path / "instruct.yaml"
    path.write_text(
        "name: i\ncatalogs: [aws]\nworkloads:\n  - name: tune\n    kind: fine_tuning\n"
        "    model: meta-llama/Llama-3.1-8B-Instruct\n    method: lora\n    work: {tokens: 10M}\n"
    )
    result = run("validate", path)
    assert result.exit_code == 0, result.stderr
