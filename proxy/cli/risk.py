"""``veil risk``: score a released table — the simulated attack of ch. 4 (Algorithm 2) and the classic
re-identification measures — or, without one, the source table itself with the classic measures.

Runs on the data holder's side with the original rows; it spends no privacy budget."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
import numpy as np
import pandas as pd

from anonymizers.diversity import achieved
from anonymizers.errors import AnonymizationError
from anonymizers.hierarchy import value_text
from anonymizers.plots import plot_candidate_counts, require_matplotlib
from anonymizers.risk.attack import AttackResult
from anonymizers.risk.classic import class_sizes, classic_risk
from anonymizers.risk.uniqueness import Domain, cell_count, column_domain, estimate_population_uniques
from proxy.cli.anonymize_options import (
    attack_options,
    declared_hierarchy,
    declared_values,
    hierarchy_option,
    hierarchy_specs,
    split_columns,
    step_option,
    with_options,
)
from proxy.cli.sources import (
    attack_pipeline,
    engine_errors,
    open_source,
    read_released,
    run_attack,
    source_arguments,
    source_options,
)
from proxy.cli.support import declared_dataset, echo_json, friendly_errors, json_option, print_table
from proxy.config import TablePolicy, load_config


@click.group(
    "risk",
    invoke_without_command=True,
    short_help="Score a released table: simulated attack and classic risk measures.",
)
@source_options
@click.option(
    "--released",
    help="The released table: PATH.csv, PATH.parquet or db:TABLE. Without it the source itself is scored "
    "with the classic measures only.",
)
@click.option("--released-delimiter", help="CSV field separator of --released (default: guessed).")
@click.option("--qi", help="Quasi-identifiers, comma-separated (required without a subcommand).")
@click.option("--sensitive", help="Sensitive attribute (for the revealing risk).")
@hierarchy_option
@step_option
@click.option(
    "--sample", "sample_rate", type=click.FloatRange(0, 1, min_open=True), help="α if rows were sampled."
)
@click.option(
    "--link",
    help="Column holding the same row id in both tables (default: rows are in the same order, as ARX writes).",
)
@with_options(attack_options)
@click.option(
    "--sampling-fraction",
    type=click.FloatRange(0, 1, min_open=True),
    help="λ: table = sample of a population.",
)
@click.option(
    "--population", type=click.IntRange(min=1), help="N_0: the population size (for population uniques)."
)
@click.option(
    "--plot",
    "plot_path",
    type=click.Path(path_type=Path, dir_okay=False),
    help="Draw the distribution of the records' candidate counts |C_i| (their class sizes without "
    "--released) to this PNG (needs [plot]).",
)
@json_option
@friendly_errors
@engine_errors
def risk(**options: Any) -> None:
    """Score a released table: simulated attack (ch. 4 Algorithm 2) and classic re-identification risks.

    \b
    Example:
      veil risk --input adult.csv --delimiter ';' --released adult_k5.csv \\
          --qi age,sex,race --hierarchy age=adult_hierarchy_age.csv --hierarchy race=suppress

    The attacker knows each original record's quasi-identifiers and how the table was made (--hierarchy,
    --step, --sample describe it); the evaluator knows which released row came from which original row
    (--link, or the row order).

    `veil risk factorized` scores a factorized time-sequence release instead (its own --help).
    """
    if _subcommand_runs(options):
        return
    if not options["qi"]:
        raise click.UsageError("Missing option '--qi'.")
    qis = split_columns(options["qi"], "--qi")
    sensitive = options["sensitive"]
    columns = [*qis, *([sensitive] if sensitive else [])]
    if options["plot_path"] is not None:
        require_matplotlib()
    with open_source(*source_arguments(options)) as source:
        source.require_columns([*columns, *([options["link"]] if options["link"] else [])])
        original = source.dataframe(source.column_names())
        released = (
            read_released(
                options["released"], options["config_path"], options["dataset"], options["released_delimiter"]
            )
            if options["released"]
            else original
        )
    report: dict[str, Any] = {"records": len(original), "released": len(released)}
    attack = None
    if options["released"]:
        row_ids = _link(original, released, options["link"])
        pipeline = attack_pipeline(original, qis, options)
        attack = run_attack(original, released, row_ids, pipeline, options)
        report["simulated_attack"] = attack.to_dict()
    report["classic"] = vars(classic_risk(released, qis, sampling_fraction=options["sampling_fraction"]))
    if sensitive:
        report["diversity"] = _achieved_diversity(released, qis, sensitive)
    if options["population"] and options["sampling_fraction"]:
        report["population_uniques"] = _uniques(released, qis, options)
    if options["plot_path"] is not None:
        _plot_risk(attack, released, qis, options["plot_path"])
    if options["as_json"]:
        echo_json(report)
        return
    print_table(_flatten(report), ["measure", "value"])
    if options["plot_path"] is not None:
        click.echo(f"plot: {options['plot_path']}")


def _subcommand_runs(options: dict[str, Any]) -> bool:
    """``veil risk factorized …``: this group's own options belong to a table's risk, not to the
    subcommand's, so giving them before it is a mistake worth one line."""
    context = click.get_current_context()
    if context.invoked_subcommand is None:
        return False
    given = [
        name
        for name, value in options.items()
        if context.get_parameter_source(name) is click.core.ParameterSource.COMMANDLINE
    ]
    if given:
        raise click.UsageError(
            f"options {', '.join(given)} belong to `veil risk`, not to `veil risk {context.invoked_subcommand}`;"
            " put the subcommand first"
        )
    return True


def _plot_risk(attack: AttackResult | None, released: pd.DataFrame, qis: list[str], path: Path) -> None:
    """The simulated attack's |C_i| per record; without a release, each record's class size (what a
    prosecutor's 1/|class| is computed from)."""
    if attack is not None:
        plot_candidate_counts(
            attack.sizes, path, title="simulated attack", what="candidates |C_i| of a record"
        )
        return
    sizes = class_sizes(released, qis).to_numpy(dtype=np.float64)
    plot_candidate_counts(np.repeat(sizes, sizes.astype(np.int64)), path, title="classes of the table",
                          what="size of the record's class")  # fmt: skip


def _link(original: pd.DataFrame, released: pd.DataFrame, column: str | None) -> np.ndarray:
    """Each released row's position in ``original``."""
    if column is None:
        if len(released) != len(original):
            raise AnonymizationError(
                f"the released table has {len(released)} rows and the original {len(original)}",
                hint="without --link the rows must correspond one to one, in order",
            )
        return np.arange(len(original))
    if column not in released.columns:
        raise AnonymizationError(f"the released table has no --link column {column!r}")
    positions = pd.Series(np.arange(len(original)), index=original[column])
    if not positions.index.is_unique:
        raise AnonymizationError(f"--link column {column!r} repeats values in the original table")
    found = positions.reindex(released[column])
    if found.isna().any():
        raise AnonymizationError(f"some released rows have a {column} that is not in the original table")
    return found.to_numpy(dtype=np.int64)


def _achieved_diversity(released: pd.DataFrame, qis: list[str], sensitive: str) -> dict[str, float]:
    """The l each variant reaches (the weakest class) and the largest EMD t (equal distance)."""
    counts = released.astype({sensitive: str}).groupby(qis, dropna=False)[sensitive].value_counts()
    matrix = counts.unstack(fill_value=0).to_numpy()
    return achieved(matrix, matrix.sum(axis=0) / matrix.sum())


def _uniques(released: pd.DataFrame, qis: list[str], options: dict[str, Any]) -> dict[str, Any]:
    """The Poisson–gamma estimate, with K from the declared domains and where each factor came from."""
    domains = _domains(released, qis, options)
    frequencies = released.groupby(qis, dropna=False).size().to_numpy()
    result = estimate_population_uniques(
        frequencies,
        cells=cell_count(domains),
        population=options["population"],
        sampling_fraction=options["sampling_fraction"],
    )
    return {**vars(result), "domains": {q: vars(domain) for q, domain in domains.items()}}


def _domains(released: pd.DataFrame, qis: list[str], options: dict[str, Any]) -> dict[str, Domain]:
    """Each quasi-identifier's domain: a --hierarchy file, else the dataset's policy (public values or
    integer bounds), else — nothing declared — the values seen."""
    specs = hierarchy_specs(options["hierarchies"], qis)
    policy = _table_policy(options)
    return {
        q: column_domain(
            (value_text(v) for v in released[q].unique()),
            hierarchy=declared_hierarchy(q, specs.get(q)),
            policy=declared_values(None if policy is None else policy.column(q)),
        )
        for q in qis
    }


def _table_policy(options: dict[str, Any]) -> TablePolicy | None:
    """The policy of the scored table when it is a dataset's (a file input has none)."""
    if options["input_path"] is not None or not options["dataset"] or not options["table"]:
        return None
    return declared_dataset(load_config(options["config_path"]), options["dataset"]).table(options["table"])


def _flatten(report: dict[str, Any], prefix: str = "") -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for key, value in report.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            rows += _flatten(value, f"{name}.")
        elif not isinstance(value, list):
            rows.append({"measure": name, "value": value})
    return rows


def _register_subcommands() -> None:
    from proxy.cli.factorize import factorized_risk_command

    risk.add_command(factorized_risk_command)


_register_subcommands()
