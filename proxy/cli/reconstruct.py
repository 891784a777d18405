"""``veil reconstruct``: an analyst's estimate of a cross-tabulation from a sensitive-QID release.

The release is public (``veil materialize diversity`` wrote it for analysts), so this reads no private
row and spends no budget. The proposed Bayes/EM iteration (spec sensitive-qid-diversity.md §5.2) runs as
a tensor product over the chosen attributes; ``--method valueadding`` gives the baseline of §5.1.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import click

from anonymizers.errors import AnonymizationError
from anonymizers.published_sets import (
    chosen_releases,
    cross_tabulation_rows,
    decode_sets,
    grouped_sets_query,
    read_metadata,
)
from anonymizers.reconstruction import reconstruct_em, reconstruct_value_adding
from anonymizers.source import TableSource
from proxy.cli.anonymize_options import split_columns
from proxy.cli.sources import dataset_table, engine_errors
from proxy.cli.support import config_option, echo_json, friendly_errors, json_option, print_table


@click.command("reconstruct", short_help="Estimate a cross-tabulation from a sensitive-QID release.")
@click.argument("published")
@click.option(
    "--metadata",
    "metadata_path",
    type=click.Path(path_type=Path, dir_okay=False, exists=True),
    required=True,
    help="The *.metadata.json written with the release.",
)
@click.option("--attributes", required=True, help="Attributes of the cross-tabulation, comma-separated.")
@click.option(
    "--method", type=click.Choice(["em", "valueadding"]), default="em", show_default=True, help="Estimator."
)
@click.option(
    "--max-iterations",
    type=click.IntRange(min=1),
    default=10_000,
    show_default=True,
    help="EM: the most iterations (it also stops when no count moves by 1e-6·N).",
)
@click.option(
    "--out", "out", type=click.Path(path_type=Path, dir_okay=False), help="Write every cell to CSV."
)
@config_option
@click.option("--dataset", help="With PUBLISHED = db:TABLE: the dataset whose database holds the release.")
@json_option
@friendly_errors
@engine_errors
def reconstruct(**options: Any) -> None:
    """Estimate the counts of every combination of --attributes from PUBLISHED (a release of value sets).

    PUBLISHED is the CSV or Parquet file `veil materialize diversity` wrote, or db:TABLE in --dataset's
    database. The answer is an estimate: the release hides each record's values among others.

    \b
    Example:
      veil reconstruct adult_l3.parquet --metadata adult_l3.parquet.metadata.json --attributes age,occupation
    """
    attributes = split_columns(options["attributes"], "--attributes")
    document = _read_json(options["metadata_path"])
    releases = chosen_releases(read_metadata(document), attributes)
    with _open(options["published"], options["config_path"], options["dataset"]) as source:
        source.require_columns(attributes)
        query = grouped_sets_query(source.table, attributes)
        published = decode_sets(source.rows(query), releases)
    if options["method"] == "em":
        counts, iterations = reconstruct_em(published, releases, max_iterations=options["max_iterations"])
    else:
        counts, iterations = reconstruct_value_adding(published, releases), 0
    rows = cross_tabulation_rows(counts, releases)
    if options["out"] is not None:
        _write_csv(options["out"], [*attributes, "count"], rows)
    records = [dict(zip([*attributes, "count"], row, strict=True)) for row in rows]
    if options["as_json"]:
        echo_json(
            {
                "method": options["method"],
                "iterations": iterations,
                "rows": int(sum(r[-1] for r in rows) + 0.5),
                "cells": records,
            }
        )
        return
    note = f", {iterations} EM iterations" if options["method"] == "em" else ""
    click.echo(
        f"{len(published[0]):,} records, {len(rows):,} cells ({options['method']}{note}); largest first:"
    )
    print_table([{**r, "count": round(r["count"], 1)} for r in records[:20]], [*attributes, "count"])
    if len(records) > 20:
        click.echo(
            f"… {len(records) - 20} more cells" + ("" if options["out"] else " (--out writes them all)")
        )


def _open(published: str, config_path: Path, dataset: str | None) -> TableSource:
    if published.startswith("db:"):
        return dataset_table(config_path, dataset, published[3:])
    path = Path(published)
    if not path.is_file():
        raise AnonymizationError(
            f"{path} does not exist", hint="give the release file, or db:TABLE with --dataset"
        )
    return TableSource.parquet(path) if path.suffix.lower() == ".parquet" else TableSource.csv(path)


def _read_json(path: Path) -> dict[str, Any]:
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as error:
        raise AnonymizationError(f"cannot read {path}: {error}") from None
    return document if isinstance(document, dict) else {}


def _write_csv(path: Path, header: list[str], rows: list[tuple[Any, ...]]) -> None:
    with path.open("w", newline="", encoding="utf-8") as stream:
        writer = csv.writer(stream)
        writer.writerow(header)
        writer.writerows(rows)
