"""Makes the worker die with the gateway that spawned it, so a stray worker never keeps memory.

Linux: `prctl(PR_SET_PDEATHSIG, SIGKILL)` has the kernel kill us when the parent exits. It
only covers a parent that is alive when prctl runs, so the race it leaves (the parent died
between spawning us and our prctl call; we were already re-parented) is closed by checking
`os.getppid()` against the pid the gateway passed, after the prctl. Note PDEATHSIG follows the
parent *thread* that forked us: the gateway must spawn workers from a thread that lives as
long as it does (its event-loop thread).
macOS: a kqueue EVFILT_PROC / NOTE_EXIT watch on the parent pid, with the same re-check after
registering. Elsewhere: a thread polling `os.getppid()`.
"""

from __future__ import annotations

import ctypes
import logging
import os
import select
import signal
import sys
import threading
import time

log = logging.getLogger(__name__)

_PR_SET_PDEATHSIG = 1
_POLL_S = 1.0


def install_parent_watchdog(parent_pid: int) -> None:
    """Arranges for this process to exit when `parent_pid` (our parent) exits."""
    if sys.platform.startswith("linux") and _set_pdeathsig():
        pass  # the kernel watches for us
    elif sys.platform == "darwin" and hasattr(select, "kqueue"):
        _watch_with_kqueue(parent_pid)
    else:  # also Linux when prctl failed
        _start_thread(_poll_parent, parent_pid)
    _exit_if_orphaned(parent_pid)


def _set_pdeathsig() -> bool:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) == 0:
            return True
        log.warning("prctl(PR_SET_PDEATHSIG) failed: errno %d", ctypes.get_errno())
    except (OSError, AttributeError) as exc:
        log.warning("prctl unavailable: %s", exc)
    return False


def _watch_with_kqueue(parent_pid: int) -> None:
    kq = select.kqueue()
    event = select.kevent(
        parent_pid,
        filter=select.KQ_FILTER_PROC,
        flags=select.KQ_EV_ADD | select.KQ_EV_ENABLE,
        fflags=select.KQ_NOTE_EXIT,
    )
    try:
        kq.control([event], 0)
    except ProcessLookupError:
        _exit_parent_gone(parent_pid)

    def wait_for_exit() -> None:
        kq.control(None, 1)
        _exit_parent_gone(parent_pid)

    _start_thread(wait_for_exit)


def _poll_parent(parent_pid: int) -> None:
    while os.getppid() == parent_pid:
        time.sleep(_POLL_S)
    _exit_parent_gone(parent_pid)


def _exit_if_orphaned(parent_pid: int) -> None:
    if os.getppid() != parent_pid:
        _exit_parent_gone(parent_pid)


def _exit_parent_gone(parent_pid: int) -> None:
    log.error("parent process %d is gone; exiting", parent_pid)
    os._exit(1)


def _start_thread(target, *args) -> None:
    threading.Thread(target=target, args=args, name="parent-watchdog", daemon=True).start()
