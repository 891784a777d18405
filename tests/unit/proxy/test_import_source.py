"""``veil import`` reading its file: broken CSV files are refused up front with the line and what to do,
and nothing is written; files DuckDB can read in other encodings are read with ``--encoding``."""

from __future__ import annotations

import gzip
import re
from pathlib import Path

import duckdb
import pytest

from proxy.cli import main as cli
from proxy.cli.import_source import ENCODINGS, quiet
from proxy.cli.importer import import_table, plan_import
from proxy.config import TablePolicy, write_document
from proxy.errors import ConfigError


@pytest.fixture
def config_path(tmp_path: Path) -> Path:
    path = tmp_path / "veil.toml"
    write_document(path, {"datasets": {"clinic": {"backend": "duckdb", "path": "clinic.duckdb"}}})
    return path


def csv_file(tmp_path: Path, content: str | bytes, name: str = "people.csv") -> Path:
    path = tmp_path / name
    if isinstance(content, str):
        path.write_text(content, encoding="utf-8")
    else:
        path.write_bytes(content)
    return path


def load(config_path: Path, source: Path, *, encoding: str | None = None) -> TablePolicy:
    return import_table(
        config_path, dataset="clinic", table="people", source=source, privacy_unit="row", encoding=encoding
    )


def refused(config_path: Path, source: Path, *, encoding: str | None = None) -> ConfigError:
    """The refusal of importing ``source``, having checked that it left the policy and database as they were."""
    before = config_path.read_bytes()
    with pytest.raises(ConfigError) as raised:
        load(config_path, source, encoding=encoding)
    assert config_path.read_bytes() == before
    assert not (config_path.parent / "clinic.duckdb").exists()
    return raised.value


def rows(config_path: Path, sql: str) -> list[tuple[object, ...]]:
    with duckdb.connect(str(config_path.parent / "clinic.duckdb"), read_only=True) as connection:
        return connection.execute(sql).fetchall()


# --- quotes -----------------------------------------------------------------------------------------------


def test_refuses_a_quote_that_never_closes(config_path: Path, tmp_path: Path) -> None:
    error = refused(config_path, csv_file(tmp_path, 'id,name,age\n1,"ann,34\n2,bob,40\n'))
    assert error.message.endswith("people.csv: line 2 has a quote that never closes")
    assert error.detail == 'the line begins: 1,"ann,34'
    assert error.hint is not None and 'doubled ("")' in error.hint


def test_refuses_an_unclosed_quote_in_a_file_that_quotes_other_fields(
    config_path: Path, tmp_path: Path
) -> None:
    source = csv_file(tmp_path, 'id,note,n\n1,"a, b",3\n2,"ok",4\n3,"broken,5\n4,fine,6\n')
    assert refused(config_path, source).message.endswith("line 4 has a quote that never closes")


def test_refuses_an_unclosed_quote_past_the_rows_the_sniffer_samples(
    config_path: Path, tmp_path: Path
) -> None:
    lines = ["id,note", *(f"{i},x{i}" for i in range(30_000)), '30000,"unterminated', "30001,y"]
    source = csv_file(tmp_path, "\n".join(lines) + "\n")
    error = refused(config_path, source)
    assert error.message.endswith("line 30002 has a quote that never closes")
    assert error.detail == 'the line begins: 30000,"unterminated'


def test_refuses_an_unclosed_quote_in_a_one_column_file(config_path: Path, tmp_path: Path) -> None:
    error = refused(config_path, csv_file(tmp_path, 'note\n"abc\ndef\n'))
    assert error.message.endswith("line 2 has a quote that never closes")


def test_refuses_text_after_the_quote_that_closes_a_field(config_path: Path, tmp_path: Path) -> None:
    error = refused(config_path, csv_file(tmp_path, 'id,note\n1,"abc" def\n2,x\n'))
    assert error.message.endswith("people.csv: line 2 has text after the quote that closes a field")
    assert error.detail == 'the line begins: 1,"abc" def'


def test_a_quote_inside_a_field_is_an_ordinary_character(config_path: Path, tmp_path: Path) -> None:
    load(config_path, csv_file(tmp_path, "id,height\n1,5'11\"\n2,6'0\"\n"))
    assert rows(config_path, "SELECT height FROM people ORDER BY id") == [("5'11\"",), ("6'0\"",)]


def test_quoted_fields_keep_delimiters_quotes_and_line_breaks(config_path: Path, tmp_path: Path) -> None:
    load(config_path, csv_file(tmp_path, 'id,note\n1,"a, ""b"""\n2,"two\nlines"\n'))
    assert rows(config_path, "SELECT note FROM people ORDER BY id") == [('a, "b"',), ("two\nlines",)]


# --- empty files ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("content", [b"", b"\n\n", b"  \n"], ids=["no bytes", "blank lines", "white space"])
def test_refuses_an_empty_file(config_path: Path, tmp_path: Path, content: bytes) -> None:
    error = refused(config_path, csv_file(tmp_path, content))
    assert error.message.endswith("people.csv: the file is empty (not even a header line)")
    assert error.hint is not None and "header line" in error.hint


def test_refuses_an_empty_compressed_file(config_path: Path, tmp_path: Path) -> None:
    error = refused(config_path, csv_file(tmp_path, gzip.compress(b""), name="people.csv.gz"))
    assert "the file is empty" in error.message


def test_refuses_a_file_with_a_header_and_no_rows(config_path: Path, tmp_path: Path) -> None:
    error = refused(config_path, csv_file(tmp_path, "id,name\n"))
    assert error.message.endswith("people.csv: the file has a header line but no rows")


def test_a_file_without_a_header_line_is_refused_by_its_column_names(
    config_path: Path, tmp_path: Path
) -> None:
    error = refused(config_path, csv_file(tmp_path, "1,2\n3,4\n"))
    assert 'column "1" is not a valid column name' in error.message
    assert error.hint is not None and "first line must name its columns" in error.hint


# --- rows that do not fit -----------------------------------------------------------------------------------


def test_refuses_a_value_of_another_type_past_the_sample_before_creating_anything(
    config_path: Path, tmp_path: Path
) -> None:
    source = csv_file(tmp_path, "id,age\n" + "".join(f"{i},{i}\n" for i in range(30_000)) + "9,old\n")
    error = refused(config_path, source)
    assert error.message.endswith("people.csv: cannot be read as CSV")
    assert error.detail is not None
    assert error.detail.startswith('line 30002: Error when converting column "age"')


def test_refuses_a_line_with_too_many_fields(config_path: Path, tmp_path: Path) -> None:
    source = csv_file(tmp_path, "a,b\n" + "".join(f"{i},{i}\n" for i in range(30_000)) + "9,1,2\n")
    error = refused(config_path, source)
    assert error.detail == "line 30002: Expected Number of Columns: 2 Found: 3"
    assert error.hint is not None and "as many fields as the header" in error.hint


# --- encodings ----------------------------------------------------------------------------------------------

LATIN_1 = "id,city\n1,København\n2,Oslo\n".encode("latin-1")


def test_a_file_that_is_not_utf8_keeps_duckdbs_reason_and_says_what_to_do(
    config_path: Path, tmp_path: Path
) -> None:
    error = refused(config_path, csv_file(tmp_path, LATIN_1))
    assert error.message.endswith("people.csv: cannot be read as utf-8 text")
    assert error.detail is not None and "This file is not utf-8 encoded" in error.detail
    assert error.hint is not None
    assert "--encoding latin-1" in error.hint
    assert "iconv -f CP1252 -t UTF-8 people.csv > people.utf8.csv" in error.hint


def test_reads_a_latin1_file_with_its_encoding(config_path: Path, tmp_path: Path) -> None:
    load(config_path, csv_file(tmp_path, LATIN_1), encoding="latin-1")
    assert rows(config_path, "SELECT city FROM people ORDER BY id") == [("København",), ("Oslo",)]


def test_reads_a_utf16_file_with_its_encoding(config_path: Path, tmp_path: Path) -> None:
    load(config_path, csv_file(tmp_path, "id,city\n1,Bodø\n".encode("utf-16")), encoding="utf-16")
    assert rows(config_path, "SELECT city FROM people") == [("Bodø",)]


def test_reads_a_compressed_latin1_file(config_path: Path, tmp_path: Path) -> None:
    load(config_path, csv_file(tmp_path, gzip.compress(LATIN_1), name="people.csv.gz"), encoding="latin-1")
    assert rows(config_path, "SELECT count(*) FROM people") == [(2,)]


def test_a_windows_file_read_as_latin1_is_told_to_convert(config_path: Path, tmp_path: Path) -> None:
    source = csv_file(tmp_path, "id,price\n1,€5\n".encode("cp1252"))
    error = refused(config_path, source, encoding="latin-1")
    assert error.message.endswith("cannot be read as latin-1 text")
    assert error.hint is not None and error.hint.startswith("a Windows file is probably CP1252")


def test_refuses_an_encoding_duckdb_does_not_know(config_path: Path, tmp_path: Path) -> None:
    with pytest.raises(
        ConfigError, match=re.escape("--encoding 'cp1252': must be one of utf-8, utf-16, latin-1")
    ):
        load(config_path, csv_file(tmp_path, "id\n1\n"), encoding="cp1252")


def test_refuses_an_encoding_for_parquet(config_path: Path, tmp_path: Path) -> None:
    source = tmp_path / "people.parquet"
    with duckdb.connect() as connection:
        connection.execute(f"COPY (SELECT 1 AS id) TO '{source}' (FORMAT parquet)")
    with pytest.raises(ConfigError, match="--encoding applies to CSV files only"):
        plan_import(
            config_path,
            dataset="clinic",
            table="people",
            source=source,
            privacy_unit="row",
            encoding="latin-1",
        )


def test_the_command_line_offers_exactly_the_encodings_duckdb_reads() -> None:
    option = next(p for p in cli.import_command.params if p.name == "encoding")
    assert tuple(option.type.choices) == ENCODINGS  # type: ignore[attr-defined]


def test_reads_without_drawing_duckdbs_progress_bar_on_standard_output() -> None:
    """DuckDB draws it for a statement over 2 s even into a pipe, breaking `veil import --json > file`."""
    with quiet(duckdb.connect()) as connection:
        assert connection.execute("SELECT current_setting('enable_progress_bar')").fetchall() == [(False,)]
