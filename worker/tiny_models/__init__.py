"""Tiny random-weight checkpoints in the real on-disk formats, built offline and cached.

`ensure_checkpoint(arch, size)` (build.py) is what tests, benchmarks and the demo use;
`registry.py` names every architecture; `text.py` is the decoder recipe; one module per family
(whisper, tts, tts_families, kokoro, vlm, vlm_families, gemma3, omni) writes the rest.
"""

from worker.tiny_models.build import cache_root, checkpoint_name, ensure_checkpoint

__all__ = ["cache_root", "checkpoint_name", "ensure_checkpoint"]
