"""COPY … TO STDOUT and nothing else (analysis/copy.py): a COPY to a file that happens to be named
``'stdout'``, or to two targets or none is refused as a COPY to a server file (not accepted, and not an
internal error); and legacy options that end in a bare DELIMITER say that it needs a value."""

from __future__ import annotations

import pytest

from proxy.errors import UnsupportedQueryError
from tests.unit.proxy.test_mutants_anD_copy import FILE_HINT, refusal


@pytest.mark.parametrize(
    "sql",
    [
        "COPY zones TO 'stdout'",  # a file named stdout, not the client's stream
        "COPY zones TO STDOUT, STDOUT",
        "COPY (SELECT code FROM zones) TO",
    ],
)
def test_copy_to_anything_but_one_stdout_is_refused(sql: str) -> None:
    error = refusal(UnsupportedQueryError, sql)
    assert (error.sqlstate, error.message, error.hint) == (
        "0A000",
        "COPY TO a server file or program is not allowed",
        FILE_HINT,
    )


@pytest.mark.parametrize(
    "sql",
    ["COPY zones TO STDOUT CSV DELIMITER", "COPY (SELECT code FROM zones) TO STDOUT WITH CSV DELIMITER"],
)
def test_a_legacy_delimiter_without_a_value_is_refused_saying_so(sql: str) -> None:
    error = refusal(UnsupportedQueryError, sql)
    assert (error.message, error.hint) == ("COPY option DELIMITER needs a value", "e.g. CSV DELIMITER ';'")
