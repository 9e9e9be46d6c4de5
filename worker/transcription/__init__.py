"""Speech in on mlx-audio: the transcription engine (audio -> text and timed segments), Whisper
window by window, the other families chunk by chunk, and decoding uploaded audio.
"""
