"""The time by an AWS server's clock, from a response's ``Date`` header."""

from __future__ import annotations

from dispatcher.adapters.server_time import server_time


def test_the_date_header_to_the_end_of_its_second() -> None:
    """The header's whole second plus one (never sooner than the answer); None when there is none to read."""
    answer = {"ResponseMetadata": {"HTTPHeaders": {"date": "Sun, 29 Nov 2026 15:26:59 GMT"}}}
    assert server_time(answer) == 1795966019.0 + 1.0
    assert server_time({"ResponseMetadata": {"HTTPHeaders": {}}}) is None
    assert server_time({}) is None
    assert server_time({"ResponseMetadata": {"HTTPHeaders": {"date": "yesterday"}}}) is None
