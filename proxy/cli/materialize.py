"""``veil materialize``: sanitized exports for data holders, each with its risk score (``veil risk``,
proxy/cli/risk.py, scores any released table).

These commands run on the data holder's side, with the original rows: they are not analyst queries and
spend no privacy budget. What they export carries no DP guarantee (except the noise steps of ``combine``,
whose ε is per record); each export is scored by the simulated attack of the dissertation's ch. 4 and by
the classic measures, so the holder sees the risk before the table leaves.

Heavy work stays in the engine: global recoding reads only frequency sets and writes the recoded table
with one ``COPY``/``CREATE TABLE … AS`` (rows never pass through Python); Mondrian and ``combine`` need
the rows and read only the columns they use.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click
import numpy as np
import pandas as pd

from anonymizers.combine import Released, combine, recode
from anonymizers.diversity import DiversityModel, achieved
from anonymizers.errors import AnonymizationError
from anonymizers.frequency import frequency_set
from anonymizers.global_recoding import GlobalRecodingResult, PrivacyModel, anonymize
from anonymizers.hierarchy import Hierarchy, hierarchy_from_spec
from anonymizers.metrics import SEARCH_METRICS
from anonymizers.mondrian import (
    CATEGORICAL_LABELS,
    RECODINGS,
    MondrianResult,
    MondrianSummary,
    mondrian,
    mondrian_source,
    write_release,
)
from anonymizers.output import OutputTarget, ensure_writable, write_frame, write_recoded
from anonymizers.plots import plot_frontier, require_matplotlib
from anonymizers.release_search import (
    Frontier,
    Target,
    classic_measure,
    combine_frontier,
    combine_grid,
    kanon_frontier,
)
from anonymizers.risk.classes import class_attack
from anonymizers.risk.classic import classic_risk
from anonymizers.risk.pipeline import AttributePipeline, Generalize, Pipeline
from anonymizers.source import TableSource
from anonymizers.utility import Holdout, holdout, information_loss, ml_utility
from proxy.cli.anonymize_options import (
    attack_options,
    hierarchy_option,
    hierarchy_specs,
    split_columns,
    step_option,
    target_options,
    with_options,
)
from proxy.cli.sources import (
    attack_pipeline,
    engine_errors,
    open_source,
    progress_bar,
    run_attack,
    source_arguments,
    source_options,
)
from proxy.cli.support import (
    echo_json,
    friendly_errors,
    json_option,
    print_table,
)

L_VARIANTS = ("distinct", "entropy", "recursive")


# --- sources ------------------------------------------------------------------------------------------------


def _hierarchies(
    source: TableSource, qis: Sequence[str], specs: dict[str, str], *, engine_text: bool
) -> dict[str, Hierarchy]:
    """One hierarchy per QI over its distinct values. Leaves are the engine's text of each value when
    the engine matches them (global recoding), else Python's (Mondrian, combine read rows)."""
    hierarchies = {}
    for column in qis:
        values, texts = _distinct(source, column)
        hierarchies[column] = hierarchy_from_spec(
            column, specs.get(column), values, texts=texts if engine_text else None
        )
    return hierarchies


def _distinct(source: TableSource, column: str) -> tuple[list[object], list[str]]:
    pairs = source.distinct_with_text(column)
    return [native for native, _ in pairs], [text for _, text in pairs]


# --- reports ------------------------------------------------------------------------------------------------


def _finish(report: dict[str, Any], options: dict[str, Any]) -> None:
    report_path = options["report_path"]
    if report_path is not None:
        report_path.write_text(json.dumps(report, indent=2, default=_json_default) + "\n", encoding="utf-8")
    if options["as_json"]:
        echo_json(report)
        return
    _print_summary(report)
    for name, path in (("report", report_path), ("plot", options.get("plot_path"))):
        if path is not None:
            click.echo(f"{name}: {path}")


def _json_default(value: object) -> object:
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return float(value)
    if isinstance(value, np.ndarray):
        return value.tolist()
    raise TypeError(f"cannot write {type(value).__name__} to the report")


def _print_summary(report: dict[str, Any]) -> None:
    attack = report["risk"]["simulated_attack"]
    rows = [
        {"measure": "rows in", "value": report["rows_in"]},
        {"measure": "rows out", "value": report["rows_out"]},
        *(
            {"measure": name.replace("_", " "), "value": report["transformation"][name]}
            for name in ("classes", "boxes", "suppressed_records")
            if name in report["transformation"]
        ),
        {"measure": "n_q (re-identification: risk 1/n_q)", "value": attack["n_q"]},
        {"measure": "records at risk 0", "value": attack["records_at_risk_zero"]},
    ]
    if attack.get("n_s") is not None:
        rows.append({"measure": "n_s (revealing: risk 1/n_s)", "value": attack["n_s"]})
        rows.append(
            {"measure": "probabilistic revealing risk", "value": attack["probabilistic_revealing_risk"]}
        )
    rows += _search_summary(report.get("search"))
    classic = report["risk"].get("classic")
    if classic:
        rows.append({"measure": "prosecutor risk (max)", "value": classic["prosecutor_max"]})
        rows.append({"measure": "marketer risk", "value": classic["marketer"]})
    for name, value in report.get("utility", {}).get("metrics", {}).items():
        rows.append({"measure": f"information loss: {name}", "value": value})
    uti = report.get("utility", {}).get("ml")
    if uti:
        rows.append({"measure": f"Uti ({uti['model']})", "value": uti["uti"]})
    click.echo(f"wrote {report['output']}")
    print_table(rows, ["measure", "value"])


def _search_summary(search: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The summary's lines about a --max-risk search: the target, how much was explored, the choice."""
    if search is None:
        return []
    chosen = next(c for c in search["candidates"] if c["chosen"])
    parameters = ", ".join(f"{k}={_brief(v)}" for k, v in chosen["parameters"].items())
    return [
        {
            "measure": f"{search['risk_measure']} risk (target <= {search['max_risk']:g})",
            "value": chosen["risk"],
        },
        {"measure": "candidates explored", "value": len(search["candidates"])},
        {"measure": "chosen", "value": parameters},
    ]


def _brief(value: object) -> str:
    if isinstance(value, dict):
        return "/".join(f"{k}:{_brief(v)}" for k, v in value.items())
    return f"{value:g}" if isinstance(value, float) else str(value)


# --- materialize ------------------------------------------------------------------------------------------------


@click.group(short_help="Export an anonymized copy of a table (no budget spent).")
def materialize() -> None:
    """Export a sanitized copy of a table, with a risk and a utility report.

    \b
    veil materialize kanon    k-anonymity (optimal global recoding or Mondrian), l-diversity, t-closeness
    veil materialize combine  generalization + Laplace noise + randomization + sampling (ch. 4)
    veil materialize diversity  each sensitive QID published as a set of values (Sei et al.)

    The output is a CSV file, a Parquet file, or db:TABLE (a new table next to the original). These
    commands read the original rows and spend no privacy budget: run them as the data holder.
    """


output_options = [
    click.option(
        "--out", "out", required=True, help="PATH.csv, PATH.parquet, or db:TABLE in the source's database."
    ),
    click.option("--replace", is_flag=True, help="Overwrite --out if it exists."),
    click.option(
        "--report",
        "report_path",
        type=click.Path(path_type=Path, dir_okay=False),
        help="Write the report (JSON).",
    ),
    json_option,
    click.option(
        "--utility-target", help="Also score ML utility (Uti) predicting this column (needs [eval])."
    ),
    click.option(
        "--utility-positive", default=">50K", show_default=True, help="Positive class of the target."
    ),
    click.option(
        "--utility-model",
        type=click.Choice(["svm", "logistic"]),
        default="logistic",
        show_default=True,
        help="Model for Uti: SVM with RBF kernel (as ch. 4) or logistic regression (faster).",
    ),
    click.option(
        "--seed", type=int, help="Seed the random choices (noise, sampling, test split) reproducibly."
    ),
]


@materialize.command(
    "kanon", short_help="k-anonymity by optimal global recoding or Mondrian, with l-diversity or t-closeness."
)
@source_options
@click.option("--qi", required=True, help="Quasi-identifiers, comma-separated.")
@click.option(
    "--sensitive", help="Sensitive attribute (for l-diversity, t-closeness and the revealing risk)."
)
@click.option(
    "--k",
    "k",
    type=click.IntRange(min=1),
    help="Every released class has ≥ k rows (required unless --max-risk, where it is the smallest k tried; "
    "default 2).",
)
@click.option(
    "--suppression-limit",
    type=click.FloatRange(0, 1),
    default=0.0,
    show_default=True,
    help="Largest share of rows that may be removed (optimal recoding; with --max-risk, the most the "
    "search may try).",
)
@click.option("--l", "l_value", type=float, help="l-diversity of --sensitive in every class.")
@click.option(
    "--l-variant", type=click.Choice(L_VARIANTS), default="distinct", show_default=True, help="Which l."
)
@click.option(
    "--c", "c_value", type=float, default=2.0, show_default=True, help="c of recursive (c,l)-diversity."
)
@click.option("--t", "t_value", type=click.FloatRange(0, 1), help="t-closeness of --sensitive (EMD).")
@click.option(
    "--t-distance",
    type=click.Choice(["equal", "ordered"]),
    help="EMD ground distance (default: ordered for numbers, equal otherwise).",
)
@click.option(
    "--hierarchy",
    "hierarchies",
    multiple=True,
    help="COLUMN=SPEC: an ARX CSV file, interval:5,10,20[;top=80;bottom=18], date or suppress. Repeatable.",
)
@click.option(
    "--algorithm",
    type=click.Choice(["optimal", "mondrian"]),
    default="optimal",
    show_default=True,
    help="Search.",
)
@click.option(
    "--metric", type=click.Choice(SEARCH_METRICS), default="loss", show_default=True, help="Loss to minimize."
)
@click.option(
    "--recoding", type=click.Choice(RECODINGS), default="mean", show_default=True, help="Mondrian numbers."
)
@click.option("--relaxed", is_flag=True, help="Mondrian: split ties (relaxed Mondrian).")
@click.option(
    "--categorical",
    type=click.Choice(CATEGORICAL_LABELS),
    default="lca",
    show_default=True,
    help="Mondrian: publish a class's categories as their common ancestor, or as the set of its values.",
)
@with_options(target_options)
@with_options(output_options)
@friendly_errors
@engine_errors
def kanon(**options: Any) -> None:
    """k-anonymize a table (optionally l-diverse or t-close) and export it.

    \b
    Example:
      veil materialize kanon --input adult.csv --delimiter ';' \\
          --qi age,sex,race --k 5 --suppression-limit 0.05 \\
          --hierarchy age=adult_hierarchy_age.csv --out adult_k5.csv --report k5.json

    With --max-risk R instead of --k, k and the suppression limit (up to --suppression-limit) are searched
    for the least loss at risk ≤ R.
    """
    qis = split_columns(options["qi"], "--qi")
    risk_target = _kanon_target(options)
    model = _privacy_model(options)
    with open_source(*source_arguments(options)) as source:
        source.require_columns([*qis, *([options["sensitive"]] if options["sensitive"] else [])])
        specs = hierarchy_specs(options["hierarchies"], qis)
        target = OutputTarget.parse(options["out"])
        ensure_writable(target, source, replace=options["replace"])
        if options["algorithm"] == "optimal":
            report = _optimal(source, qis, specs, model, target, options, risk_target)
        else:
            report = _mondrian(source, qis, specs, model, target, options)
    _finish(report, options)


def _risk_target(options: dict[str, Any]) -> Target | None:
    """The --max-risk target, or None; --plot draws the search, so it needs one. matplotlib is checked
    now: a missing extra must not surface after a long search (or after the output is written)."""
    if options["max_risk"] is None:
        if options["plot_path"] is not None:
            raise AnonymizationError(
                "--plot on veil materialize draws the --max-risk search's frontier",
                hint="add --max-risk R, or draw a release's risk with veil risk --plot",
            )
        return None
    if options["plot_path"] is not None:
        require_matplotlib()
    return Target(options["max_risk"], options["risk_measure"], options["sampling_fraction"])


def _kanon_target(options: dict[str, Any]) -> Target | None:
    """kanon's target: --k or --max-risk must be given; the search explores optimal recoding only."""
    risk_target = _risk_target(options)
    if risk_target is None and options["k"] is None:
        raise AnonymizationError(
            "give --k, or --max-risk R to search for it", hint="e.g. --k 5, or --max-risk 0.2"
        )
    if risk_target is not None and options["algorithm"] != "optimal":
        raise AnonymizationError(
            "--max-risk searches optimal global recoding only",
            hint="drop --algorithm mondrian, or give Mondrian a --k",
        )
    return risk_target


def _privacy_model(options: dict[str, Any]) -> PrivacyModel:
    wants_sensitive = options["l_value"] is not None or options["t_value"] is not None
    if wants_sensitive and not options["sensitive"]:
        raise AnonymizationError("--l and --t constrain a sensitive attribute", hint="add --sensitive COLUMN")
    diversity = DiversityModel(
        l=options["l_value"],
        variant=options["l_variant"],
        c=options["c_value"],
        t=options["t_value"],
        distance=options["t_distance"] or "equal",
    )
    return PrivacyModel(k=options["k"] or 2, diversity=diversity)


def _optimal(
    source: TableSource,
    qis: list[str],
    specs: dict[str, str],
    model: PrivacyModel,
    target: OutputTarget,
    options: dict[str, Any],
    risk_target: Target | None,
) -> dict[str, Any]:
    hierarchies = _hierarchies(source, qis, specs, engine_text=True)
    frontier = None
    if risk_target is None:
        result = _recoding(source, qis, hierarchies, model, options)
    else:
        frontier, result = _searched_recoding(source, qis, hierarchies, model, risk_target, options)
    write_recoded(source, result, [hierarchies[q] for q in qis], target, replace=options["replace"])
    attack = class_attack(_released_sizes(result), result.suppressed_records, _released_sensitive(result))
    report = _report(
        "kanon", options, source, target, result.records, result.records - result.suppressed_records
    )
    report["transformation"] = result.to_report()
    report["risk"] = {"simulated_attack": attack.to_dict(), "model": "global recoding: |C_i| = class size"}
    report["utility"] = {"metrics": result.metrics}
    if options["utility_target"]:
        report["utility"]["ml"] = _global_utility(source, hierarchies, result, options)
    if frontier is not None:
        _add_search(report, frontier, options)
    return report


def _recoding(
    source: TableSource,
    qis: list[str],
    hierarchies: dict[str, Hierarchy],
    model: PrivacyModel,
    options: dict[str, Any],
) -> GlobalRecodingResult:
    """The optimal node for the given k and suppression limit."""
    with progress_bar("searching the generalization lattice", quiet=options["as_json"]) as update:
        return anonymize(
            source,
            qis,
            [hierarchies[q] for q in qis],
            model,
            sensitive=options["sensitive"],
            suppression_limit=options["suppression_limit"],
            metric=options["metric"],
            progress=update,
        )


def _searched_recoding(
    source: TableSource,
    qis: list[str],
    hierarchies: dict[str, Hierarchy],
    model: PrivacyModel,
    risk_target: Target,
    options: dict[str, Any],
) -> tuple[Frontier, GlobalRecodingResult]:
    """The --max-risk search: one frequency set from the engine, one lattice search per candidate on it."""
    provider = frequency_set(source, qis, [hierarchies[q] for q in qis], sensitive=options["sensitive"])
    with progress_bar(
        "searching k and the suppression limit", quiet=options["as_json"], unit="candidates"
    ) as update:
        frontier, result = kanon_frontier(
            provider,
            qis,
            risk_target,
            model=model,
            suppression_limit=options["suppression_limit"],
            metric=options["metric"],
            progress=update,
        )
    if result is None:
        raise frontier.refusal("raise --max-risk or --suppression-limit, or use coarser hierarchies")
    return frontier, result


def _add_search(report: dict[str, Any], frontier: Frontier, options: dict[str, Any]) -> None:
    """The frontier in the report, and its picture when asked for."""
    report["search"] = frontier.to_dict()
    if options["plot_path"] is not None:
        plot_frontier(frontier, options["plot_path"])


def _released_sizes(result: GlobalRecodingResult) -> np.ndarray:
    return result.classes.counts[~result.suppressed]


def _released_sensitive(result: GlobalRecodingResult) -> np.ndarray | None:
    sensitive = result.classes.sensitive
    return None if sensitive is None else sensitive[~result.suppressed]


def _mondrian(
    source: TableSource,
    qis: list[str],
    specs: dict[str, str],
    model: PrivacyModel,
    target: OutputTarget,
    options: dict[str, Any],
) -> dict[str, Any]:
    """Mondrian on codes in the engine when it can (DuckDB sources: about 85 bytes per row), on a
    DataFrame of the rows otherwise (PostgreSQL tables, whose row order the engine does not keep, and
    --utility-target, whose models train on the rows anyway)."""
    if source.dialect == "duckdb" and not options["utility_target"]:
        run = _mondrian_on_codes(source, qis, specs, model, target, options)
    else:
        run = _mondrian_on_frame(source, qis, specs, model, target, options)
    summary = run.summary
    matrix = None if run.sensitive is None else _class_matrix(run.row_classes, run.sensitive)
    attack = class_attack(run.class_sizes, 0, matrix)
    report = _report("kanon", options, source, target, run.rows, run.rows)
    report["transformation"] = {
        "algorithm": "relaxed Mondrian" if options["relaxed"] else "strict Mondrian",
        "recoding": options["recoding"],
        "categorical": options["categorical"],
        "classes": summary.classes,
        "boxes": summary.boxes,
        "class_sizes": {str(s): c for s, c in sorted(summary.class_sizes.items())},
    }
    if matrix is not None:
        report["transformation"]["achieved"] = achieved(matrix, matrix.sum(axis=0) / run.rows)
    report["risk"] = {
        "simulated_attack": attack.to_dict(),
        "model": "Mondrian: published classes (boxes under identical labels merged), |C_i| ≥ class size "
        "(an upper bound on the risk)",
    }
    report["utility"] = {"metrics": {"gcp": summary.gcp, **{f"ncp_{q}": v for q, v in summary.ncp.items()}}}
    if run.utility is not None:
        report["utility"]["ml"] = run.utility
    return report


@dataclass(frozen=True)
class _MondrianRun:
    """What the report needs from either path: every row's published class and sensitive code."""

    summary: MondrianSummary
    rows: int
    row_classes: np.ndarray
    class_sizes: np.ndarray
    sensitive: _SensitiveCodes | None
    utility: dict[str, Any] | None = None


@dataclass(frozen=True)
class _SensitiveCodes:
    codes: np.ndarray  # per row, the index of its sensitive value among the sorted distinct values
    width: int


def _mondrian_on_codes(
    source: TableSource,
    qis: list[str],
    specs: dict[str, str],
    model: PrivacyModel,
    target: OutputTarget,
    options: dict[str, Any],
) -> _MondrianRun:
    types = dict(source.columns())
    categorical = [q for q in qis if q in specs or not _numeric_type(types[q])]
    hierarchies = _hierarchies(source, categorical, specs, engine_text=True)
    sensitive = _engine_sensitive(source, options["sensitive"])
    release = mondrian_source(source, qis, **_mondrian_settings(model, hierarchies, sensitive, options))
    write_release(source, release, target, replace=options["replace"])
    return _MondrianRun(
        release.summary, len(release.box), release.row_classes(), release.class_sizes(), sensitive
    )


def _mondrian_on_frame(
    source: TableSource,
    qis: list[str],
    specs: dict[str, str],
    model: PrivacyModel,
    target: OutputTarget,
    options: dict[str, Any],
) -> _MondrianRun:
    sensitive_column = options["sensitive"]
    frame = source.dataframe(list(dict.fromkeys(source.column_names())))
    _require_values(frame, [*qis, *([sensitive_column] if sensitive_column else [])])
    categorical = [q for q in qis if q in specs or not pd.api.types.is_numeric_dtype(frame[q])]
    hierarchies = _hierarchies(source, categorical, specs, engine_text=False)
    sensitive = None
    if sensitive_column:
        codes, values = pd.factorize(frame[sensitive_column].astype(str), sort=True)
        sensitive = _SensitiveCodes(codes, len(values))
    result = mondrian(frame, qis, **_mondrian_settings(model, hierarchies, sensitive, options))
    write_frame(
        result.table.drop(columns=["equivalence_class"]), target, source=source, replace=options["replace"]
    )
    sizes = np.array([len(rows) for rows in result.classes], dtype=np.int64)
    row_classes = np.empty(len(frame), dtype=np.int64)
    row_classes[np.concatenate(result.classes)] = np.repeat(np.arange(len(sizes)), sizes)
    utility = _mondrian_utility(frame, result, qis, options) if options["utility_target"] else None
    return _MondrianRun(result.summary, len(frame), row_classes, sizes, sensitive, utility)


def _mondrian_settings(
    model: PrivacyModel,
    hierarchies: dict[str, Hierarchy],
    sensitive: _SensitiveCodes | None,
    options: dict[str, Any],
) -> dict[str, Any]:
    """What both Mondrian paths are given besides the rows: k, hierarchies, recoding, the cut test."""
    return {
        "k": model.k,
        "hierarchies": hierarchies,
        "recoding": options["recoding"],
        "relaxed": options["relaxed"],
        "allowable": _allowable(sensitive, model),
        "categorical": options["categorical"],
    }


def _numeric_type(engine_type: str) -> bool:
    """Whether a DuckDB column type is a number (Mondrian cuts it at medians without a hierarchy)."""
    return engine_type.split("(")[0].upper() in _NUMERIC_TYPES


_NUMERIC_TYPES = frozenset(
    [
        "TINYINT",
        "SMALLINT",
        "INTEGER",
        "BIGINT",
        "HUGEINT",
        "UTINYINT",
        "USMALLINT",
        "UINTEGER",
        "UBIGINT",
        "UHUGEINT",
        "FLOAT",
        "DOUBLE",
        "DECIMAL",
        "REAL",
    ]
)


def _engine_sensitive(source: TableSource, column: str | None) -> _SensitiveCodes | None:
    """The sensitive column as codes read by the engine (sorted text, as the DataFrame path sorts it)."""
    if column is None:
        return None
    if source.null_counts([column])[column]:
        raise _null_values(column)
    texts = sorted(source.distinct_values(column))
    dictionary = pd.DataFrame({"value": texts, "code": np.arange(len(texts), dtype=np.int64)})
    return _SensitiveCodes(source.codes({column: dictionary}, text=[column])[column], len(texts))


def _require_values(frame: pd.DataFrame, columns: list[str]) -> None:
    """Refuse NULLs in the columns an algorithm reads, as the engine path does: no hierarchy covers them."""
    for column in columns:
        if frame[column].isna().any():
            raise _null_values(column)


def _null_values(column: str) -> AnonymizationError:
    return AnonymizationError(
        f"{column} has NULL values, which no hierarchy covers",
        hint="filter or fill them before anonymizing (e.g. with COALESCE in a view)",
    )


def _allowable(sensitive: _SensitiveCodes | None, model: PrivacyModel) -> Callable[[np.ndarray], bool] | None:
    """Mondrian's cut test for the diversity model: the candidate class's sensitive counts pass it."""
    if sensitive is None or not model.diversity.active:
        return None
    codes, width = sensitive.codes, sensitive.width
    overall = np.bincount(codes, minlength=width) / len(codes)

    def allowed(rows: np.ndarray) -> bool:
        counts = np.bincount(codes[rows], minlength=width)[None, :]
        return not bool(model.diversity.failing(counts, overall)[0])

    return allowed


def _class_matrix(row_classes: np.ndarray, sensitive: _SensitiveCodes) -> np.ndarray:
    """Published classes × sensitive values: how many rows of each class hold each value."""
    classes = int(row_classes.max()) + 1 if len(row_classes) else 0
    flat = row_classes.astype(np.int64) * sensitive.width + sensitive.codes
    return np.bincount(flat, minlength=classes * sensitive.width).reshape(classes, sensitive.width)


def _report(
    command: str,
    options: dict[str, Any],
    source: TableSource,
    target: OutputTarget,
    rows_in: int,
    rows_out: int,
) -> dict[str, Any]:
    unused = {"config_path", "as_json", "report_path", "replace"}
    if options.get("max_risk") is None:
        unused.add("risk_measure")  # a default that measured nothing
    parameters = {
        key: value for key, value in options.items() if key not in unused and value not in (None, (), False)
    }
    return {
        "command": f"veil materialize {command}",
        "source": source.description,
        "output": options["out"],
        "parameters": {
            k: list(v) if isinstance(v, tuple) else (str(v) if isinstance(v, Path) else v)
            for k, v in parameters.items()
        },
        "rows_in": rows_in,
        "rows_out": rows_out,
    }


# --- utility ------------------------------------------------------------------------------------------------


def _split(rows: int, options: dict[str, Any]) -> Holdout:
    """E and the training rows; reproducible with --seed, else drawn from the OS's randomness."""
    return holdout(rows, rng=np.random.default_rng(options["seed"]))


def _global_utility(
    source: TableSource,
    hierarchies: dict[str, Hierarchy],
    result: GlobalRecodingResult,
    options: dict[str, Any],
) -> dict[str, Any]:
    """Uti of a globally recoded table: the models train on the released rows of the training part
    (suppressed rows are not released) and are tested on E recoded the same way."""
    qis = list(result.qi)
    frame = source.dataframe(list(dict.fromkeys([*qis, options["utility_target"]])))
    text = frame.astype({q: str for q in qis})
    pipeline = Pipeline(
        tuple(
            AttributePipeline(q, (Generalize(hierarchies[q], level),))
            for q, level in result.level_map.items()
        )
    )
    released = recode(text, pipeline)
    split = _split(len(frame), options)
    kept = ~_suppressed_rows(text, hierarchies, result)
    train = split.train[kept[split.train]]
    return _score(frame, released, train, split.test, qis, options)


def _suppressed_rows(
    text: pd.DataFrame, hierarchies: dict[str, Hierarchy], result: GlobalRecodingResult
) -> np.ndarray:
    """Which rows fall in a suppressed class: each row's label codes matched against the class table."""
    codes = np.column_stack(
        [
            hierarchies[q].codes[level][hierarchies[q].leaf_codes(text[q])]
            for q, level in zip(result.qi, result.levels, strict=True)
        ]
    )
    classes = pd.DataFrame(result.classes.labels, columns=list(result.qi)).assign(
        _suppressed=result.suppressed
    )
    rows = pd.DataFrame(codes, columns=list(result.qi))
    return rows.merge(classes, on=list(result.qi), how="left")["_suppressed"].to_numpy(dtype=bool)


def _mondrian_utility(
    frame: pd.DataFrame, result: MondrianResult, qis: list[str], options: dict[str, Any]
) -> dict[str, Any]:
    split = _split(len(frame), options)
    return _score(frame, result.table, split.train, split.test, qis, options)


def _score(
    original: pd.DataFrame,
    released: pd.DataFrame,
    train: np.ndarray,
    test: np.ndarray,
    qis: list[str],
    options: dict[str, Any],
) -> dict[str, Any]:
    """Uti with E = ``test`` rows: ``released`` holds every row in the released schema, in input order."""
    utility = ml_utility(
        original_train=original.iloc[train],
        released_train=released.iloc[train],
        original_test=original.iloc[test],
        released_test=released.iloc[test],
        target=options["utility_target"],
        features=qis,
        positive=options["utility_positive"],
        model=options["utility_model"],
    )
    return utility.to_dict()


# --- combine ------------------------------------------------------------------------------------------------


@materialize.command(
    "combine", short_help="Generalize, add noise, randomize and sample (ch. 4), then score the risk."
)
@source_options
@click.option("--qi", required=True, help="Quasi-identifiers, comma-separated.")
@click.option("--sensitive", help="Sensitive attribute (for the revealing risk).")
@hierarchy_option
@step_option
@click.option(
    "--sample",
    "sample_rate",
    type=click.FloatRange(0, 1, min_open=True),
    help="Keep each row with this probability.",
)
@with_options(attack_options)
@with_options(target_options)
@with_options(output_options)
@friendly_errors
@engine_errors
def combine_command(**options: Any) -> None:
    """Combined de-identification (ch. 4): generalize, add noise, randomize, sample — then score the risk.

    \b
    Example:
      veil materialize combine --input adult.csv --qi age,workclass,marital-status \\
          --step age=laplace:epsilon=0.5,lower=17,upper=90 \\
          --step workclass=generalize:1 --hierarchy workclass=workclass.csv \\
          --step marital-status=randomize:epsilon=0.5 --sample 0.8 --out released.parquet

    With --max-risk R, the noise steps' ε (scaled together, at most as given) and the sampling rate (at
    most --sample) are searched for the least cell loss at risk ≤ R.
    """
    qis = split_columns(options["qi"], "--qi")
    risk_target = _risk_target(options)
    with open_source(*source_arguments(options)) as source:
        sensitive = options["sensitive"]
        source.require_columns([*qis, *([sensitive] if sensitive else [])])
        frame = source.dataframe(source.column_names())
        _require_values(frame, [*qis, *([sensitive] if sensitive else [])])
        target = OutputTarget.parse(options["out"])
        ensure_writable(target, source, replace=options["replace"])
        pipeline = attack_pipeline(frame, qis, options)
        frontier = None
        if risk_target is None:
            released = combine(frame, pipeline, seed=options["seed"])
        else:
            frontier, released, pipeline = _searched_combine(frame, pipeline, qis, risk_target, options)
        write_frame(released.table, target, source=source, replace=options["replace"])
        report = _report("combine", options, source, target, len(frame), len(released.table))
    _combine_report(report, frame, released, pipeline, qis, options)
    if frontier is not None:
        _add_search(report, frontier, options)
    _finish(report, options)


def _searched_combine(
    frame: pd.DataFrame, pipeline: Pipeline, qis: list[str], risk_target: Target, options: dict[str, Any]
) -> tuple[Frontier, Released, Pipeline]:
    """The --max-risk grid: every candidate drawn and measured; the chosen draw is the one written."""

    def evaluate(candidate: Pipeline) -> tuple[Released, float, float]:
        released = combine(frame, candidate, seed=options["seed"])
        loss = information_loss(frame, released.table, row_ids=released.row_ids, columns=qis).cell_loss
        return released, _combine_risk(frame, released, candidate, qis, risk_target, options), loss

    with progress_bar(
        "searching ε and the sampling rate", quiet=options["as_json"], unit="candidates"
    ) as update:
        frontier, released, chosen = combine_frontier(
            combine_grid(pipeline), risk_target, evaluate, progress=update
        )
    if released is None or chosen is None:
        raise frontier.refusal("raise --max-risk, or generalize more (--step COLUMN=generalize:LEVEL)")
    return frontier, released, chosen


def _combine_risk(
    frame: pd.DataFrame,
    released: Released,
    pipeline: Pipeline,
    qis: list[str],
    risk_target: Target,
    options: dict[str, Any],
) -> float:
    """A candidate's risk by the target's measure; the journalist's population share is λ·α."""
    if risk_target.measure == "simulated":
        return run_attack(
            frame, released.table, released.row_ids, pipeline, options, show_progress=False
        ).risk
    if not len(released.table):
        return 0.0
    rate = 1.0 if pipeline.sample is None else pipeline.sample.rate
    fraction = None if risk_target.sampling_fraction is None else risk_target.sampling_fraction * rate
    return classic_measure(risk_target, classic_risk(released.table, qis, sampling_fraction=fraction))


def _combine_report(
    report: dict[str, Any],
    frame: pd.DataFrame,
    released: Released,
    pipeline: Pipeline,
    qis: list[str],
    options: dict[str, Any],
) -> None:
    """What was done, the risk and the utility of a combine release."""
    report["transformation"] = released.report.to_dict()
    attack = run_attack(frame, released.table, released.row_ids, pipeline, options)
    report["risk"] = {
        "simulated_attack": attack.to_dict(),
        "classic": vars(classic_risk(released.table, qis)),
    }
    report["utility"] = {"metrics": _loss_metrics(frame, released.table, released.row_ids, qis)}
    if options["utility_target"]:
        split = _split(len(frame), options)
        train = np.flatnonzero(np.isin(released.row_ids, split.train))
        released_test = recode(frame.iloc[split.test], pipeline)
        utility = ml_utility(
            original_train=frame.iloc[split.train],
            released_train=released.table.iloc[train],
            original_test=frame.iloc[split.test],
            released_test=released_test,
            target=options["utility_target"],
            features=qis,
            positive=options["utility_positive"],
            model=options["utility_model"],
        )
        report["utility"]["ml"] = utility.to_dict()


def _loss_metrics(
    original: pd.DataFrame, released: pd.DataFrame, row_ids: np.ndarray, qis: list[str]
) -> dict[str, float]:
    """The cell loss (what --max-risk minimizes); per QI the share of released cells that differ from the
    original, and the mean absolute error where the values are numbers (what the noise costs)."""
    loss = information_loss(original, released, row_ids=row_ids, columns=qis)
    metrics = {"cell_loss": loss.cell_loss, "released_share": loss.released_share}
    for column in loss.columns:
        metrics[f"changed_share_{column.attribute}"] = column.changed_share
        if column.mean_absolute_error is not None:
            metrics[f"mean_absolute_error_{column.attribute}"] = column.mean_absolute_error
    return metrics


def _register_subcommands() -> None:
    """The commands that live in modules of their own."""
    from proxy.cli.diversity import diversity_command
    from proxy.cli.factorize import factorize_command

    materialize.add_command(diversity_command)
    materialize.add_command(factorize_command)


_register_subcommands()
