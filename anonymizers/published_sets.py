"""Reading a release of value sets back (``veil reconstruct``, ``veil_reconstruct`` in SQL): per attribute,
every record's set as codes into the attribute's public domain.

The engine does the heavy part: it groups the records by their combination of sets over the chosen
attributes (``GROUP BY`` the sets' JSON text) and counts them. A release has millions of rows but few
distinct combinations, so Python decodes each combination once and repeats it by its count.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import numpy as np
from sqlglot import exp

from anonymizers.errors import AnonymizationError
from anonymizers.sensitive_qid import AttributeRelease
from anonymizers.source import quoted_column, quoted_table

COUNT = "veil_records"


def grouped_sets_query(table: exp.Table, columns: Sequence[str]) -> exp.Select:
    """``SELECT <each set as JSON text>, COUNT(*) FROM table GROUP BY …`` — ``to_json`` works in DuckDB and
    PostgreSQL alike: a list or array becomes a JSON array, a text column (a CSV's JSON arrays) a JSON
    string that :func:`decode_sets` unwraps."""
    items = [
        exp.cast(exp.func("to_json", quoted_column(name)), "TEXT").as_(name, quoted=True) for name in columns
    ]
    positions = [exp.Literal.number(i + 1) for i in range(len(items))]
    return (
        exp.select(*items, exp.func("count", exp.Star()).as_(COUNT, quoted=True))
        .from_(table)
        .group_by(*positions)
    )


def decode_sets(rows: Sequence[Sequence[Any]], releases: Sequence[AttributeRelease]) -> list[np.ndarray]:
    """Per attribute, N × η codes from the grouped rows (sets as JSON text, then the count)."""
    counts = np.array([int(row[-1]) for row in rows], dtype=np.int64)
    published = []
    for j, release in enumerate(releases):
        index = {value: code for code, value in enumerate(release.domain)}
        combos = np.array([_codes(row[j], release, index) for row in rows], dtype=np.int64).reshape(
            len(rows), release.eta
        )
        published.append(np.repeat(combos, counts, axis=0))
    return published


def _codes(text: object, release: AttributeRelease, index: dict[str, int]) -> list[int]:
    try:
        values = json.loads(str(text))
        if isinstance(values, str):  # a text column holding JSON arrays, read through to_json
            values = json.loads(values)
        codes = sorted(index[str(value)] for value in values)
    except (json.JSONDecodeError, KeyError, TypeError):
        raise AnonymizationError(
            f"{release.attribute}: {str(text)[:80]!r} is not a set of values of its published domain",
            hint="reconstruct with the metadata written together with this release",
        ) from None
    if len(codes) != release.eta or len(set(codes)) != len(codes):
        raise AnonymizationError(
            f"{release.attribute}: a published set has {len(codes)} values, the metadata says {release.eta}",
            hint="reconstruct with the metadata written together with this release",
        )
    return codes


def read_metadata(document: dict[str, Any]) -> list[AttributeRelease]:
    """The releases of a metadata document written by ``veil materialize diversity``."""
    entries = document.get("attributes") if isinstance(document, dict) else None
    if not isinstance(entries, list) or not entries:
        raise AnonymizationError(
            "this is not the metadata of a sensitive-QID release",
            hint="use the *.metadata.json that veil materialize diversity wrote next to the release",
        )
    return [AttributeRelease.from_metadata(entry) for entry in entries]


def chosen_releases(
    releases: Sequence[AttributeRelease], attributes: Sequence[str]
) -> list[AttributeRelease]:
    by_name = {release.attribute: release for release in releases}
    unknown = [name for name in attributes if name not in by_name]
    if unknown:
        raise AnonymizationError(
            f"{unknown[0]!r} is not an attribute of this release", hint=f"attributes: {', '.join(by_name)}"
        )
    return [by_name[name] for name in attributes]


def cross_tabulation_rows(counts: np.ndarray, releases: Sequence[AttributeRelease]) -> list[tuple[Any, ...]]:
    """Every cell of the reconstructed tensor as (value of each attribute…, count), largest first."""
    cells = np.argwhere(np.ones(counts.shape, dtype=bool))
    values = counts.reshape(-1)
    order = np.argsort(-values, kind="stable")
    return [
        (*(release.domain[i] for release, i in zip(releases, cells[k], strict=True)), float(values[k]))
        for k in order
    ]


METADATA_TABLE_SUFFIX = "__metadata"  # db:TABLE releases keep their metadata in TABLE__metadata


def metadata_query(release: str) -> exp.Select:
    """The one JSON document of a database release's companion table."""
    return exp.select(quoted_column("document")).from_(quoted_table(release + METADATA_TABLE_SUFFIX))
