"""Fuzzing the parsers with a small budget: only the documented errors may escape.

`parse_note` may raise NoteError and nothing else, and what it returns must
render safely and survive a merge's rewrite; `parse_config` may raise
RefusedError and nothing else; so may the `handover -F` parser. `make soak`
runs the same targets with a budget a hundred times larger.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings

from tests.support import properties
from tests.support.strategies import raw_notes, raw_profiles

FUZZ = settings(
    max_examples=80, deadline=None, suppress_health_check=list(HealthCheck), print_blob=True
)


@FUZZ
@given(raw_notes)
def test_note_parser_raises_only_note_error(data: bytes) -> None:
    properties.read_note(data)


@FUZZ
@given(raw_profiles)
def test_profile_parser_raises_only_refused_error(data: bytes) -> None:
    properties.read_profile(data)


@FUZZ
@given(raw_notes)
def test_handover_file_parser_raises_only_refused_error(data: bytes) -> None:
    properties.read_handover_file(data)
