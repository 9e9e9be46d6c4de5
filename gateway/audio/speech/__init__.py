"""`/v1/audio/speech` and `/v1/audio/voices`: requests, voices (presets, saved clone voices),
the speech stream, and PCM encoded into the response formats.
"""
