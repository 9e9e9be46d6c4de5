"""Speculative decoding in the batch engine: proposals per sequence, verified in one pass.

Every decoding sequence may propose tokens (prompt lookup, `ngram.py`; a draft model,
`draft_model.py`); one forward pass of the decode batch scores each sequence's last token and
its proposals (`generation_batch.py`), each sequence accepts the longest prefix its own
sampler agrees with (`verify.py`), and the KV cache is rewound past what it rejected
(`kv_rewind.py`). `adaptive.py` stops proposing for a sequence whose proposals keep failing;
`config.py` holds the settings and the checks made at start; `counters.py` what /metrics and
the request log report.
"""
