"""The table an anonymization reads, in the engine that holds it: a DuckDB file, a PostgreSQL table, a
Spark dataset's table (a view in a Spark session: local or Spark Connect), or a CSV/Parquet file read
through an in-memory DuckDB.

Why a source object rather than a DataFrame: the optimal global recoding only needs *frequency sets*
(``GROUP BY`` the quasi-identifiers with ``COUNT(*)``), which the engine computes far faster and in far less
memory than Python — a 10-million-row table never leaves the engine. Rows come back to Python only when an
algorithm needs them (Mondrian, combined de-identification) through :meth:`TableSource.dataframe`.

SQL is built from sqlglot nodes with quoted identifiers; user values never enter SQL text — lookup tables
(hierarchy mappings) are *registered* (DuckDB), loaded with ``COPY`` into temporary tables (PostgreSQL)
or sent as Arrow into temporary views (Spark), and file paths go through DuckDB's relation API.

The Spark session is given, never made here: starting one (a local JVM or a Spark Connect client, with
the dataset's settings) is the caller's business, and anonymizers/ knows nothing of the policy.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, Protocol

import duckdb
import numpy as np
import pandas as pd
import psycopg
from psycopg import sql as pgsql
from sqlglot import exp

from anonymizers.errors import AnonymizationError

Dialect = Literal["duckdb", "postgres", "spark"]
FileFormat = Literal["csv", "parquet"]
CSV_VIEW = "veil_source"
ROW_ID = "veil_row"
_DICTIONARY = "veil_codes_{}"
_BATCH_VECTORS = 8  # DuckDB vectors (2,048 rows each) per fetched batch: larger batches cost memory, not time


def code_dtype(highest: int) -> np.dtype:
    """The smallest signed integer type that holds the codes 0..highest (int8 for up to 128 distinct values)."""
    return np.min_scalar_type(-highest - 1)


def quoted_table(name: str, schema: str | None = None) -> exp.Table:
    """A table reference with quoted parts: ``"schema"."name"``."""
    return exp.table_(name, db=schema, quoted=True)


def quoted_column(name: str, table: str | None = None) -> exp.Column:
    return exp.column(name, table=table, quoted=True)


def as_text(expression: exp.Expression) -> exp.Cast:
    """``CAST(x AS VARCHAR)``: how a column's values meet hierarchy leaves (which are text)."""
    return exp.cast(expression, exp.DataType.build("VARCHAR"))


class _Engine(Protocol):
    dialect: Dialect

    def rows(self, query: exp.Expression) -> list[tuple[Any, ...]]: ...

    def arrays(self, query: exp.Expression) -> dict[str, np.ndarray]: ...

    def frame(self, query: exp.Expression) -> pd.DataFrame: ...

    def batches(self, query: exp.Expression) -> Iterator[pd.DataFrame]: ...

    def register(self, name: str, frame: pd.DataFrame) -> None: ...

    def unregister(self, name: str) -> None: ...

    def run(self, statements: list[exp.Expression]) -> None: ...

    def write_file(self, query: exp.Expression, path: Path, file_format: FileFormat) -> None: ...

    def close(self) -> None: ...


class _DuckDB:
    dialect: Dialect = "duckdb"

    def __init__(self, connection: duckdb.DuckDBPyConnection) -> None:
        self.connection = connection

    def rows(self, query: exp.Expression) -> list[tuple[Any, ...]]:
        return self.connection.execute(query.sql(dialect="duckdb")).fetchall()

    def arrays(self, query: exp.Expression) -> dict[str, np.ndarray]:
        result = self.connection.execute(query.sql(dialect="duckdb")).fetchnumpy()
        return {name: np.asarray(values) for name, values in result.items()}

    def frame(self, query: exp.Expression) -> pd.DataFrame:
        return self.connection.execute(query.sql(dialect="duckdb")).df()

    def batches(self, query: exp.Expression) -> Iterator[pd.DataFrame]:
        """The result in chunks of about half a million rows, read to the end (DuckDB refuses other work
        on a connection with an unfinished result)."""
        self.connection.execute(query.sql(dialect="duckdb"))
        while len(chunk := self.connection.fetch_df_chunk(_BATCH_VECTORS)):
            yield chunk

    def register(self, name: str, frame: pd.DataFrame) -> None:
        self.connection.register(name, frame)

    def unregister(self, name: str) -> None:
        self.connection.unregister(name)

    def run(self, statements: list[exp.Expression]) -> None:
        self.connection.execute("BEGIN TRANSACTION")
        try:
            for statement in statements:
                self.connection.execute(statement.sql(dialect="duckdb"))
        except duckdb.Error:
            self.connection.execute("ROLLBACK")
            raise
        self.connection.execute("COMMIT")

    def write_file(self, query: exp.Expression, path: Path, file_format: FileFormat) -> None:
        """DuckDB's own writers (``COPY … TO``) through the relation API: the path is an argument, not
        SQL text, and rows never enter Python."""
        relation = self.connection.sql(query.sql(dialect="duckdb"))
        if file_format == "csv":
            relation.write_csv(str(path), header=True)
        else:
            relation.write_parquet(str(path))

    def close(self) -> None:
        self.connection.close()


class _Postgres:
    dialect: Dialect = "postgres"

    def __init__(self, connection: psycopg.Connection[Any]) -> None:
        self.connection = connection

    def rows(self, query: exp.Expression) -> list[tuple[Any, ...]]:
        return self.connection.execute(query.sql(dialect="postgres")).fetchall()  # type: ignore[call-overload,no-any-return]

    def arrays(self, query: exp.Expression) -> dict[str, np.ndarray]:
        frame = self.frame(query)
        return {name: frame[name].to_numpy() for name in frame.columns}

    def frame(self, query: exp.Expression) -> pd.DataFrame:
        cursor = self.connection.execute(query.sql(dialect="postgres"))  # type: ignore[call-overload]
        names = [column.name for column in cursor.description or ()]
        return pd.DataFrame(cursor.fetchall(), columns=names)

    def batches(self, query: exp.Expression) -> Iterator[pd.DataFrame]:
        """A server-side cursor read in chunks: the whole result never sits in the client."""
        with self.connection.transaction(), self.connection.cursor(name="veil_batches") as cursor:
            cursor.execute(query.sql(dialect="postgres"))  # type: ignore[call-overload]
            names = [column.name for column in cursor.description or ()]
            while rows := cursor.fetchmany(_BATCH_VECTORS * 2048):
                yield pd.DataFrame(rows, columns=names)

    def register(self, name: str, frame: pd.DataFrame) -> None:
        """A temporary table loaded with COPY: values never become SQL text."""
        types = [_postgres_type(frame[column]) for column in frame.columns]
        columns = pgsql.SQL(", ").join(
            pgsql.SQL("{} {}").format(pgsql.Identifier(str(c)), pgsql.SQL(t))
            for c, t in zip(frame.columns, types, strict=True)
        )
        self.connection.execute(pgsql.SQL("DROP TABLE IF EXISTS {}").format(pgsql.Identifier(name)))
        self.connection.execute(
            pgsql.SQL("CREATE TEMPORARY TABLE {} ({})").format(pgsql.Identifier(name), columns)
        )
        copy = pgsql.SQL("COPY {} FROM STDIN").format(pgsql.Identifier(name))
        with self.connection.cursor().copy(copy) as sink:
            for row in frame.itertuples(index=False, name=None):
                sink.write_row(tuple(_plain(v) for v in row))

    def unregister(self, name: str) -> None:
        self.connection.execute(pgsql.SQL("DROP TABLE IF EXISTS {}").format(pgsql.Identifier(name)))

    def run(self, statements: list[exp.Expression]) -> None:
        with self.connection.transaction():
            for statement in statements:
                self.connection.execute(statement.sql(dialect="postgres"))  # type: ignore[call-overload]

    def write_file(self, query: exp.Expression, path: Path, file_format: FileFormat) -> None:
        """``COPY (query) TO STDOUT`` streamed to a CSV file as bytes; Parquet is written by an
        in-memory DuckDB from that CSV (column types are re-inferred by DuckDB's sniffer)."""
        copy = pgsql.SQL("COPY ({}) TO STDOUT WITH (FORMAT csv, HEADER true)").format(
            pgsql.SQL(query.sql(dialect="postgres"))  # type: ignore[arg-type]
        )
        target = path if file_format == "csv" else path.with_name(path.name + ".csv")
        with target.open("wb") as sink, self.connection.cursor().copy(copy) as stream:
            for block in stream:
                sink.write(block)
        if file_format == "parquet":
            with duckdb.connect() as local:
                local.read_csv(str(target), header=True).write_parquet(str(path))
            target.unlink()

    def close(self) -> None:
        self.connection.close()


class SparkEngineError(Exception):
    """A failure inside Spark under one name: pyspark raises many types (classic, Spark Connect, py4j),
    and the commands that read a table turn this one into a line of text, as they do DuckDB's errors."""


@contextmanager
def _spark_errors() -> Iterator[None]:
    from py4j.protocol import Py4JError
    from pyspark.errors import PySparkException

    try:
        yield
    except (PySparkException, Py4JError) as error:
        text = str(error).strip()
        raise SparkEngineError(text.splitlines()[0] if text else type(error).__name__) from None


_SPARK_TYPES = {  # Spark's simple type names → the DuckDB names the commands read (numbers, times)
    "tinyint": "TINYINT",
    "smallint": "SMALLINT",
    "int": "INTEGER",
    "bigint": "BIGINT",
    "float": "FLOAT",
    "double": "DOUBLE",
    "boolean": "BOOLEAN",
    "string": "VARCHAR",
    "date": "DATE",
    "timestamp": "TIMESTAMP WITH TIME ZONE",
    "timestamp_ntz": "TIMESTAMP",
}


class _Spark:
    """A view in a Spark session (``pyspark.sql.SparkSession``, classic or Spark Connect). Results come
    back as Arrow (``DataFrame.toArrow``): column by column, without a Python object per value."""

    dialect: Dialect = "spark"

    def __init__(self, session: Any) -> None:
        self.session = session
        self.views: set[str] = set()

    def _arrow(self, query: exp.Expression) -> Any:
        with _spark_errors():
            return self.session.sql(query.sql(dialect="spark")).toArrow()

    def rows(self, query: exp.Expression) -> list[tuple[Any, ...]]:
        with _spark_errors():
            return [tuple(row) for row in self.session.sql(query.sql(dialect="spark")).collect()]

    def arrays(self, query: exp.Expression) -> dict[str, np.ndarray]:
        table = self._arrow(query)
        return {name: table.column(name).to_numpy() for name in table.column_names}

    def frame(self, query: exp.Expression) -> pd.DataFrame:
        return self._arrow(query).to_pandas()  # type: ignore[no-any-return]

    def batches(self, query: exp.Expression) -> Iterator[pd.DataFrame]:
        """One batch: the driver holds the whole answer as Arrow anyway (codes are one to eight bytes)."""
        yield self.frame(query)

    def columns(self, table: exp.Table) -> list[tuple[str, str]]:
        with _spark_errors():
            fields = self.session.table(table.sql(dialect="spark")).schema.fields
        return [(f.name, _spark_type(f.dataType.simpleString())) for f in fields]

    def register(self, name: str, frame: pd.DataFrame) -> None:
        """A temporary view of the frame, sent as Arrow: values never become SQL text."""
        import pyarrow as pa

        with _spark_errors():
            arrow = pa.Table.from_pandas(frame, preserve_index=False)
            self.session.createDataFrame(arrow).createOrReplaceTempView(name)
        self.views.add(name)

    def unregister(self, name: str) -> None:
        with _spark_errors():
            self.session.catalog.dropTempView(name)
        self.views.discard(name)

    def run(self, statements: list[exp.Expression]) -> None:
        raise AnonymizationError(
            "Veil writes no tables into a Spark dataset", hint="write --out PATH.parquet instead"
        )

    def write_file(self, query: exp.Expression, path: Path, file_format: FileFormat) -> None:
        """The answer collected as Arrow and written by DuckDB's writers, as from a DuckDB source: Spark
        itself writes a directory of part files, and a Spark Connect server writes on the cluster's
        disks, not on the machine that runs the command."""
        arrow = self._arrow(query)
        with duckdb.connect() as local:
            relation = local.from_arrow(arrow)
            if file_format == "csv":
                relation.write_csv(str(path), header=True)
            else:
                relation.write_parquet(str(path))

    def close(self) -> None:
        """Drop the views this source made; the session (and its JVM or connection) stays its owner's."""
        for name in list(self.views):
            self.unregister(name)


def _spark_type(simple: str) -> str:
    return _SPARK_TYPES.get(simple, simple.upper())


def _postgres_type(series: pd.Series) -> str:
    if pd.api.types.is_integer_dtype(series):
        return "bigint"
    if pd.api.types.is_float_dtype(series):
        return "double precision"
    return "text"


def _plain(value: object) -> object:
    """numpy scalars → Python scalars for psycopg's COPY writer."""
    return value.item() if isinstance(value, np.generic) else value


@dataclass
class TableSource:
    """One table in one engine. Use the constructors :meth:`duckdb_file`, :meth:`postgres`, :meth:`csv`,
    :meth:`parquet`; close it (or use ``with``) when done."""

    engine: _Engine
    table: exp.Table
    description: str
    in_memory: bool = False  # a CSV/Parquet file: no database to write tables into

    @classmethod
    def duckdb_file(
        cls, path: Path, table: str, *, schema: str | None = None, memory_limit: str | None = None
    ) -> TableSource:
        """A table in a DuckDB database file. ``memory_limit`` (e.g. ``"1GB"``) caps the engine so that
        a large ``GROUP BY`` spills to disk instead of growing the process."""
        if not Path(path).exists():
            raise AnonymizationError(f"DuckDB file {path} does not exist")
        config = {} if memory_limit is None else {"memory_limit": memory_limit}
        connection = duckdb.connect(str(path), config=config)
        source = cls(_DuckDB(connection), quoted_table(table, schema), f"{path}:{table}")
        source._require_table()
        return source

    @classmethod
    def postgres(cls, dsn: str, table: str, *, schema: str = "public") -> TableSource:
        try:
            connection = psycopg.connect(dsn, autocommit=True)
        except psycopg.OperationalError as error:
            raise AnonymizationError(
                "cannot connect to PostgreSQL", hint=f"check the connection string ({type(error).__name__})"
            ) from None
        source = cls(_Postgres(connection), quoted_table(table, schema), f"{schema}.{table}")
        source._require_table()
        return source

    @classmethod
    def csv(cls, path: Path, *, delimiter: str | None = None, header: bool = True) -> TableSource:
        """A CSV file read by DuckDB's sniffer; ``delimiter`` overrides its guess (``";"`` for ARX's
        files, ``", "`` for UCI Adult)."""
        connection = duckdb.connect()
        options: dict[str, Any] = {"header": header}
        if delimiter is not None:
            options["sep"] = delimiter
        try:
            connection.read_csv(str(path), **options).create_view(CSV_VIEW)
        except (duckdb.IOException, duckdb.InvalidInputException) as error:
            raise AnonymizationError(
                f"cannot read CSV file {path}", hint=str(error).splitlines()[0]
            ) from None
        return cls(_DuckDB(connection), quoted_table(CSV_VIEW), str(path), in_memory=True)

    @classmethod
    def parquet(cls, path: Path) -> TableSource:
        connection = duckdb.connect()
        try:
            connection.read_parquet(str(path)).create_view(CSV_VIEW)
        except (duckdb.IOException, duckdb.InvalidInputException) as error:
            raise AnonymizationError(
                f"cannot read Parquet file {path}", hint=str(error).splitlines()[0]
            ) from None
        return cls(_DuckDB(connection), quoted_table(CSV_VIEW), str(path), in_memory=True)

    @classmethod
    def spark(cls, session: Any, view: str, *, description: str) -> TableSource:
        """Temporary view ``view`` of a Spark session (classic or Spark Connect) that the caller made
        and registered; the view is dropped on close, the session is left running for its owner."""
        engine = _Spark(session)
        engine.views.add(view)
        source = cls(engine, quoted_table(view), description)
        source._require_table()
        return source

    @property
    def dialect(self) -> Dialect:
        return self.engine.dialect

    def _require_table(self) -> None:
        try:
            self.columns()
        except (duckdb.Error, psycopg.Error, SparkEngineError):
            self.close()
            raise AnonymizationError(
                f"table {self.description} does not exist", hint="check the table and schema names"
            ) from None

    def columns(self) -> list[tuple[str, str]]:
        """(name, engine type) of every column, in table order."""
        if self.dialect == "duckdb":
            query = exp.Describe(this=exp.select(exp.Star()).from_(self.table))
            return [(row[0], row[1]) for row in self.engine.rows(query)]
        if isinstance(self.engine, _Spark):
            return self.engine.columns(self.table)
        assert isinstance(self.engine, _Postgres)
        cursor = self.engine.connection.execute(
            "SELECT column_name, data_type FROM information_schema.columns"
            " WHERE table_schema = %s AND table_name = %s ORDER BY ordinal_position",
            (self.table.db, self.table.name),
        )
        rows = cursor.fetchall()
        if not rows:
            raise psycopg.errors.UndefinedTable(self.description)
        return [(row[0], row[1]) for row in rows]

    def column_names(self) -> list[str]:
        return [name for name, _ in self.columns()]

    def require_columns(self, names: list[str]) -> None:
        known = set(self.column_names())
        for name in names:
            if name not in known:
                raise AnonymizationError(
                    f"column {name!r} is not in {self.description}",
                    hint=f"the columns are: {', '.join(sorted(known))}",
                )

    def null_counts(self, columns: Sequence[str]) -> dict[str, int]:
        """How many rows hold NULL in each column, in one scan: algorithms refuse NULLs that no hierarchy
        covers before they start, rather than dropping rows silently."""
        counts = (exp.func("count", exp.Star()) - exp.func("count", quoted_column(c)) for c in columns)
        row = self.engine.rows(exp.select(*counts).from_(self.table))[0]
        return {column: int(nulls) for column, nulls in zip(columns, row, strict=True)}

    def row_count(self) -> int:
        query = exp.select(exp.func("count", exp.Star())).from_(self.table)
        return int(self.engine.rows(query)[0][0])

    def distinct_values(self, column: str, *, as_text_values: bool = True) -> list[Any]:
        """The column's distinct non-NULL values, sorted — cast to text (hierarchy leaves) unless
        ``as_text_values`` is false (numeric hierarchies need the numbers)."""
        value: exp.Expression = quoted_column(column)
        if as_text_values:
            value = as_text(value)
        query = (
            exp.select(value.as_("v", quoted=True))
            .from_(self.table)
            .where(exp.Not(this=exp.Is(this=quoted_column(column), expression=exp.Null())))
            .distinct()
            .order_by(exp.column("v", quoted=True))
        )
        return [row[0] for row in self.engine.rows(query)]

    def distinct_with_text(self, column: str) -> list[tuple[Any, str]]:
        """The column's distinct non-NULL values in order, each with the engine's text of it — what
        a hierarchy's leaves must be to match the column cast to text (a DOUBLE 39 is ``39.0``)."""
        value = quoted_column(column)
        query = (
            exp.select(value.as_("v", quoted=True), as_text(value).as_("t", quoted=True))
            .from_(self.table)
            .where(exp.Not(this=exp.Is(this=value, expression=exp.Null())))
            .distinct()
            .order_by(exp.column("v", quoted=True))
        )
        return [(native, str(text)) for native, text in self.engine.rows(query)]

    def dataframe(self, columns: list[str]) -> pd.DataFrame:
        """The selected columns of every row, for algorithms that need rows (Mondrian, combine)."""
        self.require_columns(columns)
        return self.engine.frame(exp.select(*(quoted_column(c) for c in columns)).from_(self.table))

    def codes(
        self, dictionaries: Mapping[str, pd.DataFrame], *, text: Collection[str] = ()
    ) -> dict[str, np.ndarray]:
        """Each column's integer code for every row, in the order the table's rows are read.

        ``dictionaries[column]`` maps the column's values (``value``) to codes (``code``), one row per
        distinct value; columns named in ``text`` are matched as the engine's text (as hierarchy leaves are).
        Why not :meth:`dataframe`: a table of text columns costs tens of bytes per cell as Python strings,
        a code one to four. The engine numbers the rows with ``row_number() OVER ()`` — which follows the
        table's row order (DuckDB guarantees it for a window with an empty ``OVER``; Spark, which needs an
        order, numbers by ``monotonically_increasing_id()``: file by file, row by row) — joins each column
        with its registered dictionary, and returns (row number, codes) in batches that are scattered into
        arrays of the smallest integer type that holds the codes; no value is ever a Python object. A NULL
        or a value missing from its dictionary raises instead of dropping the row.
        """
        names = list(dictionaries)
        self.require_columns(names)
        count = self.row_count()
        codes = {
            name: np.empty(count, dtype=code_dtype(int(d["code"].max()) if len(d) else 0))
            for name, d in dictionaries.items()
        }
        numbered = exp.select(
            exp.Sub(this=self._row_number(), expression=exp.Literal.number(1)).as_(ROW_ID, quoted=True),
            *(quoted_column(name) for name in names),
        ).from_(self.table)
        query = exp.select(quoted_column(ROW_ID, "t")).from_(numbered.subquery("t"))
        for j, name in enumerate(names):
            table = _DICTIONARY.format(j)
            value: exp.Expression = quoted_column(name, "t")
            on = exp.EQ(
                this=as_text(value) if name in text else value, expression=quoted_column("value", table)
            )
            query = query.join(quoted_table(table), on=on, join_type="inner")
            query = query.select(quoted_column("code", table).as_(f"c{j}", quoted=True))
        for j, name in enumerate(names):
            self.register(_DICTIONARY.format(j), dictionaries[name])
        seen = 0
        try:
            for batch in self.engine.batches(query):
                rows = batch[ROW_ID].to_numpy()
                for j, name in enumerate(names):
                    codes[name][rows] = batch[f"c{j}"].to_numpy()
                seen += len(batch)
        finally:
            for j in range(len(names)):
                self.unregister(_DICTIONARY.format(j))
        if seen != count:
            raise AnonymizationError(
                f"{count - seen} rows of {self.description} have a NULL or unknown value in "
                f"{', '.join(names)}",
                hint="filter or fill NULLs before anonymizing (e.g. with COALESCE in a view)",
            )
        return codes

    def _row_number(self) -> exp.Window:
        if self.dialect != "spark":
            return exp.Window(this=exp.RowNumber())
        scan_order = exp.Order(expressions=[exp.Ordered(this=exp.func("monotonically_increasing_id"))])
        return exp.Window(this=exp.RowNumber(), order=scan_order)

    def rows(self, query: exp.Expression) -> list[tuple[Any, ...]]:
        return self.engine.rows(query)

    def arrays(self, query: exp.Expression) -> dict[str, np.ndarray]:
        """A query's result column by column as numpy arrays (DuckDB: zero-copy ``fetchnumpy``)."""
        return self.engine.arrays(query)

    def register(self, name: str, frame: pd.DataFrame) -> exp.Table:
        """Make ``frame`` a table the engine can join against for this connection's lifetime."""
        self.engine.register(name, frame)
        return quoted_table(name)

    def unregister(self, name: str) -> None:
        self.engine.unregister(name)

    def run(self, statements: list[exp.Expression]) -> None:
        """Statements in one transaction: all of them take effect, or none."""
        self.engine.run(statements)

    def write_file(self, query: exp.Expression, path: Path, file_format: FileFormat) -> None:
        self.engine.write_file(query, path, file_format)

    def table_exists(self, table: str, schema: str | None = None) -> bool:
        """Whether ``schema.table`` exists in this source's database (default schema: the source's)."""
        schema = schema or self.table.db or ("main" if self.dialect == "duckdb" else "public")
        query = (
            exp.select(exp.func("count", exp.Star()))
            .from_(exp.table_("tables", db="information_schema"))
            .where(
                exp.and_(
                    exp.EQ(this=exp.column("table_schema"), expression=exp.Placeholder()),
                    exp.EQ(this=exp.column("table_name"), expression=exp.Placeholder()),
                )
            )
        )
        text = query.sql(dialect=self.dialect)  # placeholders: ``?`` (DuckDB) or ``%s`` (psycopg)
        assert isinstance(self.engine, _DuckDB | _Postgres)
        rows = self.engine.connection.execute(text, [schema, table]).fetchall()  # type: ignore[arg-type]
        return bool(rows[0][0])

    def close(self) -> None:
        self.engine.close()

    def __enter__(self) -> TableSource:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()
