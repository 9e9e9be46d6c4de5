"""Speech out on mlx-audio: the speech engine (text -> PCM), what it knows of each TTS family,
the per-request state mlx-audio keeps in globals, and sample conversions.
"""
