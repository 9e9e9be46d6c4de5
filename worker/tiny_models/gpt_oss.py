"""A tiny random-weight GPT-OSS checkpoint with the real harmony chat template.

The layout is the one mlx-lm converts GPT-OSS to and `mlx_lm.load` reads as it is (experts'
gate and up projections apart, `sinks` per attention head, biases everywhere, a separate
lm_head), with a small mixture of experts, sliding-window and full attention layers in turn
and YaRN RoPE, like the real 20B. The tokenizer is a byte-level BPE trained on the standard
library with the harmony special tokens (`<|start|>`, `<|channel|>`, `<|message|>`, `<|end|>`,
`<|call|>`, `<|return|>`, `<|constrain|>`, ...); `<|return|>` and `<|call|>` end a sequence,
as in the real generation config. Special tokens get zero output logits, so random weights
never write harmony markup by themselves (tests force it through grammars).

The chat template is the one OpenAI published with gpt-oss-20b/120b (Apache-2.0), taken from
the copy llama.cpp keeps in its tree, out of the pinned llama-cpp-python source release on PyPI
(`TEMPLATE_SOURCE`, both file hashes checked): the project does not write its own imitation of
it. It is fetched once into a `sources/` folder beside the checkpoints.
"""

from __future__ import annotations

import hashlib
import tarfile
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from safetensors.numpy import save_file

from worker.convert.packages import PackageUnavailable, download_release
from worker.tiny_models.text import LOGIT_STD, Dims, TokenId, random_tensor
from worker.tiny_models.tokenizer import (
    QWEN2_PRETOKENIZE_REGEX,
    TokenizerSpec,
    id_of,
    train_tokenizer,
    write_json,
    write_tokenizer_files,
)

if TYPE_CHECKING:
    from worker.tiny_models.arch import Arch

EXPERTS = 4
EXPERTS_PER_TOKEN = 2
SLIDING_WINDOW = 128


@dataclass(frozen=True)
class TemplateSource:
    """A file inside a pinned source release on PyPI."""

    package: str
    version: str
    sdist_sha256: str
    member: str
    sha256: str


TEMPLATE_SOURCE = TemplateSource(
    package="llama-cpp-python",
    version="0.3.36",
    sdist_sha256="832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e",
    member="llama_cpp_python-0.3.36/vendor/llama.cpp/models/templates/openai-gpt-oss-120b.jinja",
    sha256="a4c9919cbbd4acdd51ccffe22da049264b1b73e59055fa58811a99efbd7c8146",
)


class TemplateUnavailable(RuntimeError):
    """The pinned source release could not be fetched, or is not the pinned file."""


TOKENIZER = TokenizerSpec(
    pretokenize_regex=QWEN2_PRETOKENIZE_REGEX,
    nfc=False,
    added_tokens=tuple(
        (token, True)
        for token in (
            "<|startoftext|>",
            "<|endoftext|>",
            "<|return|>",
            "<|constrain|>",
            "<|channel|>",
            "<|start|>",
            "<|end|>",
            "<|message|>",
            "<|call|>",
        )
    ),
    bos_token="<|startoftext|>",
    eos_token="<|return|>",
    pad_token="<|endoftext|>",
    additional_special_tokens=(),
    chat_template=None,  # the published one, fetched at build time (harmony_template)
    tokenizer_class="PreTrainedTokenizerFast",
    post_processor_adds_bos=False,
    extra_config={"clean_up_tokenization_spaces": False},
)

SIZES = {"tiny": Dims(hidden=64, layers=2, heads=4, kv_heads=2, intermediate=64, vocab=4096)}


def config(d: Dims, tid: TokenId) -> dict[str, Any]:
    return {
        "architectures": ["GptOssForCausalLM"],
        "model_type": "gpt_oss",
        "hidden_size": d.hidden,
        "intermediate_size": d.intermediate,
        "num_hidden_layers": d.layers,
        "num_attention_heads": d.heads,
        "num_key_value_heads": d.kv_heads,
        "head_dim": d.head_dim,
        "num_local_experts": EXPERTS,
        "num_experts_per_tok": EXPERTS_PER_TOKEN,
        "experts_per_token": EXPERTS_PER_TOKEN,
        "vocab_size": d.vocab,
        "rms_norm_eps": 1e-5,
        "sliding_window": SLIDING_WINDOW,
        "layer_types": [
            "sliding_attention" if i % 2 == 0 else "full_attention" for i in range(d.layers)
        ],
        "rope_theta": 150000,
        "rope_scaling": {
            "rope_type": "yarn",
            "factor": 32.0,
            "beta_fast": 32.0,
            "beta_slow": 1.0,
            "truncate": False,
            "original_max_position_embeddings": 4096,
        },
        "max_position_embeddings": d.max_positions,
        "tie_word_embeddings": False,
        "eos_token_id": generation_config(tid)["eos_token_id"],
        "pad_token_id": tid("<|endoftext|>"),
        "torch_dtype": "float32",
    }


def generation_config(tid: TokenId) -> dict[str, Any]:
    return {
        "bos_token_id": tid("<|startoftext|>"),
        "eos_token_id": [tid("<|return|>"), tid("<|endoftext|>"), tid("<|call|>")],
        "pad_token_id": tid("<|endoftext|>"),
        "do_sample": True,
    }


def weights(cfg: dict[str, Any], zero_rows: list[int]) -> dict[str, Any]:
    """Random float32 weights under the names mlx-lm's GPT-OSS model has."""
    hidden, vocab, inter = cfg["hidden_size"], cfg["vocab_size"], cfg["intermediate_size"]
    heads, kv_heads, head_dim = (
        cfg["num_attention_heads"],
        cfg["num_key_value_heads"],
        cfg["head_dim"],
    )
    embed_std = LOGIT_STD / hidden**0.5
    specs: dict[str, tuple[tuple[int, ...], float | None]] = {
        "model.embed_tokens.weight": ((vocab, hidden), embed_std),
        "model.norm.weight": ((hidden,), None),
        "lm_head.weight": ((vocab, hidden), embed_std),
    }
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        specs |= {
            p + "input_layernorm.weight": ((hidden,), None),
            p + "post_attention_layernorm.weight": ((hidden,), None),
            p + "self_attn.sinks": ((heads,), 1.0),
            p + "self_attn.q_proj.weight": ((heads * head_dim, hidden), hidden**-0.5),
            p + "self_attn.k_proj.weight": ((kv_heads * head_dim, hidden), hidden**-0.5),
            p + "self_attn.v_proj.weight": ((kv_heads * head_dim, hidden), hidden**-0.5),
            p + "self_attn.o_proj.weight": ((hidden, heads * head_dim), (heads * head_dim) ** -0.5),
            p + "mlp.router.weight": ((EXPERTS, hidden), hidden**-0.5),
            p + "mlp.experts.gate_proj.weight": ((EXPERTS, inter, hidden), hidden**-0.5),
            p + "mlp.experts.up_proj.weight": ((EXPERTS, inter, hidden), hidden**-0.5),
            p + "mlp.experts.down_proj.weight": ((EXPERTS, hidden, inter), inter**-0.5),
        }
        biases = {
            "self_attn.q_proj.bias": (heads * head_dim,),
            "self_attn.k_proj.bias": (kv_heads * head_dim,),
            "self_attn.v_proj.bias": (kv_heads * head_dim,),
            "self_attn.o_proj.bias": (hidden,),
            "mlp.router.bias": (EXPERTS,),
            "mlp.experts.gate_proj.bias": (EXPERTS, inter),
            "mlp.experts.up_proj.bias": (EXPERTS, inter),
            "mlp.experts.down_proj.bias": (EXPERTS, hidden),
        }
        specs |= {p + name: (shape, 0.1) for name, shape in biases.items()}
    out = {name: random_tensor(name, shape, std) for name, (shape, std) in specs.items()}
    out["lm_head.weight"][zero_rows] = 0.0
    return out


def build(arch: Arch[Dims], dims: Dims, out_dir: Path) -> int:
    """Writes the checkpoint into `out_dir` (TemplateUnavailable when the template is)."""
    template = harmony_template(out_dir.parent / "sources")
    spec = replace(arch.tokenizer, chat_template=template)
    tok = train_tokenizer(spec, dims.vocab)
    tid = id_of(tok)
    cfg = arch.config(dims, tid)
    write_tokenizer_files(spec, tok, out_dir, model_max_length=dims.max_positions)
    write_json(out_dir / "config.json", cfg)
    write_json(out_dir / "generation_config.json", arch.generation_config(tid))
    tensors = weights(cfg, zero_rows=[tid(content) for content, _ in spec.added_tokens])
    save_file(tensors, str(out_dir / "model.safetensors"), metadata={"format": "pt"})
    return sum(t.size for t in tensors.values())


def harmony_template(folder: Path, source: TemplateSource = TEMPLATE_SOURCE) -> str:
    """The published GPT-OSS chat template, fetched once into `folder` and checked."""
    kept = folder / f"{Path(source.member).stem}-{source.sha256[:12]}.jinja"
    if kept.is_file() and _sha256(kept.read_bytes()) == source.sha256:
        return kept.read_text(encoding="utf-8")
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".template.", dir=folder) as tmp:
        sdist = _download_sdist(source, Path(tmp))
        with tarfile.open(sdist) as archive:
            member = archive.extractfile(source.member)
            if member is None:
                raise TemplateUnavailable(f"{sdist.name} has no {source.member}")
            data = member.read()
        if _sha256(data) != source.sha256:
            raise TemplateUnavailable(f"{source.member} in {sdist.name} is not the pinned file")
        staged = Path(tmp) / kept.name
        staged.write_bytes(data)
        staged.replace(kept)
    return data.decode("utf-8")


def _download_sdist(source: TemplateSource, dest: Path) -> Path:
    try:
        download_release(source.package, source.version, dest, binary=False)
    except PackageUnavailable as exc:
        raise TemplateUnavailable(str(exc)) from exc
    found = sorted(dest.glob("*.tar.gz"))
    if not found:
        raise TemplateUnavailable(f"pip download {source.package}: no source release")
    if _sha256(found[0].read_bytes()) != source.sdist_sha256:
        raise TemplateUnavailable(f"{found[0].name} is not the pinned release (sha256 differs)")
    return found[0]


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
