#!/usr/bin/env bash
# The system packages the tests use, installed when this machine lets us (Linux, root, apt);
# otherwise it says what is missing and the tests that need it skip, saying why. Run by
# `make test` (so it does what CI does) and thereby by .ci/run.
#   libopenblas0-pthread  the worker's float32 matmuls ~30x faster on the Linux CPU (--blas auto)
#   ffmpeg                m4a / opus / webm uploads to the transcription endpoints; MP4 out (/v1/videos)
#   espeak-ng             the real speech the transcription and real-weights tests use
#   sox                   joins and resamples that speech (the realtime and VAD tests)
#   nodejs, npm           the client tier's Node clients (Claude Code, Codex CLI, the SDKs)
#   chromium, chromium-driver  headless Chromium for the web playground's tests (tests/browser/)
# SYSTEM_PACKAGES=0 (`make test SYSTEM_PACKAGES=0`) only says what is missing: no apt-get.
set -uo pipefail
[ "$(uname -s)" = Linux ] || exit 0
missing=()
ldconfig -p 2>/dev/null | grep 'libopenblas\.so\.0' >/dev/null || missing+=(libopenblas0-pthread)
command -v ffmpeg >/dev/null || missing+=(ffmpeg)
command -v espeak-ng >/dev/null || missing+=(espeak-ng)
command -v sox >/dev/null || missing+=(sox)
command -v npm >/dev/null || missing+=(nodejs npm)
{ command -v chromium && command -v chromedriver; } >/dev/null || missing+=(chromium chromium-driver)
[ "${#missing[@]}" -eq 0 ] && exit 0
if [ "${SYSTEM_PACKAGES:-1}" = 0 ]; then
  echo "not installed: ${missing[*]} (SYSTEM_PACKAGES=0: not installing); the tests that need them skip" >&2
elif [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  echo "installing system packages with apt-get: ${missing[*]} (SYSTEM_PACKAGES=0 skips this)" >&2
  { apt-get update -qq && apt-get install -y -qq --no-install-recommends "${missing[@]}"; } \
    || echo "could not install ${missing[*]}: the tests that need them skip" >&2
else
  echo "not installed: ${missing[*]} (apt-get install them as root); the tests that need them skip" >&2
fi
exit 0
