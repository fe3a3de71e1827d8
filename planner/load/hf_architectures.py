"""How each supported architecture's `config.json` becomes a model shape: the keys it reads,
the defaults its transformers config class supplies, and its parameters counted.

Split from `hf_config` so that the per-architecture counting rules, the bulk of the code, sit
apart from the file reading and the dispatch on `model_type`.

Parameters are counted from the shape with the rules of tools/build_catalogs.py
(`decoder_params`, copied below), so a config gives the same count as the catalog row built
from it. Every weight matrix, bias and norm vector the architecture's transformers (or
remote-code) implementation creates is counted; buffers (rotary tables, causal masks) are not.
Where a published config leaves a key out, the architecture's transformers config class
supplies the value; such defaults are used only where written below, any other missing shape
key is an error. All errors are ValueError with a one-line message.
"""

from __future__ import annotations

from planner.schema.fields import MAX_WIDTH

# ---------------------------------------------------------------- counting rules


def decoder_params(
    vocab,
    hidden,
    layers,
    heads,
    kv_heads,
    head_dim,
    ffn,
    tied,
    *,
    qkv_bias=False,
    qk_norm=False,
    norms_per_layer=2,
    extra=0,
):
    """Parameter count of a Llama-style decoder from its HF config.json: embedding V*h (twice unless
    tie_word_embeddings), per layer q/k/v/o (GQA widths), gate/up/down 3*h*ffn and the norms, final norm.
    tools/build_catalogs.py counts the shipped models' parameters with it too."""
    attn = (
        hidden * heads * head_dim
        + 2 * hidden * kv_heads * head_dim
        + heads * head_dim * hidden
    )
    attn += (heads * head_dim + 2 * kv_heads * head_dim if qkv_bias else 0) + (
        2 * head_dim if qk_norm else 0
    )
    per_layer = attn + 3 * hidden * ffn + norms_per_layer * hidden
    return vocab * hidden * (1 if tied else 2) + layers * per_layer + hidden + extra


def siglip_params(d=1152, layers=27, ffn=4304, patch=14, image=896):
    """A SigLIP vision tower (Gemma 3's vision_config; biases included, no pooling head)."""
    embed = 3 * patch * patch * d + d + (image // patch) ** 2 * d
    layer = 4 * (d * d + d) + (d * ffn + ffn) + (ffn * d + d) + 4 * d
    return embed + layers * layer + 2 * d


def moe_active(params, experts, per_token, expert_params):
    """Active = all parameters but the routed experts a token does not use (the catalog's rule:
    embeddings, attention, routers and shared experts all count as active)."""
    return params - expert_params * (experts - per_token) // experts


# ---------------------------------------------------------------- reading keys


class Reader:
    """Typed look-ups in one config dict, with one-line errors naming the key."""

    def __init__(self, config: dict, name: str, model_type: str, prefix: str = ""):
        self.config, self.name, self.model_type, self.prefix = (
            config,
            name,
            model_type,
            prefix,
        )

    def _key(self, key: str) -> str:
        return repr(self.prefix + key)

    def _where(self) -> str:
        return f"HF config for {self.name!r} (model_type {self.model_type})"

    def _value(self, keys: tuple[str, ...]):
        for key in keys:
            if self.config.get(key) is not None:
                return key, self.config[key]
        return keys[0], None

    def integer(
        self, *keys: str, default: int | None = None, positive: bool = True
    ) -> int:
        key, value = self._value(keys)
        if value is None:
            if default is not None:
                return default
            raise ValueError(f"{self._where()} is missing {self._key(key)}")
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if (
            isinstance(value, bool)
            or not isinstance(value, int)
            or value < (1 if positive else 0)
        ):
            need = "a positive integer" if positive else "a non-negative integer"
            raise ValueError(
                f"{self._where()}: {self._key(key)} must be {need}, not {value!r}"
            )
        if (
            value > MAX_WIDTH
        ):  # the shape's bound (a layer count has its own, checked with the shape)
            raise ValueError(
                f"{self._where()}: {self._key(key)} is {value:,}; no model is that large "
                f"(at most {MAX_WIDTH:,})"
            )
        return value

    def optional(self, *keys: str, positive: bool = True) -> int | None:
        key, value = self._value(keys)
        return None if value is None else self.integer(key, positive=positive)

    def flag(self, key: str, default: bool) -> bool:
        value = self.config.get(key)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise ValueError(
                f"{self._where()}: {self._key(key)} must be true or false, not {value!r}"
            )
        return value

    def text(self, key: str, default: str) -> str:
        value = self.config.get(key)
        return default if value is None else str(value)

    def layer_list(self, key: str) -> list[int]:
        value = self.config.get(key)
        if value is None:
            return []
        if not isinstance(value, list) or not all(
            isinstance(v, int) and not isinstance(v, bool) for v in value
        ):
            raise ValueError(
                f"{self._where()}: {self._key(key)} must be a list of layer numbers, not {value!r}"
            )
        return value


# ---------------------------------------------------------------- architectures
# Each returns the ModelArch fields (without name, hf_repo, source) and a note for `source`.


def llama_like(r: Reader, model_type: str) -> tuple[dict, str]:
    """Llama, Mistral, Qwen2, Qwen3, Phi-3, Gemma 2 and Gemma 3 text decoders: GQA attention,
    gated MLP (gate/up/down; Phi-3 fuses qkv and gate_up, same counts), RMSNorm."""
    gemma3 = model_type == "gemma3_text"
    hidden = r.integer("hidden_size")
    layers = r.integer("num_hidden_layers")
    ffn = r.integer("intermediate_size")
    if gemma3:
        # Gemma3TextConfig defaults, which Google's published configs rely on (gemma-3-4b-pt's
        # text_config gives only hidden_size, intermediate_size and num_hidden_layers)
        heads = r.integer("num_attention_heads", default=8)
        kv_heads = r.integer("num_key_value_heads", default=4)
        head_dim = r.integer("head_dim", default=256)
        vocab = r.integer("vocab_size", default=262208)
        max_context = r.integer("max_position_embeddings", default=131072)
    else:
        heads = r.integer("num_attention_heads")
        # LlamaConfig and Phi3Config take a missing num_key_value_heads as num_attention_heads;
        # the other classes default it to a fixed number, so it must be given
        kv_heads = r.integer(
            "num_key_value_heads",
            default=heads if model_type in ("llama", "phi3") else None,
        )
        # Gemma2Config's head_dim defaults to 256; the others to hidden_size / num_attention_heads
        head_dim = r.integer(
            "head_dim", default=256 if model_type == "gemma2" else hidden // heads
        )
        vocab = r.integer("vocab_size")
        max_context = r.optional("max_position_embeddings")  # absent: unknown
    tied = r.flag(
        "tie_word_embeddings", default=model_type in ("gemma2", "gemma3_text")
    )

    extra, notes = 0, []
    if model_type == "qwen2":
        # Qwen2Attention: q/k/v carry biases, o_proj none; the config has no key for it
        qkv_bias = True
        notes.append("q/k/v biases")
    elif model_type in ("mistral", "phi3"):
        # MistralAttention and Phi3 have no bias switch: all projections bias-free
        qkv_bias = False
    else:
        # llama, qwen3, gemma2, gemma3: attention_bias puts a bias on q, k, v and o
        qkv_bias = r.flag("attention_bias", default=False)
        if qkv_bias:
            extra += layers * hidden
            notes.append("attention biases")
    if model_type == "llama" and r.flag("mlp_bias", default=False):
        extra += layers * (2 * ffn + hidden)
        notes.append("MLP biases")
    qk_norm = model_type in ("qwen3", "gemma3_text")  # per-head RMSNorm on q and k
    # Gemma 2/3: input, post-attention, pre-feedforward and post-feedforward norms per layer
    norms = 4 if model_type in ("gemma2", "gemma3_text") else 2
    params = decoder_params(
        vocab,
        hidden,
        layers,
        heads,
        kv_heads,
        head_dim,
        ffn,
        tied,
        qkv_bias=qkv_bias,
        qk_norm=qk_norm,
        norms_per_layer=norms,
        extra=extra,
    )
    fields = dict(
        params=params,
        layers=layers,
        hidden=hidden,
        heads=heads,
        kv_heads=kv_heads,
        head_dim=head_dim,
        ffn=ffn,
        vocab=vocab,
        max_context=max_context,
        tied_embeddings=tied,
    )
    return fields, ", ".join(notes)


def gemma3(config: dict, name: str) -> tuple[dict, str]:
    """Gemma 3 (Gemma3ForConditionalGeneration): text decoder in text_config, SigLIP vision tower in
    vision_config, and the projector (mm_input_projection 1152 x hidden + its norm) between them."""
    text = config.get("text_config")
    if not isinstance(text, dict):
        raise ValueError(
            f"HF config for {name!r} (model_type gemma3) is missing 'text_config'"
        )
    if "tie_word_embeddings" not in text and "tie_word_embeddings" in config:
        text = dict(text, tie_word_embeddings=config["tie_word_embeddings"])
    fields, note = llama_like(
        Reader(text, name, "gemma3", prefix="text_config."), "gemma3_text"
    )
    vision = config.get("vision_config")
    if not isinstance(vision, dict):
        return fields, "text decoder only (no vision_config)"
    v = Reader(vision, name, "gemma3", prefix="vision_config.")
    d = v.integer("hidden_size")
    tower = siglip_params(
        d=d,
        layers=v.integer("num_hidden_layers"),
        ffn=v.integer("intermediate_size"),
        patch=v.integer("patch_size"),
        image=v.integer("image_size"),
    )
    projector = d * fields["hidden"] + d
    text_only = fields["params"]
    fields["params"] = text_only + tower + projector
    return fields, (
        f"incl. the SigLIP vision tower and projector ({tower + projector:,}; "
        f"text decoder alone {text_only:,})"
    )


def mixtral(r: Reader) -> tuple[dict, str]:
    """Mixtral: Mistral attention; every layer's MLP is num_local_experts gated experts of
    intermediate_size and a bias-free router (hidden x experts)."""
    fields, _ = llama_like(r, "mistral")
    experts = r.integer("num_local_experts")
    per_token = r.integer("num_experts_per_tok")
    layers, hidden, ffn = fields["layers"], fields["hidden"], fields["ffn"]
    expert_params = layers * experts * 3 * hidden * ffn
    dense_mlp = layers * 3 * hidden * ffn  # counted by llama_like as if one dense MLP
    params = fields["params"] - dense_mlp + layers * experts * hidden + expert_params
    fields.update(
        params=params,
        experts=experts,
        experts_per_token=per_token,
        expert_params=expert_params,
        active_params=moe_active(params, experts, per_token, expert_params),
    )
    return fields, "ffn = one expert's width"


def qwen3_moe(r: Reader) -> tuple[dict, str]:
    """Qwen3-MoE: Qwen3 attention (QK norm); layer i is sparse unless listed in mlp_only_layers
    or (i + 1) is not a multiple of decoder_sparse_step. A sparse layer has num_experts gated experts
    of moe_intermediate_size and a bias-free router; no shared expert. Dense layers use
    intermediate_size."""
    fields, note = llama_like(r, "qwen3")
    layers, hidden = fields["layers"], fields["hidden"]
    experts = r.integer("num_experts", positive=False, default=0)
    step = r.integer("decoder_sparse_step", default=1)
    dense_only = set(r.layer_list("mlp_only_layers"))
    sparse = [
        i
        for i in range(layers)
        if experts > 0 and i not in dense_only and (i + 1) % step == 0
    ]
    if not sparse:
        return fields, note  # no sparse layer: a dense Qwen3
    per_token = r.integer("num_experts_per_tok")
    moe_ffn = r.integer("moe_intermediate_size")
    dense_layers, dense_ffn = layers - len(sparse), fields["ffn"]
    expert_params = len(sparse) * experts * 3 * hidden * moe_ffn
    params = (
        fields["params"]
        - len(sparse) * 3 * hidden * dense_ffn  # sparse layers have no dense MLP
        + len(sparse) * experts * hidden
        + expert_params
    )
    fields.update(
        params=params,
        ffn=moe_ffn,
        experts=experts,
        experts_per_token=per_token,
        expert_params=expert_params,
        active_params=moe_active(params, experts, per_token, expert_params),
    )
    return fields, ", ".join(
        filter(
            None,
            [note, "ffn = one expert's width"]
            + ([f"{dense_layers} dense layers of {dense_ffn}"] if dense_layers else []),
        )
    )


def deepseek_v3(r: Reader) -> tuple[dict, str]:
    """DeepSeek-V3 (remote code modeling_deepseek.py / transformers DeepseekV3):
    MLA attention, the first first_k_dense_replace layers dense (intermediate_size), the others
    (every moe_layer_freq-th) MoE with n_routed_experts routed + n_shared_experts shared experts of
    moe_intermediate_size and a router (hidden x experts, plus an e_score_correction_bias with
    topk_method noaux_tc). The multi-token-prediction module (num_nextn_predict_layers) is not
    counted: it is not part of the main model (the paper's 671B leaves it out)."""
    hidden = r.integer("hidden_size")
    layers = r.integer("num_hidden_layers")
    heads = r.integer("num_attention_heads")
    vocab = r.integer("vocab_size")
    dense_ffn = r.integer("intermediate_size")
    moe_ffn = r.integer("moe_intermediate_size")
    experts = r.integer("n_routed_experts")
    per_token = r.integer("num_experts_per_tok")
    shared = r.integer("n_shared_experts", positive=False, default=0)
    first_dense = r.integer("first_k_dense_replace", positive=False, default=0)
    freq = r.integer("moe_layer_freq", default=1)
    kv_rank = r.integer("kv_lora_rank")
    # null: q_proj is one hidden x heads*q_head_dim matrix
    q_rank = r.optional("q_lora_rank")
    rope = r.integer("qk_rope_head_dim")
    nope = r.integer("qk_nope_head_dim")
    v_dim = r.integer("v_head_dim")
    tied = r.flag("tie_word_embeddings", default=False)
    # biases on q_a/q, kv_a and o projections
    bias = r.flag("attention_bias", default=False)
    q_head = nope + rope
    if q_rank is None:
        q = hidden * heads * q_head
    else:  # q_a_proj, q_a_layernorm, q_b_proj (no bias)
        q = hidden * q_rank + (q_rank if bias else 0) + q_rank + q_rank * heads * q_head
    mla = (
        q
        + hidden * (kv_rank + rope)
        + (kv_rank + rope if bias else 0)  # kv_a_proj_with_mqa
        + kv_rank  # kv_a_layernorm
        + kv_rank * heads * (nope + v_dim)  # kv_b_proj
        + heads * v_dim * hidden
        + (hidden if bias else 0)
    )  # o_proj
    moe_layers = [i for i in range(layers) if i >= first_dense and i % freq == 0]
    dense_layers = layers - len(moe_layers)
    router = experts * hidden + (
        experts if r.text("topk_method", "noaux_tc") == "noaux_tc" else 0
    )
    expert_params = len(moe_layers) * experts * 3 * hidden * moe_ffn
    params = (
        vocab * hidden * (1 if tied else 2)
        + layers * (mla + 2 * hidden)
        + hidden
        + dense_layers * 3 * hidden * dense_ffn
        + len(moe_layers) * (shared * 3 * hidden * moe_ffn + router)
        + expert_params
    )
    cached = kv_rank + rope  # the latent and the shared rope key, per token per layer
    fields = dict(
        params=params,
        layers=layers,
        hidden=hidden,
        heads=heads,
        kv_heads=1,
        head_dim=(cached + 1) // 2,
        ffn=moe_ffn,
        vocab=vocab,
        max_context=r.optional("max_position_embeddings"),
        tied_embeddings=tied,
        experts=experts,
        experts_per_token=per_token,
        expert_params=expert_params,
        active_params=moe_active(params, experts, per_token, expert_params),
    )
    note = (
        f"MLA caches kv_lora_rank + qk_rope_head_dim = {cached} elements per token per layer, written as "
        f"kv_heads 1 x head_dim {(cached + 1) // 2}; ffn = one routed expert's width (dense layers "
        f"{dense_ffn}); MTP module not counted"
    )
    return fields, note


def gpt2(r: Reader) -> tuple[dict, str]:
    """GPT-2: learned position embeddings, fused c_attn (h x 3h) and c_proj with biases, MLP c_fc /
    c_proj with biases, two LayerNorms (weight and bias) per layer and a final one; the LM head is
    tied to the token embedding."""
    hidden = r.integer("n_embd", "hidden_size")
    layers = r.integer("n_layer", "num_hidden_layers")
    heads = r.integer("n_head", "num_attention_heads")
    vocab = r.integer("vocab_size")
    # GPT2Config default
    positions = r.integer("n_positions", "max_position_embeddings", default=1024)
    ffn = r.integer("n_inner", default=4 * hidden)  # n_inner null: 4 x n_embd
    tied = r.flag("tie_word_embeddings", default=True)
    layer = (
        2 * hidden
        + hidden * 3 * hidden
        + 3 * hidden
        + hidden * hidden
        + hidden
        + 2 * hidden
        + hidden * ffn
        + ffn
        + ffn * hidden
        + hidden
    )
    params = (
        vocab * hidden * (1 if tied else 2)
        + positions * hidden
        + layers * layer
        + 2 * hidden
    )
    fields = dict(
        params=params,
        layers=layers,
        hidden=hidden,
        heads=heads,
        kv_heads=heads,
        head_dim=hidden // heads,
        ffn=ffn,
        vocab=vocab,
        max_context=positions,
        tied_embeddings=tied,
    )
    return fields, "learned position embeddings, biases, LayerNorm"


def falcon(r: Reader) -> tuple[dict, str]:
    """Falcon (transformers FalconForCausalLM): fused query_key_value and dense projections, a
    4h (or ffn_hidden_size) GELU MLP, biases only when `bias`; LayerNorms with weight and bias:
    ln_attn + ln_mlp with new_decoder_architecture (num_ln_in_parallel_attn 2), one input_layernorm
    for the older parallel-attention layout, two without parallel_attn; final ln_f; no position
    embeddings (rotary or alibi); LM head tied unless tie_word_embeddings is false."""
    hidden = r.integer("hidden_size", "n_embed")
    layers = r.integer("num_hidden_layers", "n_layer")
    heads = r.integer("num_attention_heads", "n_head")
    vocab = r.integer("vocab_size")
    new_arch = r.flag("new_decoder_architecture", default=False)
    multi_query = r.flag("multi_query", default=True)  # FalconConfig default
    parallel = r.flag("parallel_attn", default=True)
    bias = r.flag("bias", default=False)
    head_dim = hidden // heads
    if new_arch:
        kv_heads = r.integer("num_kv_heads", "n_head_kv", default=heads)
    else:
        kv_heads = 1 if multi_query else heads
    ffn = r.integer("ffn_hidden_size", default=4 * hidden)
    qkv_out = (heads + 2 * kv_heads) * head_dim
    attn = hidden * qkv_out + hidden * hidden + ((qkv_out + hidden) if bias else 0)
    mlp = 2 * hidden * ffn + ((ffn + hidden) if bias else 0)
    ln_count = (
        r.integer("num_ln_in_parallel_attn", default=2 if new_arch else 1)
        if parallel
        else 2
    )
    tied = r.flag("tie_word_embeddings", default=True)
    params = (
        vocab * hidden * (1 if tied else 2)
        + layers * (attn + mlp + ln_count * 2 * hidden)
        + 2 * hidden
    )
    # FalconConfig's max_position_embeddings default (2048); the Falcon-7B/40B configs leave it out
    max_context = r.integer("max_position_embeddings", default=2048)
    fields = dict(
        params=params,
        layers=layers,
        hidden=hidden,
        heads=heads,
        kv_heads=kv_heads,
        head_dim=head_dim,
        ffn=ffn,
        vocab=vocab,
        max_context=max_context,
        tied_embeddings=tied,
    )
    return fields, (
        "new decoder architecture, " if new_arch else ""
    ) + f"{kv_heads} KV heads"
