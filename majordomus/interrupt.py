"""Ctrl-C and SIGTERM: one exception raised where it is safe, and what the command stored.

Signal dispositions belong to the process, so the little state here does too: the
handler needs it, and the one line an interrupted command prints is built from it.
Imports nothing of majordomus and little of Python: it is installed before the rest
of the program is imported.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import time
from collections.abc import Iterator, Mapping
from types import FrameType

PAUSE_VARIABLE = "MAJORDOMUS_TEST_PAUSE_AT"
_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Interrupted(KeyboardInterrupt):
    """Raised by the handler for SIGINT and SIGTERM alike: a KeyboardInterrupt, so that
    all that Python and typer do on Ctrl-C (end a child, unwind, exit 130) happens for
    both; the signal number tells `watch` which one it was."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum

    @property
    def by_ctrl_c(self) -> bool:
        return self.signum == signal.SIGINT


class _State:
    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.holding = 0  # inside held(): a signal waits for the block to finish
        self.pending: int | None = None
        self.raised = False  # once an interruption is being answered, signals are not news
        self.signalled = False  # a signal reached the handler (and raised, or waits)
        self.writing: tuple[str, str] | None = None  # (kind, id) while a write is under way
        self.stored: list[tuple[str, str]] = []


_state = _State()


def install(*, held: bool = False) -> None:
    """Turn SIGINT and SIGTERM into `Interrupted`, except where the parent made them
    ignored (a background job of a shell): those stay ignored, as Python leaves them.

    With `held`, a signal waits until `release()`: the entry module installs the handler
    as it is imported, before `main` is there to answer one."""
    for signum in _SIGNALS:
        if signal.getsignal(signum) != signal.SIG_IGN:
            signal.signal(signum, _handler)
    if held:
        _state.holding += 1


def _handler(signum: int, frame: FrameType | None) -> None:
    if _state.raised:
        return
    _state.signalled = True
    if _state.holding:
        _state.pending = signum
        return
    if _in_a_callback(frame):
        # Python swallows an exception raised inside a weakref callback or a __del__
        # (import's module locks use one) and prints "Exception ignored": raise it a
        # moment later instead, once the callback has returned.
        _state.pending = signum
        signal.signal(signal.SIGALRM, _deferred)
        signal.setitimer(signal.ITIMER_REAL, 0.002)
        return
    # Not yet `raised`: should the exception still be swallowed somewhere Python calls
    # back into, the next signal must still work.
    raise Interrupted(signum)


def _in_a_callback(frame: FrameType | None) -> bool:
    return frame is not None and (
        frame.f_code.co_filename.startswith("<frozen importlib")
        or frame.f_code.co_name == "__del__"
    )


def _deferred(signum: int, frame: FrameType | None) -> None:
    """The alarm after a signal that arrived inside a callback: deliver it now."""
    del signum
    pending, _state.pending = _state.pending, None
    if pending is not None:
        _handler(pending, frame)


def reset() -> None:
    """A new command in this process: nothing written, nothing pending."""
    _state.reset()


def signalled() -> bool:
    """Whether a signal reached the handler: an exception that escapes afterwards (one
    raised by code the interruption cut short, inside an import say) is its doing."""
    return _state.signalled


def heard() -> None:
    """The interruption reached the place that answers it: later signals are not news."""
    _state.raised = True


def settle() -> None:
    """The process has its answer and is about to exit: a signal from now on cannot change
    it. Ignored, not left to Python, which restores the default action (a silent death
    by the signal) while it shuts down."""
    _state.raised = True
    for signum in _SIGNALS:
        signal.signal(signum, signal.SIG_IGN)
    # A signal deferred out of a callback has no one left to interrupt; its alarm, should
    # it ring while Python shuts down (handlers back to the defaults), would kill the process.
    signal.setitimer(signal.ITIMER_REAL, 0)


@contextlib.contextmanager
def held() -> Iterator[None]:
    """Signals wait until the block is done, so that a ref moved is a ref noted as moved."""
    _state.holding += 1
    try:
        yield
    finally:
        release()


def release() -> None:
    """End one hold (`held()`, `install(held=True)`; none left: nothing to do); when it was
    the last, a signal that came meanwhile is raised now."""
    if not _state.holding:
        return
    _state.holding -= 1
    if not _state.holding and _state.pending is not None and not _state.raised:
        signum, _state.pending = _state.pending, None
        raise Interrupted(signum)


def writing(kind: str, ident: str = "") -> None:
    """A write begins: of a record (`checkpoint`, its id), or of fetched records merged."""
    _state.writing = (kind, ident)


def stored() -> None:
    """The write under way is in the notes ref (called inside `held`)."""
    if _state.writing is not None:
        _state.stored.append(_state.writing)
        _state.writing = None


def message() -> str:
    """The one line an interrupted command prints: whether its record was stored."""
    if _state.stored:
        what = " and ".join(f"the {kind} {ident}".rstrip() for kind, ident in _state.stored)
        plural = len(_state.stored) > 1 or _state.stored[0][0].endswith("s")
        return f"interrupted; {what} {'were' if plural else 'was'} stored."
    if _state.writing is not None:
        kind = _state.writing[0]
        return f"interrupted; the {kind} {'were' if kind.endswith('s') else 'was'} not stored."
    return "interrupted; nothing was stored."


def pause(point: str, environ: Mapping[str, str]) -> None:
    """A test seam: at the named point, say so on stderr and wait for a signal (at most a
    minute), so a test can interrupt exactly there without guessing at timing."""
    if environ.get(PAUSE_VARIABLE) != point:
        return
    sys.stderr.write(f"majordomus: paused at {point}\n")
    sys.stderr.flush()
    time.sleep(60)
