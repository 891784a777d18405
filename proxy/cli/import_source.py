"""The file ``veil import`` reads: its format, CSV dialect and encoding, its columns, and the checks that
refuse a broken file before anything is written.

DuckDB reads every file, in a scratch in-memory database. A CSV file is sniffed (delimiter, quoting,
column types) and then read with a header line always: Veil needs column names for the policy, and a
file without a header line fails the column-name check at once instead of importing its first row as
names — or, worse, its header as a row.

DuckDB's sniffer gives up quoting altogether when a quote never closes (``1,"ann,34``): it then reads
the quote as an ordinary character, and the file is imported with the broken field cut in two or its
whole lines as one column. So when the sniffer finds no quoting, the file is read with standard CSV
quoting (RFC 4180: ``"`` quotes a field, ``""`` inside it is one quote) — a quote that does not open a
field (``5'11"``) is still an ordinary character — and any failure is checked for a quote that never
closes, so that the error names its line. The whole file is read once (every column) before anything
is created, so a value that does not fit its detected type, or a quote that never closes, on line
30,000 is refused up front.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

import duckdb

from proxy.errors import ConfigError

CSV = "CSV"
PARQUET = "Parquet"
CSV_SUFFIXES = (".csv", ".tsv", ".txt")
COMPRESSION_SUFFIXES = ("", ".gz", ".zst")
PARQUET_SUFFIXES = (".parquet", ".pq")
ENCODINGS = ("utf-8", "utf-16", "latin-1")  # what DuckDB's CSV reader decodes without an extension
DEFAULT_ENCODING = "utf-8"

_NO_QUOTE = "(empty)"  # how sniff_csv reports "no quoting"
_DELIMITERS = (",", ";", "\t", "|")  # the sniffer's candidates
_WHOLE_LINE = "\x1f\x1e"  # a delimiter no text line contains: each line is read as one field
_MAX_DIAGNOSIS_COLUMNS = 4096
_LINE = re.compile(r"CSV Error on Line: (\d+)")
_REASONS = (  # the line of a DuckDB CSV error that says what is wrong
    "unterminated quote",
    "encoded",
    "Invalid unicode",
    "Expected Number of Columns",
    "Error when converting",
    "Could not convert",
)
_EMPTY_HINT = (
    "check that this is the file you meant: a CSV file needs a header line naming its columns, then rows"
)
_QUOTE_HINT = (
    "a field that starts with a quote ends at the next lone quote, right before the delimiter or the line's "
    "end: write a field that contains the delimiter, a quote or a line break whole in double quotes, each "
    'quote inside it doubled ("")'
)


def quiet(connection: duckdb.DuckDBPyConnection) -> duckdb.DuckDBPyConnection:
    """The connection, without the progress bar DuckDB draws on standard output for a statement over 2 s
    (even into a pipe, where it would break ``veil import --json > plan.json`` on a large file)."""
    connection.execute("SET enable_progress_bar = false")
    return connection


def quote_identifier(name: str) -> str:
    """Quote any text as a DuckDB identifier (double quotes, inner quotes doubled)."""
    return '"' + name.replace('"', '""') + '"'


@dataclass(frozen=True)
class SourceFile:
    """A file to import and how to read it: ``options`` are the ``read_csv`` options chosen after
    sniffing (empty for Parquet, or when DuckDB's own detection is kept)."""

    path: Path
    format: str
    encoding: str | None = None
    delimiter: str | None = None
    options: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))

    def reader(self) -> tuple[str, list[object]]:
        """The FROM item reading the file, and its parameters (bound, never interpolated)."""
        if self.format == PARQUET:
            files = self.path / "**" / "*.parquet" if self.path.is_dir() else self.path
            return "read_parquet($1)", [str(files)]
        arguments = ["header = true", "encoding = $2"]
        parameters: list[object] = [str(self.path), self.encoding]
        for position, (name, value) in enumerate(self.options.items(), start=3):
            arguments.append(f"{name} = ${position}")
            parameters.append(value)
        return f"read_csv($1, {', '.join(arguments)})", parameters


@dataclass(frozen=True)
class SourceSummary:
    """What the full read found: the number of rows and, per column asked for, its least and greatest
    value (None for a column with only NULLs)."""

    rows: int
    ranges: Mapping[str, tuple[object, object] | None]


def open_source(connection: duckdb.DuckDBPyConnection, path: Path, *, encoding: str | None) -> SourceFile:
    """Tell the format from the extension and, for a CSV file, settle the dialect to read it with. A
    directory is read as the Parquet files in it (a Spark or Hive-style table directory)."""
    if path.is_dir():
        if encoding is not None:
            raise ConfigError(
                "--encoding applies to CSV files only", detail="a Parquet file stores its text as UTF-8"
            )
        if not any(path.rglob("*.parquet")):
            raise ConfigError(
                f"{path}: the directory holds no .parquet file",
                hint="give a CSV or Parquet file, or a directory of Parquet files",
            )
        return SourceFile(path, PARQUET)
    file_format = _format(path)
    if not path.is_file():
        raise ConfigError(f"{path}: no such file")
    if file_format == PARQUET:
        if encoding is not None:
            raise ConfigError(
                "--encoding applies to CSV files only", detail="a Parquet file stores its text as UTF-8"
            )
        return SourceFile(path, PARQUET)
    chosen = (encoding or DEFAULT_ENCODING).lower()
    if chosen not in ENCODINGS:
        raise ConfigError(f"--encoding {encoding!r}: must be one of {', '.join(ENCODINGS)}")
    detected = SourceFile(path, CSV, chosen)
    try:
        row = connection.execute(
            "SELECT Delimiter, Quote FROM sniff_csv($1, header = true, encoding = $2)", [str(path), chosen]
        ).fetchone()
    except duckdb.Error as error:
        raise unreadable(connection, detected, error) from None
    assert row is not None
    delimiter, quote = str(row[0]), str(row[1])
    if quote != _NO_QUOTE:
        return SourceFile(path, CSV, chosen, delimiter)
    standard = {"delim": delimiter, "quote": '"', "escape": '"'}
    return SourceFile(path, CSV, chosen, delimiter, MappingProxyType(standard))


def describe(connection: duckdb.DuckDBPyConnection, source: SourceFile) -> list[tuple[str, str]]:
    """The file's columns as (name, DuckDB type), in file order."""
    reader, parameters = source.reader()
    try:
        described = connection.execute(f"DESCRIBE SELECT * FROM {reader}", parameters).fetchall()
    except duckdb.Error as error:
        raise unreadable(connection, source, error) from None
    columns = [(str(row[0]), str(row[1])) for row in described]
    if source.format == CSV and len(columns) == 1 and any(d in columns[0][0] for d in _DELIMITERS):
        raise _unsplit(connection, source, columns[0][0])
    return columns


def summarize(
    connection: duckdb.DuckDBPyConnection,
    source: SourceFile,
    *,
    columns: Sequence[str],
    ranges: Sequence[str] = (),
) -> SourceSummary:
    """Read every value of every column once (so that a bad value anywhere is refused before anything
    is written), counting the rows and taking the least and greatest value of the ``ranges`` columns."""
    reader, parameters = source.reader()
    items = ["count(*)"]
    items += [f"count({quote_identifier(name)})" for name in columns]
    for name in ranges:
        items += [f"min({quote_identifier(name)})", f"max({quote_identifier(name)})"]
    try:
        row = connection.execute(f"SELECT {', '.join(items)} FROM {reader}", parameters).fetchone()
    except duckdb.Error as error:
        raise unreadable(connection, source, error) from None
    assert row is not None
    found = row[1 + len(columns) :]
    bounds: dict[str, tuple[object, object] | None] = {}
    for index, name in enumerate(ranges):
        low, high = found[2 * index], found[2 * index + 1]
        bounds[name] = None if low is None else (low, high)
    return SourceSummary(int(row[0]), MappingProxyType(bounds))


def require_rows(connection: duckdb.DuckDBPyConnection, source: SourceFile) -> None:
    """Refuse a CSV file without rows: nothing tells its columns' types (DuckDB would make every column
    text, or invent one column for a file without even a header line), and an empty table is rarely
    what was meant."""
    if _is_blank(connection, source):
        raise _empty(source)
    reader, parameters = source.reader()
    try:
        row = connection.execute(f"SELECT 1 FROM {reader} LIMIT 1", parameters).fetchone()
    except duckdb.Error as error:
        raise unreadable(connection, source, error) from None
    if row is not None:
        return
    raise ConfigError(f"{source.path}: the file has a header line but no rows", hint=_EMPTY_HINT)


def unreadable(connection: duckdb.DuckDBPyConnection, source: SourceFile, error: duckdb.Error) -> ConfigError:
    """The refusal for a file DuckDB could not read, naming the line and saying what to do."""
    text = str(error)
    if source.format == CSV and not _is_encoding_error(text) and "unterminated quote" not in text:
        if _is_blank(connection, source):
            return _empty(source)
        text = _unclosed_quote(connection, source) or text
    return _refusal(source, text)


def _empty(source: SourceFile) -> ConfigError:
    return ConfigError(f"{source.path}: the file is empty (not even a header line)", hint=_EMPTY_HINT)


def _format(path: Path) -> str:
    name = path.name.lower()
    if any(name.endswith(csv + packed) for csv in CSV_SUFFIXES for packed in COMPRESSION_SUFFIXES):
        return CSV
    if name.endswith(PARQUET_SUFFIXES):
        return PARQUET
    raise ConfigError(
        f"{path}: cannot tell the file format from its extension",
        hint="name CSV files .csv, .tsv or .txt (optionally .gz or .zst) and Parquet files .parquet or .pq",
    )


def _unsplit(connection: duckdb.DuckDBPyConnection, source: SourceFile, header: str) -> ConfigError:
    """A CSV file read as a single column whose name holds a delimiter: its lines did not split."""
    quote = _unclosed_quote(connection, source)
    if quote is not None:
        return _refusal(source, quote)
    return ConfigError(
        f"{source.path}: DuckDB could not split its lines into columns",
        detail=f"the header line was read as one column, {header!r}",
        hint="every line needs as many fields as the header, separated by , ; tab or |, and every quote "
        "that opens a field must close",
    )


def _whole_lines(source: SourceFile) -> tuple[str, list[object]]:
    """The FROM item reading each line of a text file as one field, whatever its quotes and delimiters."""
    return (
        f"read_csv($1, auto_detect = false, header = false, delim = '{_WHOLE_LINE}', quote = '', escape = '',"
        " columns = {'line': 'VARCHAR'}, strict_mode = false, encoding = $2)",
        [str(source.path), source.encoding or DEFAULT_ENCODING],
    )


def _is_blank(connection: duckdb.DuckDBPyConnection, source: SourceFile) -> bool:
    """Whether no line of the file holds anything but white space (False when its lines cannot be read)."""
    reader, parameters = _whole_lines(source)
    try:
        row = connection.execute(
            f"SELECT 1 FROM {reader} WHERE trim(line) <> '' LIMIT 1", parameters
        ).fetchone()
    except duckdb.Error:
        return False
    return row is None


def _unclosed_quote(connection: duckdb.DuckDBPyConnection, source: SourceFile) -> str | None:
    """DuckDB's error for the first quote that opens a field and never closes, or None.

    The file is read with standard quoting and every field as text, once per candidate delimiter (the
    sniffed one first), with room for as many fields as any line has, so that nothing but the quoting
    can fail."""
    encoding = source.encoding or DEFAULT_ENCODING
    delimiters = tuple(dict.fromkeys((source.delimiter or ",", *_DELIMITERS)))
    counts = ", ".join(
        f"max(length(line) - length(replace(line, ${index}, '')))" for index in range(3, 3 + len(delimiters))
    )
    reader, parameters = _whole_lines(source)
    try:
        row = connection.execute(f"SELECT {counts} FROM {reader}", [*parameters, *delimiters]).fetchone()
    except duckdb.Error:
        return None
    if row is None:
        return None
    for delimiter, most in zip(delimiters, row, strict=True):
        width = int(most or 0) + 1
        if width > _MAX_DIAGNOSIS_COLUMNS:
            continue
        columns = {f"c{index}": "VARCHAR" for index in range(width)}
        try:
            connection.execute(
                "SELECT count(*) FROM read_csv($1, auto_detect = false, header = false, delim = $2,"
                " quote = '\"', escape = '\"', strict_mode = true, null_padding = true, columns = $3,"
                " encoding = $4)",
                [str(source.path), delimiter, columns, encoding],
            ).fetchall()
        except duckdb.Error as error:
            if "unterminated quote" in str(error):
                return str(error)
    return None


def _is_encoding_error(text: str) -> bool:
    return "encoded" in text or "Invalid unicode" in text


def _refusal(source: SourceFile, text: str) -> ConfigError:
    path, line = source.path, _error_line(text)
    where = f"line {line}: " if line is not None else ""
    reason = where + _reason(text)
    if "unterminated quote" in text:
        return _quote_refusal(path, line, _original_line(text), reason)
    if _is_encoding_error(text):
        return ConfigError(
            f"{path}: cannot be read as {source.encoding or DEFAULT_ENCODING} text",
            detail=reason,
            hint=_encoding_hint(source),
        )
    return ConfigError(f"{path}: cannot be read as {source.format}", detail=reason, hint=_hint(source, text))


def _quote_refusal(path: Path, line: int | None, original: str, reason: str) -> ConfigError:
    """DuckDB says "unterminated quote" both for a quote that never closes and for text after a closing
    quote (``1,"abc" def``); an even number of quotes on the line tells the second."""
    where = f"line {line}" if line is not None else "a line"
    if original and original.count('"') % 2 == 0:
        problem = f"{where} has text after the quote that closes a field"
    else:
        problem = f"{where} has a quote that never closes"
    begins = original if len(original) <= 60 else original[:57] + "..."
    return ConfigError(
        f"{path}: {problem}", detail=f"the line begins: {begins}" if begins else reason, hint=_QUOTE_HINT
    )


def _encoding_hint(source: SourceFile) -> str:
    path = source.path
    convert = f"iconv -f CP1252 -t UTF-8 {path.name} > {path.stem}.utf8{path.suffix}"
    if source.encoding == "latin-1":
        return f"a Windows file is probably CP1252 (bytes 0x80-0x9F are not Latin-1): convert it first, {convert}"
    return (
        "if the file is Latin-1 (ISO-8859-1) pass --encoding latin-1, if it is UTF-16 --encoding utf-16; "
        f"for another encoding convert it to UTF-8 first, e.g. from Windows' CP1252: {convert}"
    )


def _hint(source: SourceFile, text: str) -> str:
    if source.format == PARQUET:
        return "check that the file is a complete Parquet file (not truncated, not another format)"
    if "Expected Number of Columns" in text:
        return "every line needs as many fields as the header; quote a field that contains the delimiter"
    if "convert" in text:
        return (
            "a column's type is detected from a sample of the first rows; fix the value in the file, or make "
            "the column text by quoting its values consistently"
        )
    return "check the file's delimiter, quoting and encoding"


def _error_line(text: str) -> int | None:
    found = _LINE.search(text)
    return int(found.group(1)) if found else None


def _reason(text: str) -> str:
    """The line of DuckDB's message that says what is wrong (not the file's text, not its advice)."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    for line in lines[1:]:
        if not line.startswith("Original Line:") and any(reason in line for reason in _REASONS):
            return line
    first = lines[0] if lines else "unknown error"
    return _LINE.sub("", first).rstrip(": ") or first


def _original_line(text: str) -> str:
    for line in text.splitlines():
        if line.startswith("Original Line:"):
            return line.removeprefix("Original Line:").strip()
    return ""
