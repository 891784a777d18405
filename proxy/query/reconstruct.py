"""Answering ``veil_reconstruct`` (proxy/analysis/reconstruct.py) from a release in the dataset's database:
its metadata from the companion table, the records' sets grouped and counted by the engine, then the EM
reconstruction of anonymizers/reconstruction.py. No private row is read and nothing is charged."""

from __future__ import annotations

import json
from collections.abc import Callable

from anonymizers.errors import AnonymizationError
from anonymizers.published_sets import (
    chosen_releases,
    cross_tabulation_rows,
    decode_sets,
    grouped_sets_query,
    metadata_query,
    read_metadata,
)
from anonymizers.reconstruction import reconstruct_em
from anonymizers.source import quoted_table
from proxy.analysis.reconstruct import ReconstructQuery
from proxy.backends.base import Description, Rows
from proxy.config import ColumnType
from proxy.errors import InvalidParameterValueError, ProxyError, UnknownTableError
from proxy.release.apply import ReleasedTable, ResultColumn

Execute = Callable[[str], tuple[Description, Rows]]


def answer_reconstruct(
    query: ReconstructQuery, *, execute: Execute, dialect: str
) -> tuple[ReleasedTable, int]:
    """The estimated cross-tabulation (attributes…, count), and the EM iterations it took."""
    try:
        _, rows = execute(metadata_query(query.release).sql(dialect=dialect))
    except ProxyError:
        raise UnknownTableError(
            f'there is no release named "{query.release}"',
            hint="veil_reconstruct reads tables written by veil materialize diversity --out db:TABLE",
        ) from None
    try:
        releases = chosen_releases(
            read_metadata(json.loads(str(rows[0][0])) if rows else {}), query.attributes
        )
        grouped = grouped_sets_query(quoted_table(query.release), query.attributes).sql(dialect=dialect)
        published = decode_sets(execute(grouped)[1], releases)
    except AnonymizationError as error:
        raise InvalidParameterValueError(error.message, hint=error.hint) from None
    counts, iterations = reconstruct_em(published, releases)
    columns = tuple(ResultColumn(name, ColumnType.TEXT) for name in query.attributes)
    table = ReleasedTable(
        (*columns, ResultColumn("count", ColumnType.REAL)), cross_tabulation_rows(counts, releases)
    )
    return table, iterations
