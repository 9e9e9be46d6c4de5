"""Kokoro-82M's int8 ONNX export -> an mlx-audio `kokoro` checkpoint (float32, upstream names).

The export (kokoro-onnx's `kokoro-v1.0.int8.onnx`) is ONNX Runtime's dynamic int8 quantization
of the whole model: MatMulInteger (linear layers, per-column scales and zero points),
ConvInteger (convolutions, per-tensor), DynamicQuantizeLSTM, int8 embedding tables read
through DequantizeLinear, and float ConvTranspose / Conv / MatMul where quantization was not
applied. Weight norm was folded into the kernels, and zero-point tensors are shared between
unrelated weights, so nothing is taken from a name when the graph says it:

- a weight is dequantized as `(q - zero_point) * scale` with the zero point the consuming
  node's own input and the scale found by walking from that node's output, through the integer
  Add / Cast, to the Mul that rescales it: its scale operand is `Mul(activation_scale,
  weight_scale)`, and the weight scale is that product's constant operand;
- a weight is named by the module scope of the node that consumes it
  (`/decoder/decoder/generator/resblocks.0/convs1.0/Conv_quant` is `decoder.generator.
  resblocks.0.convs1.0`; `cnn.0/cnn.0.0` is `cnn.0.0`; `/encoder/F0.1/...` is the predictor's;
  ALBERT's twelve applications of its one shared layer, `query_1` ... `query_11`, are `query`);
- a folded weight-norm kernel W becomes `weight_v = W`, `weight_g = ||W||` over every axis but
  the first (PyTorch's `weight_norm(dim=0)`), which mlx-audio turns back into exactly W;
- LSTM weights [directions, in, 4h] become PyTorch's [4h, in] per direction, gates reordered
  from ONNX's (i, o, f, c) to PyTorch's (i, f, g, o), the bias [Wb | Rb] split;
- named float constants (biases, layer norms, Snake alphas) are copied; ALBERT's pooler, which
  Kokoro never uses and the export does not have, is zeros (mlx-audio's loader is strict).
The result is checked against mlx-audio's parameter tree (every name, every shape) by
`convert_kokoro_onnx`'s caller (worker/convert/packages.py) loading it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from worker.convert.errors import ConversionError
from worker.convert.kokoro_layout import KOKORO_82M, upstream_name, upstream_value
from worker.convert.output import PlannedTensor, Summary, write_json, write_safetensors

_REPEAT = re.compile(r"_\d+$")  # ALBERT's shared layer, applied again: query_3 -> query
_PREDICTOR_SCOPES = ("F0.", "N.", "F0_proj", "N_proj", "shared")


class _Graph:
    """The ONNX graph's initializers (as numpy) and who produces and consumes each value."""

    def __init__(self, path: Path) -> None:
        import onnx
        from onnx import numpy_helper

        graph = onnx.load(str(path)).graph
        self.nodes = list(graph.node)
        self.constants = {i.name: numpy_helper.to_array(i) for i in graph.initializer}
        self.producer = {out: node for node in self.nodes for out in node.output}
        self.consumers: dict[str, list[Any]] = {}
        for node in self.nodes:
            for name in node.input:
                self.consumers.setdefault(name, []).append(node)

    def constant(self, name: str) -> np.ndarray | None:
        return self.constants.get(name) if name else None

    def weight_scale(self, node: Any) -> np.ndarray:
        """The scale of an integer node's weight: from the Mul that rescales its output."""
        frontier = [node.output[0]]
        for _ in range(6):  # Add (bias), Cast, Reshape ... then the rescaling Mul
            following = [c for value in frontier for c in self.consumers.get(value, [])]
            for consumer in following:
                if consumer.op_type != "Mul":
                    continue
                for operand in consumer.input:
                    product = self.producer.get(operand)
                    if product is not None and product.op_type == "Mul":
                        found = [self.constants[i] for i in product.input if i in self.constants]
                        if len(found) == 1:
                            return found[0].astype(np.float32)
            frontier = [out for c in following if c.op_type != "Mul" for out in c.output]
        raise ConversionError(f"no weight scale found for {node.name}")


def scope_of(node_name: str) -> str:
    """The MLX module path of the node's module (see the module docstring)."""
    parts = node_name.strip("/").split("/")[:-1]
    if parts[:2] == ["decoder", "decoder"]:
        head, rest = ["decoder"], parts[2:]
    elif parts[:1] == ["encoder"]:
        rest = parts[1:]
        if rest[:1] == ["predictor"]:
            head, rest = ["predictor"], rest[1:]
        elif rest and rest[0].startswith(_PREDICTOR_SCOPES):
            head = ["predictor"]
        else:
            head = []
    else:
        raise ConversionError(f"a weight outside the model's scopes: {node_name}")
    path: list[str] = []
    for part in rest:
        part = _REPEAT.sub("", part) if head == [] and rest[:1] == ["bert"] else part
        if path and part.startswith(path[-1] + "."):
            path[-1] = part
        else:
            path.append(part)
    return ".".join(head + path)


def mlx_weights(onnx_path: Path, expected: Mapping[str, tuple[int, ...]]) -> dict[str, np.ndarray]:
    """Every parameter of mlx-audio's Kokoro model (names and shapes: `expected`), in MLX
    layout, float32, from the ONNX file; ConversionError naming what is missing or wrong."""
    graph = _Graph(onnx_path)
    found: dict[str, np.ndarray] = {}
    for name, value in _weights(graph):
        _put(found, name, value, expected)
    for name, value in _named_constants(graph, expected):
        found.setdefault(name, value)
    for name, shape in expected.items():
        if name.startswith("bert.pooler."):  # unused by Kokoro, absent from the export
            found[name] = np.zeros(shape, np.float32)
    missing = sorted(set(expected) - set(found))
    if missing:
        raise ConversionError(f"{len(missing)} parameters not found in the ONNX graph: {missing}")
    return found


def _put(found: dict[str, np.ndarray], name: str, value: np.ndarray,
         expected: Mapping[str, tuple[int, ...]]) -> None:  # fmt: skip
    shape = expected.get(name)
    if shape is None:
        raise ConversionError(f"the ONNX graph has {name}, which mlx-audio's Kokoro has not")
    if value.shape != shape:
        if value.size != int(np.prod(shape)):
            raise ConversionError(f"{name}: shape {value.shape} from the graph, {shape} expected")
        value = value.reshape(shape)
    previous = found.get(name)
    if previous is not None and not np.array_equal(previous, value):
        raise ConversionError(f"{name}: two different values in the graph")
    found[name] = np.ascontiguousarray(value, dtype=np.float32)


def _weights(graph: _Graph) -> Iterator[tuple[str, np.ndarray]]:
    for node in graph.nodes:
        kind = node.op_type
        if kind == "MatMulInteger":
            yield f"{scope_of(node.name)}.weight", _dequantized(graph, node, 1, 3).T
        elif kind == "ConvInteger":
            yield from _kernel(scope_of(node.name), _dequantized(graph, node, 1, 3))
        elif kind in ("ConvTranspose", "Conv") and graph.constant(node.input[1]) is not None:
            scope = scope_of(node.name)
            if scope.endswith(".stft"):  # the iSTFT's own bases: mlx-audio computes them
                continue
            yield from _kernel(scope, graph.constants[node.input[1]].astype(np.float32))
        elif kind == "MatMul" and graph.constant(node.input[1]) is not None:
            yield f"{scope_of(node.name)}.weight", graph.constants[node.input[1]].T
        elif kind == "DynamicQuantizeLSTM":
            yield from _lstm(graph, node)
        elif kind == "DequantizeLinear" and node.name.endswith("Gather_quant_DequantizeLinear"):
            gather = graph.producer[node.input[0]]
            table = graph.constants[gather.input[0]].astype(np.float32)
            scale = graph.constants[node.input[1]].astype(np.float32)
            zero = graph.constant(node.input[2])
            table = (table - (zero.astype(np.float32) if zero is not None else 0.0)) * scale
            yield f"{scope_of(gather.name)}.weight", table


def _dequantized(graph: _Graph, node: Any, weight_at: int, zero_at: int) -> np.ndarray:
    weight = graph.constants[node.input[weight_at]].astype(np.float32)
    zero = graph.constant(node.input[zero_at]) if len(node.input) > zero_at else None
    if zero is not None:
        zero = zero.astype(np.float32)
        if weight.ndim == 3 and zero.size > 1:  # a per-channel convolution zero point
            zero = zero.reshape(-1, 1, 1)
        weight = weight - zero  # MatMulInteger's: one per output column, the last axis
    scale = graph.weight_scale(node)
    if weight.ndim == 3 and scale.size > 1:  # a per-channel convolution scale
        scale = scale.reshape(-1, 1, 1)
    return weight * scale


def _kernel(scope: str, kernel: np.ndarray) -> Iterator[tuple[str, np.ndarray]]:
    """A convolution kernel in PyTorch layout (d0, d1, k) as MLX parameters: weight-normed
    (`weight_v` in MLX layout and `weight_g`), or, for the few plain convolutions, `weight`."""
    if scope.endswith(("noise_convs.0", "noise_convs.1", "F0_proj", "N_proj")):
        yield f"{scope}.weight", kernel.transpose(0, 2, 1)
        return
    norm = np.sqrt((kernel.astype(np.float64) ** 2).sum(axis=(1, 2), keepdims=True))
    yield f"{scope}.weight_v", kernel.transpose(0, 2, 1)
    yield f"{scope}.weight_g", norm.astype(np.float32)


_ONNX_GATES_TO_TORCH = (0, 2, 3, 1)  # ONNX (i, o, f, c) -> PyTorch (i, f, g, o), as indices


def _lstm(graph: _Graph, node: Any) -> Iterator[tuple[str, np.ndarray]]:
    scope = scope_of(node.name)
    inputs = list(node.input)
    w = _lstm_dequantized(graph, inputs[1], inputs[8], inputs[9])  # [dirs, in, 4h]
    r = _lstm_dequantized(graph, inputs[2], inputs[10], inputs[11])  # [dirs, h, 4h]
    bias = graph.constants[inputs[3]].astype(np.float32)  # [dirs, 8h]
    hidden = r.shape[1]
    for direction, suffix in enumerate(("forward", "backward")):
        yield f"{scope}.Wx_{suffix}", _gates(w[direction].T, hidden)
        yield f"{scope}.Wh_{suffix}", _gates(r[direction].T, hidden)
        yield f"{scope}.bias_ih_{suffix}", _gates(bias[direction, : 4 * hidden], hidden)
        yield f"{scope}.bias_hh_{suffix}", _gates(bias[direction, 4 * hidden :], hidden)


def _lstm_dequantized(graph: _Graph, weight: str, scale: str, zero: str) -> np.ndarray:
    value = graph.constants[weight].astype(np.float32)  # [dirs, rows, 4h]
    scales = graph.constants[scale].astype(np.float32)
    zeros = graph.constants[zero].astype(np.float32)
    shape = (value.shape[0], 1, -1)  # per direction (and per column, when given so)
    return (value - zeros.reshape(shape)) * scales.reshape(shape)


def _gates(value: np.ndarray, hidden: int) -> np.ndarray:
    blocks = [value[g * hidden : (g + 1) * hidden] for g in range(4)]
    return np.concatenate([blocks[i] for i in _ONNX_GATES_TO_TORCH], axis=0)


def _named_constants(
    graph: _Graph, expected: Mapping[str, tuple[int, ...]]
) -> Iterator[tuple[str, np.ndarray]]:
    """Float constants named after their parameter (`encoder.predictor.F0_proj.bias`, ...)."""
    for name, value in graph.constants.items():
        if value.dtype != np.float32 or name.startswith(("/", "onnx::")):
            continue
        mlx = _mlx_name(name)
        if mlx in expected and value.size == int(np.prod(expected[mlx])):
            yield mlx, value.reshape(expected[mlx]).astype(np.float32)


def _mlx_name(name: str) -> str:
    if name.startswith("decoder.decoder."):
        name = "decoder." + name[len("decoder.decoder.") :]
    elif name.startswith("encoder."):
        name = name[len("encoder.") :]
    if name.startswith("text_encoder.cnn.") and name.endswith((".gamma", ".beta")):
        name = name.rsplit(".", 1)[0] + (".weight" if name.endswith(".gamma") else ".bias")
    return name


def convert_kokoro_onnx(
    onnx_path: Path,
    vocab_path: Path,
    voices_path: Path,
    out: Path,
    default_voice: str | None = None,
) -> Summary:
    """Write `out`: config.json (Kokoro-82M with the real vocabulary, and `default_voice`, the
    voice the server speaks with when a request names none), kokoro-v1_0.safetensors (float32,
    upstream names) and voices/<name>.safetensors (float32 [510, 1, 256] each).

    The one converter here that imports MLX: mlx-audio's Kokoro model gives every parameter's
    name and shape, which name the graph's weights and check that none is missing."""
    from mlx.utils import tree_flatten
    from mlx_audio.tts.models.kokoro import Model, ModelConfig

    vocab = json.loads(vocab_path.read_text(encoding="utf-8"))
    vocab = vocab.get("vocab", vocab)
    if not isinstance(vocab, dict) or not vocab:
        raise ConversionError(f"{vocab_path}: no phoneme vocabulary")
    config = {**KOKORO_82M, "vocab": vocab}
    packs = np.load(voices_path)
    if not packs.files:
        raise ConversionError(f"{voices_path}: no voice packs")
    if default_voice is not None:
        if default_voice not in packs.files:
            raise ConversionError(f"default voice {default_voice!r} is not among {packs.files}")
        config["default_voice"] = default_voice
    model = Model(ModelConfig.from_dict(config))
    flat = tree_flatten(model.parameters())
    assert isinstance(flat, list)
    expected = {name: tuple(value.shape) for name, value in flat}
    weights = mlx_weights(onnx_path, expected)
    write_json(out / "config.json", config)
    planned = [
        _planned(upstream_name(name), upstream_value(name, value))
        for name, value in sorted(weights.items())
    ]
    parameters = write_safetensors(out / "kokoro-v1_0.safetensors", planned, "float32",
                                   {"format": "pt"})  # fmt: skip
    voices = out / "voices"
    voices.mkdir(exist_ok=True)
    for name in packs.files:
        pack = np.asarray(packs[name], np.float32)
        if pack.shape != (510, 1, 2 * KOKORO_82M["style_dim"]):
            raise ConversionError(f"voice pack {name}: shape {pack.shape}, not (510, 1, 256)")
        write_safetensors(voices / f"{name}.safetensors",
                          [_planned("voice", pack)],
                          "float32", {"format": "pt"})  # fmt: skip
    return Summary(
        "kokoro-onnx",
        out,
        parameters,
        "float32",
        [f"{len(weights)} tensors", f"voices: {', '.join(sorted(packs.files))}"]
        + ([f"default voice: {default_voice}"] if default_voice else []),
    )


def _planned(name: str, value: np.ndarray) -> PlannedTensor:
    """A tensor already computed, planned for the safetensors writer."""
    return PlannedTensor(name, tuple(value.shape), lambda: value)
