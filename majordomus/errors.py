"""Exit codes and the one exception family the core raises."""

from __future__ import annotations

import enum


class ExitCode(enum.IntEnum):
    OK = 0
    NEGATIVE = 1  # stale, no open handover, unhealthy
    REFUSED = 2  # bad input: caps, missing fields, unknown task, bad profile
    REPOSITORY = 3  # not a repository, no commit, unreadable notes ref, lock held
    REMOTE = 4  # fetch or push failed


class MajordomusError(Exception):
    """An expected failure: one sentence for stderr and the exit code it maps to."""

    code: ExitCode = ExitCode.REPOSITORY

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class RefusedError(MajordomusError):
    code = ExitCode.REFUSED


class RepositoryError(MajordomusError):
    code = ExitCode.REPOSITORY


class RemoteError(MajordomusError):
    code = ExitCode.REMOTE
