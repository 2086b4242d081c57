"""The verbs that say how fresh a task is: `check` (the age of its last checkpoint against
the profile's interval, once) and `watch` (the same, again and again until stopped);
each a function that returns what it found, and the command that prints it
(`<verb>_command`)."""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from majordomus import interrupt
from majordomus import profile as profiles
from majordomus.errors import ExitCode, RefusedError
from majordomus.index import Index
from majordomus.invocation import Inputs, Invocation, OnFirstUse
from majordomus.tasks import (
    Jobs,
    attach_checks,
    check_task,
    check_tasks,
    current_task,
    open_here,
    task_views,
)
from majordomus.values import CheckResult

if TYPE_CHECKING:
    from majordomus import render
else:
    render = OnFirstUse("majordomus.render")


def check(inputs: Inputs, task: str | None = None, all_tasks: bool = False) -> list[CheckResult]:
    jobs = open_here(inputs)
    prof = jobs.profile
    now = inputs.now()
    if all_tasks:
        index = Index(jobs.reader.read_notes(), jobs.reader, jobs.history)
        checks = check_tasks(index, sorted(index.tasks()), prof, now)
    else:
        checks = [_check_current(inputs, jobs, task, prof)]
    return attach_checks(jobs, checks, prof.trust == "signed")


def _check_current(
    inputs: Inputs, jobs: Jobs, task: str | None, prof: profiles.Profile
) -> CheckResult:
    views = task_views(inputs, jobs, task)
    task_id, _ = current_task(inputs, jobs, views, task)
    return check_task(views.index(task_id), task_id, prof, inputs.now())


def watch(
    inputs: Inputs,
    emit: Callable[[CheckResult, bool], None],
    task: str | None = None,
    every_s: float = 5.0,
    max_updates: int | None = None,
    timeout_s: float | None = None,
    monotonic: Callable[[], float] = time.monotonic,
) -> int:
    """Call `emit(result, changed)` every `every_s` seconds until stopped.

    `changed` says the status, the last checkpoint or the open handover differs
    from the previous report. Re-reads the notes refs each time, so records
    written by other processes show. Returns the number of reports.
    """
    if every_s <= 0:
        raise RefusedError(f"--every must be more than 0 seconds, not {every_s:g}.")
    if not every_s <= 86400:  # NaN too: time.sleep refuses NaN and overflows on inf
        raise RefusedError(f"--every must be at most 86400 seconds (a day), not {every_s:g}.")
    jobs = open_here(inputs)
    prof = jobs.profile
    start = monotonic()
    last_key: tuple[object, ...] | None = None
    reports = 0
    while True:
        # A fresh handle sees refs (and HEAD) other processes moved; the views cache
        # makes an unchanged state cheap to read again.
        result = _check_current(inputs, open_here(inputs), task, prof)
        key = (
            result.task,
            result.stale,
            result.last_checkpoint.record.id if result.last_checkpoint else None,
            result.open_handover.record.id if result.open_handover else None,
        )
        emit(result, key != last_key)
        last_key = key
        reports += 1
        if max_updates is not None and reports >= max_updates:
            return reports
        if timeout_s is not None and monotonic() - start + every_s > timeout_s:
            return reports
        inputs.sleep(every_s)


def check_command(
    invocation: Invocation, all_tasks: bool = False, task: str | None = None, as_json: bool = False
) -> int:
    results = check(invocation.inputs(), task, all_tasks)
    invocation.out(render.check(results, as_json, invocation.terminal.colour, all_tasks))
    return ExitCode.NEGATIVE if any(result.stale for result in results) else ExitCode.OK


def watch_command(
    invocation: Invocation,
    every: float = 5.0,
    count: int | None = None,
    seconds: float | None = None,
    task: str | None = None,
) -> int:
    terminal = invocation.terminal
    gc.enable()  # a long-running command: let the collector work
    # A terminal that cannot move the cursor (TERM=dumb) gets plain lines.
    live = terminal.is_tty and invocation.environ.get("TERM") != "dumb"

    def emit(result: CheckResult, changed: bool) -> None:
        line = render.check_line(result, terminal.colour)
        if live:
            terminal.stdout.write("\r\x1b[2K" + line)
        elif changed:
            terminal.stdout.write(line + "\n")
        terminal.stdout.flush()

    try:
        watch(invocation.inputs(), emit, task, every, count, seconds)
    except KeyboardInterrupt as stop:
        if isinstance(stop, interrupt.Interrupted) and not stop.by_ctrl_c:
            raise  # SIGTERM: an interruption like any other
    if live:
        terminal.stdout.write("\n")
    return ExitCode.OK
