"""The model the reference trainers build, read from the same JSON meshsim reads.

Two inputs are accepted, as in meshsim's `load_model` (workloads/include/meshsim/workloads/model.h):

* a meshsim model JSON (workloads/models/*.json, validation/models/*.json): strict, every key of
  the schema, unknown keys are errors;
* a Hugging Face config.json of a Llama model (recognised by "model_type"; keys that do not change
  the architecture are ignored, absent ones take transformers' defaults).

The trainers build only the Llama family (RMSNorm, RoPE, GQA, SwiGLU); a gpt2 or mixtral config is
refused with a clear error rather than trained as something else. `parameter_count` mirrors
meshsim's `count_parameters` (workloads/src/accounting.cc) term by term, and the tests check it
against `meshsim calc` when a meshsim binary is built.

Standard library only: this module is imported by the JAX trainer, the PyTorch twin and the driver.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

MESHSIM_KEYS = {
    "name", "source", "architecture", "num_layers", "d_model", "num_heads", "num_kv_heads",
    "head_dim", "d_ff", "vocab_size", "max_position_embeddings", "mlp", "norm",
    "position_embedding", "attention_bias", "mlp_bias", "tied_embeddings", "dropout", "moe",
}
REQUIRED_KEYS = MESHSIM_KEYS - {"name", "source", "head_dim", "moe"}


class ModelConfigError(ValueError):
    """A model file the trainers cannot use; the message names the file and the field."""


@dataclasses.dataclass(frozen=True)
class ModelConfig:
    name: str
    num_layers: int
    d_model: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    d_ff: int
    vocab_size: int
    max_position_embeddings: int
    attention_bias: bool = False
    mlp_bias: bool = False
    tied_embeddings: bool = False
    rope_theta: float = 10000.0
    norm_eps: float = 1e-5

    @property
    def q_dim(self) -> int:
        return self.num_heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        return self.num_kv_heads * self.head_dim

    def to_meshsim_json(self) -> dict[str, Any]:
        """The model in meshsim's schema (what the manifest stores inline)."""
        return {
            "name": self.name,
            "architecture": "llama",
            "num_layers": self.num_layers,
            "d_model": self.d_model,
            "num_heads": self.num_heads,
            "num_kv_heads": self.num_kv_heads,
            "head_dim": self.head_dim,
            "d_ff": self.d_ff,
            "vocab_size": self.vocab_size,
            "max_position_embeddings": self.max_position_embeddings,
            "mlp": "swiglu",
            "norm": "rmsnorm",
            "position_embedding": "rope",
            "attention_bias": self.attention_bias,
            "mlp_bias": self.mlp_bias,
            "tied_embeddings": self.tied_embeddings,
            "dropout": False,
        }


def _fail(source: str, field: str, message: str) -> None:
    raise ModelConfigError(f"{source}: /{field}: {message}")


def _positive_int(obj: dict, key: str, source: str) -> int:
    v = obj.get(key)
    if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
        _fail(source, key, f"expected a positive integer, got {json.dumps(v)}")
    return v


def _bool(obj: dict, key: str, source: str, default: bool | None = None) -> bool:
    v = obj.get(key, default)
    if not isinstance(v, bool):
        _fail(source, key, f"expected true or false, got {json.dumps(v)}")
    return v


def _choice(obj: dict, key: str, source: str, allowed: str) -> None:
    if obj.get(key) != allowed:
        _fail(source, key, f"the reference trainers build only \"{allowed}\", got "
              f"{json.dumps(obj.get(key))}")


def _validate(cfg: ModelConfig, source: str) -> ModelConfig:
    if cfg.num_heads % cfg.num_kv_heads != 0:
        _fail(source, "num_kv_heads", f"{cfg.num_kv_heads} does not divide num_heads {cfg.num_heads}")
    if cfg.head_dim % 2 != 0:
        _fail(source, "head_dim", f"RoPE needs an even head_dim, got {cfg.head_dim}")
    return cfg


def parse_meshsim(obj: dict, source: str) -> ModelConfig:
    unknown = sorted(set(obj) - MESHSIM_KEYS)
    if unknown:
        _fail(source, unknown[0], "unknown key (expected one of: " + ", ".join(sorted(MESHSIM_KEYS)) + ")")
    for key in sorted(REQUIRED_KEYS):
        if key not in obj:
            _fail(source, key, "missing (required by meshsim's model schema)")
    _choice(obj, "architecture", source, "llama")
    _choice(obj, "mlp", source, "swiglu")
    _choice(obj, "norm", source, "rmsnorm")
    _choice(obj, "position_embedding", source, "rope")
    if "moe" in obj:
        _fail(source, "moe", "the reference trainers build dense models only")
    if _bool(obj, "dropout", source):
        _fail(source, "dropout", "the reference trainers train without dropout (set false)")
    d_model = _positive_int(obj, "d_model", source)
    num_heads = _positive_int(obj, "num_heads", source)
    if "head_dim" in obj:
        head_dim = _positive_int(obj, "head_dim", source)
    else:
        if d_model % num_heads != 0:
            _fail(source, "head_dim", f"absent, and num_heads {num_heads} does not divide d_model {d_model}")
        head_dim = d_model // num_heads
    name = obj.get("name", Path(source).stem)
    if not isinstance(name, str):
        _fail(source, "name", "expected a string")
    return _validate(ModelConfig(
        name=name,
        num_layers=_positive_int(obj, "num_layers", source),
        d_model=d_model,
        num_heads=num_heads,
        num_kv_heads=_positive_int(obj, "num_kv_heads", source),
        head_dim=head_dim,
        d_ff=_positive_int(obj, "d_ff", source),
        vocab_size=_positive_int(obj, "vocab_size", source),
        max_position_embeddings=_positive_int(obj, "max_position_embeddings", source),
        attention_bias=_bool(obj, "attention_bias", source),
        mlp_bias=_bool(obj, "mlp_bias", source),
        tied_embeddings=_bool(obj, "tied_embeddings", source),
    ), source)


def parse_hf(obj: dict, source: str) -> ModelConfig:
    if obj.get("model_type") != "llama":
        _fail(source, "model_type", f"the reference trainers build only \"llama\", got "
              f"{json.dumps(obj.get('model_type'))}")
    present = {k: v for k, v in obj.items() if v is not None}
    d_model = _positive_int(present, "hidden_size", source)
    num_heads = _positive_int(present, "num_attention_heads", source)
    num_kv = _positive_int(present, "num_key_value_heads", source) if "num_key_value_heads" in present else num_heads
    if "head_dim" in present:
        head_dim = _positive_int(present, "head_dim", source)
    else:
        if d_model % num_heads != 0:
            _fail(source, "head_dim", f"absent, and num_attention_heads {num_heads} does not divide hidden_size {d_model}")
        head_dim = d_model // num_heads
    if float(present.get("attention_dropout", 0.0)) > 0.0:
        _fail(source, "attention_dropout", "the reference trainers train without dropout")
    name = present.get("_name_or_path") or Path(source).parent.name or Path(source).stem
    return _validate(ModelConfig(
        name=str(name),
        num_layers=_positive_int(present, "num_hidden_layers", source),
        d_model=d_model,
        num_heads=num_heads,
        num_kv_heads=num_kv,
        head_dim=head_dim,
        d_ff=_positive_int(present, "intermediate_size", source),
        vocab_size=_positive_int(present, "vocab_size", source),
        max_position_embeddings=_positive_int(present, "max_position_embeddings", source),
        attention_bias=_bool(present, "attention_bias", source, False),
        mlp_bias=_bool(present, "mlp_bias", source, False),
        tied_embeddings=_bool(present, "tie_word_embeddings", source, False),
        rope_theta=float(present.get("rope_theta", 10000.0)),
        norm_eps=float(present.get("rms_norm_eps", 1e-5)),
    ), source)


def parse_model(obj: Any, source: str) -> ModelConfig:
    if not isinstance(obj, dict):
        raise ModelConfigError(f"{source}: expected a JSON object")
    return parse_hf(obj, source) if "model_type" in obj else parse_meshsim(obj, source)


def load_model(path: str | Path) -> ModelConfig:
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as e:
        raise ModelConfigError(f"{path}: cannot read: {e.strerror}") from None
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as e:
        raise ModelConfigError(f"{path}: byte {e.pos}: not JSON: {e.msg}") from None
    return parse_model(obj, str(path))


def parameter_breakdown(cfg: ModelConfig) -> dict[str, int]:
    """meshsim's count_parameters for a dense Llama model (workloads/src/accounting.cc)."""
    h = cfg.d_model
    attn_bias = 1 if cfg.attention_bias else 0
    attention = (h * cfg.q_dim + attn_bias * cfg.q_dim) + 2 * (h * cfg.kv_dim + attn_bias * cfg.kv_dim) \
        + (cfg.q_dim * h + attn_bias * h)
    mlp = 3 * h * cfg.d_ff + ((2 * cfg.d_ff + h) if cfg.mlp_bias else 0)
    norms = 2 * h  # two RMSNorm weight vectors per layer
    return {
        "token_embedding": cfg.vocab_size * h,
        "attention": cfg.num_layers * attention,
        "mlp": cfg.num_layers * mlp,
        "norms": cfg.num_layers * norms + h,  # and the final norm
        "lm_head": 0 if cfg.tied_embeddings else cfg.vocab_size * h,
    }


def parameter_count(cfg: ModelConfig) -> int:
    return sum(parameter_breakdown(cfg).values())
