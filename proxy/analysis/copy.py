"""``COPY (query) TO STDOUT`` and ``COPY table TO STDOUT``: the query is answered exactly as the same SELECT
would be (priced the same, refused the same), and its rows are sent in COPY format (proxy/wire/copy_out.py).

``COPY private_table TO`` would be every private row: refused, with the aggregate form as the hint. COPY FROM
(Veil is read-only) and COPY to or from a server file or program are refused too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from sqlglot import exp

from proxy.config import DatasetPolicy
from proxy.errors import InvalidParameterValueError, PolicyViolationError, UnsupportedQueryError

_FORMATS = {"text": "text", "csv": "csv"}
_TEXT_FORBIDDEN_DELIMITERS = frozenset("\\.abcdefghijklmnopqrstuvwxyz0123456789")
CopyFormat = Literal["text", "csv"]


@dataclass(frozen=True)
class CopyOptions:
    """``FORMAT``, ``HEADER`` (a line of column names, in either format since PostgreSQL 15) and
    ``DELIMITER`` of a COPY TO."""

    format: CopyFormat = "text"
    header: bool = False
    delimiter: str | None = None

    @property
    def separator(self) -> str:
        return self.delimiter if self.delimiter is not None else ("," if self.format == "csv" else "\t")


@dataclass(frozen=True)
class CopyStatement:
    """A COPY TO STDOUT: the ``query`` whose answer is copied, and how it is written."""

    query: exp.Query
    options: CopyOptions


def copy_statement(tree: exp.Copy, dataset: DatasetPolicy) -> CopyStatement:
    if tree.args.get("kind"):
        raise UnsupportedQueryError("COPY FROM is not supported", hint="Veil is read-only")
    files = tree.args.get("files") or []
    if len(files) != 1 or not isinstance(files[0], exp.Identifier) or files[0].name.upper() != "STDOUT":
        raise UnsupportedQueryError(
            "COPY TO a server file or program is not allowed",
            hint="COPY (…) TO STDOUT — in psql: \\copy (SELECT …) TO 'file.csv' CSV HEADER",
        )
    return CopyStatement(_query(tree.this, dataset), _options(tree.args.get("params") or []))


def _query(source: exp.Expression, dataset: DatasetPolicy) -> exp.Query:
    if isinstance(source, exp.Subquery) and isinstance(source.this, exp.Query):
        return source.this
    if isinstance(source, exp.Schema):  # COPY t (a, b) TO …
        table, columns = source.this, [column.copy() for column in source.expressions]
    else:
        table, columns = source, [exp.Star()]
    if not isinstance(table, exp.Table):
        raise UnsupportedQueryError("COPY needs a table or a parenthesized query")
    policy = dataset.table(table.name) if not table.db else None
    if policy is not None and not policy.public:
        raise PolicyViolationError(
            f'COPY {table.name} TO would reveal the private rows of "{table.name}"',
            hint=f"copy an aggregate: COPY (SELECT …, COUNT(*) FROM {table.name} GROUP BY …) TO STDOUT",
        )
    return exp.select(*columns).from_(table.copy())


def _options(params: list[exp.Expression]) -> CopyOptions:
    """``WITH (FORMAT csv, HEADER, DELIMITER ';')`` and the pre-9.0 forms psql's \\copy sends (``CSV HEADER``)."""
    found: dict[str, object] = {}
    delimiter_next = False
    previous = ""
    for param in params:
        name = param.this.name.lower() if param.this is not None else ""
        value = param.args.get("expression")
        if delimiter_next:  # legacy CSV DELIMITER ';': sqlglot makes ';' a parameter of its own
            found["delimiter"], delimiter_next = _delimiter(param.this), False
            if value is not None:
                _legacy(value, found)
        elif name == "csv":  # legacy: CSV [HEADER] — sqlglot reads the next word as CSV's value
            found["format"] = "csv"
            delimiter_next = value is not None and value.name.lower() == "delimiter"
            if value is not None and not delimiter_next:
                _legacy(value, found)
        elif name in ("binary",):
            raise UnsupportedQueryError("COPY in binary format is not supported", hint="FORMAT text or csv")
        elif name == "format":
            fmt = (value.name if value is not None else "").lower()
            if fmt not in _FORMATS:
                raise UnsupportedQueryError(
                    f"COPY format {fmt!r} is not supported", hint="FORMAT text or csv"
                )
            found["format"] = fmt
        elif name == "header":
            found["header"] = _boolean(value)
        elif name == "delimiter":
            found["delimiter"] = _delimiter(value)
        elif name == "on" and value is None and previous == "header":  # ON is a keyword: sqlglot splits
            found["header"] = True  # HEADER ON into two parameters
        else:
            _legacy(param.this, found)
        previous = name
    if delimiter_next:
        raise UnsupportedQueryError("COPY option DELIMITER needs a value", hint="e.g. CSV DELIMITER ';'")
    return _checked(CopyOptions(**found))  # type: ignore[arg-type]


def _checked(options: CopyOptions) -> CopyOptions:
    """The delimiters PostgreSQL refuses (``ProcessCopyOptions``), refused with its words: ones that could
    not be told from a line break, from the text format's escapes (``\\t``, ``\\.``) and values, or from
    CSV's quote."""
    separator = options.separator
    if separator in ("\n", "\r"):
        raise InvalidParameterValueError("COPY delimiter cannot be newline or carriage return")
    if options.format == "text" and separator in _TEXT_FORBIDDEN_DELIMITERS:
        raise InvalidParameterValueError(f'COPY delimiter cannot be "{separator}"')
    if options.format == "csv" and separator == '"':
        raise InvalidParameterValueError("COPY delimiter and quote must be different")
    return options


def _legacy(word: exp.Expression, found: dict[str, object]) -> None:
    """A word of the pre-9.0 option list after CSV (its DELIMITER is handled by :func:`_options`)."""
    if word.name.lower() == "header":
        found["header"] = True
    else:
        raise UnsupportedQueryError(
            f"COPY option {word.name!r} is not supported", hint="FORMAT text|csv, HEADER, DELIMITER 'x'"
        )


def _boolean(value: exp.Expression | None) -> bool:
    if value is None:
        return True
    if isinstance(value, exp.Boolean):
        return bool(value.this)
    text = value.name.lower()
    if text in ("true", "on", "1"):
        return True
    if text in ("false", "off", "0"):
        return False
    raise UnsupportedQueryError(f"HEADER {value.name!r} is not supported", hint="HEADER true or false")


def _delimiter(value: exp.Expression | None) -> str:
    text = value.name if value is not None else ""
    if len(text.encode("utf-8")) != 1:  # one byte: 'é' is two
        raise UnsupportedQueryError("COPY delimiter must be a single one-byte character")
    return text
