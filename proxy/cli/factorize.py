"""``veil materialize factorize`` and ``veil risk factorized``: de-identified time-sequence releases of an
event table by matrix factorization ([D] ch. 5; spec ``matrix-factorization.md``), scored by the Hungarian
re-identification and linkage attacks.

The release is a long table — one row per (window, pseudonym, item) with the published real value, or only
the cells at 1 under ``--threshold`` — with fresh pseudonyms in every window. The pseudonym → user mapping
exists only in the report (``--report``), which therefore stays with the original data: it is what the
evaluator needs to score the attacks, and exactly what the attacker must not have.

This is not differential privacy and spends no budget: the noise is the papers' perturbation without
sensitivity calibration.
"""

from __future__ import annotations

import json
import secrets
import time
from pathlib import Path
from typing import Any

import click
import numpy as np
import pandas as pd

from anonymizers.errors import AnonymizationError
from anonymizers.event_windows import EventWindows, WindowSpec, build_windows
from anonymizers.factorization import SOLVERS
from anonymizers.factorized_release import (
    METHODS,
    ReleaseSettings,
    Risks,
    WindowRelease,
    release_window,
    score_windows,
)
from anonymizers.matrix_utility import matrix_utility
from anonymizers.output import OutputTarget, ensure_writable, write_frame
from anonymizers.plots import plot_factorization, require_matplotlib
from proxy.cli.sources import (
    engine_errors,
    open_source,
    progress_bar,
    read_released,
    source_arguments,
    source_options,
)
from proxy.cli.support import echo_json, friendly_errors, json_option, print_table

REPORT_FORMAT = "veil-factorized-release/1"
_METRICS = ("euclidean", "cosine", "cityblock")
_PSEUDONYM_BITS = 48


def _window_options(function: Any) -> Any:
    for option in reversed(
        [
            click.option("--user", required=True, help="Column identifying the person (never published)."),
            click.option("--item", required=True, help="Column of the item (page, product, movie)."),
            click.option("--time", "time_column", required=True, help="Timestamp, date or epoch seconds."),
            click.option(
                "--window",
                required=True,
                help="Window length (30min, 8h, 2d, 1w), or 'median': each user's events before and after "
                "their median event.",
            ),
            click.option(
                "--windows",
                type=click.IntRange(min=2),
                default=2,
                show_default=True,
                help="Windows in a row.",
            ),
            click.option("--start", help="First window's start (default: the first event)."),
            click.option("--top-users", type=click.IntRange(min=2), help="Keep the N most active users."),
            click.option("--top-items", type=click.IntRange(min=2), help="Keep the N most frequent items."),
        ]
    ):
        function = option(function)
    return function


def _scoring_options(function: Any) -> Any:
    for option in reversed(
        [
            click.option(
                "--distance",
                type=click.Choice(_METRICS),
                default="euclidean",
                show_default=True,
                help="Row distance of the Hungarian attack.",
            ),
            click.option(
                "--utility-columns",
                type=click.IntRange(min=0),
                default=50,
                show_default=True,
                help="Random item columns predicted for Uti (0: skip; needs scikit-learn).",
            ),
            click.option(
                "--plot",
                "plot_path",
                type=click.Path(path_type=Path, dir_okay=False),
                help="Draw the error curves and the risks to this PNG (needs [plot]).",
            ),
        ]
    ):
        function = option(function)
    return function


@click.command("factorize", short_help="Publish an event table as de-identified, factorized windows.")
@source_options
@_window_options
@click.option(
    "--method", type=click.Choice(METHODS), default="mf", show_default=True, help="mf or a baseline."
)
@click.option(
    "--k", type=click.IntRange(min=1), help="k-member clustering of the user factors (or of M's rows)."
)
@click.option("--noise", type=float, help="Laplace scale φ on the user factors (or on M); 0 = MF alone.")
@click.option("--rank", type=click.IntRange(min=1), default=20, show_default=True, help="Rank r.")
@click.option("--iterations", type=click.IntRange(min=1), default=100, show_default=True, help="Epochs.")
@click.option("--learning-rate", type=float, default=0.05, show_default=True, help="SGD step γ.")
@click.option("--regularization", type=float, default=0.01, show_default=True, help="λ ([J] uses 0.5).")
@click.option(
    "--solver",
    type=click.Choice(["auto", *SOLVERS]),
    default="auto",
    show_default=True,
    help="sgd (the papers'), als (same objective, faster), nmf; auto = sgd up to 2M cells, else als.",
)
@click.option(
    "--refit-v",
    type=click.Choice(["none", "one-epoch"]),
    default="none",
    show_default=True,
    help="Refit V once with the de-identified U fixed (the papers' prose).",
)
@click.option("--clip", is_flag=True, help="Clip published values to [0, 1].")
@click.option(
    "--threshold", type=float, help="Publish 0/1 (value >= threshold); only the 1 cells are written."
)
@_scoring_options
@click.option("--out", "out", required=True, help="PATH.csv, PATH.parquet, or db:TABLE.")
@click.option(
    "--report",
    "report_path",
    type=click.Path(path_type=Path, dir_okay=False),
    help="Write the report, with the pseudonym mapping (keep it private).",
)
@click.option("--replace", is_flag=True, help="Overwrite --out and --report if they exist.")
@click.option("--seed", type=int, help="Seed everything (research runs only; default: the OS's CSPRNG).")
@json_option
@friendly_errors
@engine_errors
def factorize_command(**options: Any) -> None:
    """Publish per-window user × item matrices, de-identified through their factorization ([D] ch. 5).

    The engine builds each window's 0/1 matrix (user had an event on the item in the window); each window is
    factorized M ≈ UVᵀ, only the user factors U are de-identified (--k: k-member clustering, every output row
    then occurs ≥ k times; --noise: Laplace of scale φ), and X = U′Vᵀ is published under fresh pseudonyms.
    --method kanon-matrix / noise-matrix apply the same de-identification to M itself (the baselines). The
    release is then attacked: Hungarian re-identification of every window and linkage of consecutive ones,
    and its utility measured by logistic regression over random item columns.

    \b
    Example:
      veil materialize factorize --input ratings.csv --user userId --item movieId --time timestamp \\
          --window median --top-users 200 --top-items 1000 --noise 0.15 --rank 30 \\
          --out ratings_mf.parquet --report ratings_mf.json
    """
    settings = _settings(options)
    spec = WindowSpec.parse(options["window"], count=options["windows"], start=options["start"])
    target = OutputTarget.parse(options["out"])
    if options["plot_path"] is not None:
        require_matplotlib()
    _check_report_path(options["report_path"], options["replace"])
    seed = options["seed"] if options["seed"] is not None else secrets.randbits(128)
    rng = np.random.default_rng(seed)
    started = time.monotonic()
    with open_source(*source_arguments(options)) as source:
        ensure_writable(target, source, replace=options["replace"])
        windows = _windows(source, options, spec)
        releases = _release_all(windows, settings, rng, quiet=options["as_json"])
        published = [r.published for r in releases]
        pseudonyms = [_pseudonyms(len(windows.users), rng) for _ in published]
        frame = _long_table(published, pseudonyms, windows.items, sparse=settings.threshold is not None)
        write_frame(frame, target, source=source, replace=options["replace"])
    risks = _score(windows.matrices, published, settings.k, options)
    report = _report(options, spec, windows, settings, releases, risks, pseudonyms, started)
    report["utility"] = _utility(windows.matrices, published, options["utility_columns"], rng)
    report["warnings"] = _warnings(published, settings)
    report["seconds"] = round(time.monotonic() - started, 2)
    _finish(report, options, f"wrote {len(frame):,} rows to {options['out']}")


@click.command("factorized", short_help="Re-score a factorized release against its original windows.")
@source_options
@click.option(
    "--report",
    "report_path",
    required=True,
    type=click.Path(path_type=Path, dir_okay=False, exists=True),
    help="The report `veil materialize factorize` wrote (holds the mapping and the windows).",
)
@click.option("--released", required=True, help="The release: PATH.csv, PATH.parquet or db:TABLE.")
@click.option("--released-delimiter", help="CSV field separator of --released (default: guessed).")
@_scoring_options
@click.option("--seed", type=int, help="Seed the utility's user split and columns.")
@json_option
@friendly_errors
@engine_errors
def factorized_risk_command(**options: Any) -> None:
    """Hungarian re-identification and linkage risk, and utility, of a factorized release.

    Rebuilds the original windows from the source (by default the one the report names) with the report's
    windowing, reads the release, places every pseudonym back on its user with the report's mapping, and
    runs the attacks — a second opinion on the numbers the materialize command printed, or the same release
    scored with another --distance.

    \b
    Example:
      veil risk factorized --report ratings_mf.json --released ratings_mf.parquet --distance cosine
    """
    recorded = _read_report(options["report_path"])
    started = time.monotonic()
    _default_source(options, recorded)
    window = recorded["windows"]
    spec = WindowSpec(window.get("seconds"), window["windows"], start_epoch=window.get("start"))
    with open_source(*source_arguments(options)) as source:
        windows = _windows(
            source, {**options, **recorded["columns"]}, spec, users=recorded["users"], items=recorded["items"]
        )
    released = read_released(
        options["released"], options["config_path"], options["dataset"], options["released_delimiter"]
    )
    published = _dense_windows(released, recorded, len(windows.matrices))
    k = recorded["settings"]["k"]
    risks = _score(windows.matrices, published, k, options)
    rng = np.random.default_rng(options["seed"] if options["seed"] is not None else secrets.randbits(128))
    report = {
        "format": REPORT_FORMAT,
        "release": options["released"],
        "settings": recorded["settings"],
        "distance": options["distance"],
        "users": windows.users,
        "items": windows.items,
        "risk": risks.to_dict(),
        "risk_mean": dict(zip(("reidentification", "linkage"), risks.headline, strict=True)),
        "utility": _utility(windows.matrices, published, options["utility_columns"], rng),
    }
    report["seconds"] = round(time.monotonic() - started, 2)
    _finish(report, options, None)


def _settings(options: dict[str, Any]) -> ReleaseSettings:
    return ReleaseSettings(
        method=options["method"],
        k=options["k"],
        noise=options["noise"],
        rank=options["rank"],
        iterations=options["iterations"],
        learning_rate=options["learning_rate"],
        regularization=options["regularization"],
        solver=options["solver"],
        refit_v=options["refit_v"],
        clip=options["clip"],
        threshold=options["threshold"],
    )


def _check_report_path(path: Path | None, replace: bool) -> None:
    if path is None:
        return
    if path.exists() and not replace:
        raise AnonymizationError(f"{path} already exists", hint="choose another path, or pass --replace")
    if not path.parent.is_dir():
        raise AnonymizationError(f"directory {path.parent} does not exist")


def _windows(
    source: Any,
    options: dict[str, Any],
    spec: WindowSpec,
    *,
    users: list[str] | None = None,
    items: list[str] | None = None,
) -> EventWindows:
    """The engine's window matrices; with ``users``/``items`` (a recorded release), laid out in their order."""
    built = build_windows(
        source,
        user=options["user"],
        item=options["item"],
        time=options["time_column"],
        spec=spec,
        top_users=options["top_users"],
        top_items=options["top_items"],
    )
    if users is None or items is None:
        return built
    return _realign(built, users, items)


def _realign(built: EventWindows, users: list[str], items: list[str]) -> EventWindows:
    """The recorded users and items in their recorded order; one missing from the source is an error (the
    source changed since the release)."""
    user_index = {name: i for i, name in enumerate(built.users)}
    item_index = {name: j for j, name in enumerate(built.items)}
    missing = [u for u in users if u not in user_index][:3] + [i for i in items if i not in item_index][:3]
    if missing:
        raise AnonymizationError(
            f"the source no longer holds {', '.join(map(repr, missing))} of the release",
            hint="score the release against the source it was made from",
        )
    rows = np.array([user_index[u] for u in users])
    columns = np.array([item_index[i] for i in items])
    matrices = [m[np.ix_(rows, columns)] for m in built.matrices]
    return EventWindows(matrices, users, items, built.start, built.events)


def _release_all(
    windows: EventWindows, settings: ReleaseSettings, rng: np.random.Generator, *, quiet: bool
) -> list[WindowRelease]:
    releases = []
    with progress_bar("factorizing windows", quiet=quiet) as update:
        for window, matrix in enumerate(windows.matrices):
            releases.append(release_window(matrix, settings, rng))
            update(window + 1, len(windows.matrices))
    # Published values are stored as REAL: scoring the float32 values is scoring exactly what is written.
    return [WindowRelease(r.published.astype(np.float32), r.labels, r.errors, r.solver) for r in releases]


def _pseudonyms(count: int, rng: np.random.Generator) -> list[str]:
    """``count`` distinct fresh random pseudonyms: nothing about them links two windows."""
    values: set[int] = set()
    while len(values) < count:
        values.update(int(v) for v in rng.integers(0, 1 << _PSEUDONYM_BITS, size=count - len(values)))
    drawn = list(values)
    rng.shuffle(drawn)
    return [f"p{v:012x}" for v in drawn]


def _long_table(
    published: list[np.ndarray], pseudonyms: list[list[str]], items: list[str], *, sparse: bool
) -> pd.DataFrame:
    """One row per (window, pseudonym, item) — only the 1 cells when ``sparse`` — ordered by pseudonym, so
    the row order says nothing about the users' order in the source."""
    parts = []
    for window, (matrix, names) in enumerate(zip(published, pseudonyms, strict=True)):
        order = np.argsort(names)
        rows, columns = np.nonzero(matrix[order]) if sparse else np.indices(matrix.shape).reshape(2, -1)
        parts.append(
            pd.DataFrame(
                {
                    "window": np.full(rows.size, window + 1, dtype=np.int16),
                    "pseudonym": np.asarray(names, dtype=object)[order][rows],
                    "item": np.asarray(items, dtype=object)[columns],
                    "value": matrix[order][rows, columns],
                }
            )
        )
    return pd.concat(parts, ignore_index=True)


def _dense_windows(released: pd.DataFrame, recorded: dict[str, Any], count: int) -> list[np.ndarray]:
    """The release's long table back in the recorded users × items layout (absent cells are 0)."""
    missing = {"window", "pseudonym", "item", "value"} - set(released.columns)
    if missing:
        raise AnonymizationError(
            f"the release has no column {', '.join(sorted(missing))}",
            hint="give the table `veil materialize factorize` wrote",
        )
    items = {name: j for j, name in enumerate(recorded["items"])}
    matrices = []
    for window in range(count):
        mapping = recorded["mapping"][window]
        rows_of = {pseudonym: i for i, pseudonym in enumerate(mapping)}
        part = released[released["window"] == window + 1]
        rows = part["pseudonym"].astype(str).map(rows_of)
        columns = part["item"].astype(str).map(items)
        if rows.isna().any() or columns.isna().any():
            raise AnonymizationError(
                f"window {window + 1} of the release holds pseudonyms or items the report does not know",
                hint="give the report written with this release",
            )
        matrix = np.zeros((len(mapping), len(items)), dtype=np.float32)
        matrix[rows.to_numpy(dtype=np.intp), columns.to_numpy(dtype=np.intp)] = part["value"].to_numpy()
        matrices.append(matrix)
    return matrices


def _score(
    originals: list[np.ndarray], published: list[np.ndarray], k: int | None, options: dict[str, Any]
) -> Risks:
    with progress_bar("attacks", quiet=options["as_json"]) as update:
        return score_windows(originals, published, k=k, metric=options["distance"], progress=update)


def _utility(
    originals: list[np.ndarray], published: list[np.ndarray], columns: int, rng: np.random.Generator
) -> dict[str, Any] | None:
    """Uti of every window and their mean; None when skipped."""
    if columns == 0:
        return None
    per_window = [
        matrix_utility(o, p, columns=columns, rng=rng).to_dict()
        for o, p in zip(originals, published, strict=True)
    ]
    return {"uti_mean": float(np.mean([w["uti"] for w in per_window])), "windows": per_window}


def _report(
    options: dict[str, Any],
    spec: WindowSpec,
    windows: EventWindows,
    settings: ReleaseSettings,
    releases: list[WindowRelease],
    risks: Risks,
    pseudonyms: list[list[str]],
    started: float,
) -> dict[str, Any]:
    return {
        "format": REPORT_FORMAT,
        "source": {
            key: _plain(options[key])
            for key in ("config_path", "dataset", "table", "input_path", "delimiter")
        },
        "columns": {key: options[key] for key in ("user", "item", "time_column", "top_users", "top_items")},
        "windows": {**spec.describe(), "start": windows.start},
        "events": windows.events,
        "users": windows.users,
        "items": windows.items,
        "settings": {**settings.to_dict(), "solver": [r.solver for r in releases]},
        "seed": options["seed"],
        "distance": options["distance"],
        "risk": risks.to_dict(),
        "risk_mean": dict(zip(("reidentification", "linkage"), risks.headline, strict=True)),
        "errors": [None if r.errors is None else r.errors.round(3).tolist() for r in releases],
        "mapping": pseudonyms,
    }


def _plain(value: Any) -> Any:
    return str(value) if isinstance(value, Path) else value


def _finish(report: dict[str, Any], options: dict[str, Any], written: str | None) -> None:
    """Write the report (materialize only: it holds the mapping) and the plot, then print the summary —
    the mapping never goes to the terminal."""
    report_path = options["report_path"] if "mapping" in report else None
    if report_path is not None:
        report_path.write_text(json.dumps(report, indent=1) + "\n")
    if options["plot_path"] is not None:
        plot_factorization(report, options["plot_path"])
    summary = {key: value for key, value in report.items() if key not in ("mapping", "errors")}
    summary["users"], summary["items"] = len(report["users"]), len(report["items"])
    if options["as_json"]:
        echo_json(summary)
        return
    print_table(_rows(summary), ["measure", "value"])
    for warning in summary.get("warnings", []):
        click.echo(f"warning: {warning}")
    notes = [
        written,
        report_path and f"report: {report_path}",
        options["plot_path"] and f"plot: {options['plot_path']}",
    ]
    for line in filter(None, notes):
        click.echo(line)


def _rows(summary: dict[str, Any]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = [
        {"measure": "users × items", "value": f"{summary['users']} × {summary['items']}"},
        {"measure": "method", "value": _method_text(summary["settings"])},
    ]
    risk, clustered = summary["risk"], summary["settings"]["k"] is not None
    rows += [
        {"measure": f"re-identification risk, window {w + 1}", "value": _risk_text(r, clustered)}
        for w, r in enumerate(risk["reidentification"])
    ]
    rows += [
        {"measure": f"linkage risk, windows {w + 1}→{w + 2}", "value": _risk_text(r, clustered)}
        for w, r in enumerate(risk["linkage"])
    ]
    if summary.get("utility"):
        rows.append({"measure": "utility (Uti, mean)", "value": round(summary["utility"]["uti_mean"], 4)})
    rows.append({"measure": "seconds", "value": summary["seconds"]})
    return rows


def _risk_text(scores: dict[str, float], clustered: bool) -> str | float:
    """The sources' score; for clustered releases the exact 1/|group| credit beside it, since 1/k overstates
    the risk when post-processing merges groups (an all-zero release is one group of everyone)."""
    if not clustered:
        return round(scores["risk"], 4)
    return f"{scores['risk']:.4f} (1/|group| credit: {scores['risk_exact_credit']:.4f})"


def _warnings(published: list[np.ndarray], settings: ReleaseSettings) -> list[str]:
    """What makes a release useless or its scores misleading, said once in the summary and the report."""
    notes = []
    for window, matrix in enumerate(published, 1):
        if settings.threshold is not None and not matrix.any():
            notes.append(
                f"window {window}: no value reached the threshold {settings.threshold:g}, so nothing was written "
                "(a fit over all cells of a sparse matrix is small everywhere: use --clip, or a lower "
                "--regularization)"
            )
        elif len(np.unique(matrix, axis=0)) == 1:
            notes.append(f"window {window}: every user was published identically")
    return notes


def _method_text(settings: dict[str, Any]) -> str:
    what = f"k = {settings['k']}" if settings["k"] is not None else f"φ = {settings['noise']}"
    if settings["method"] != "mf":
        return f"{settings['method']}, {what}"
    solvers = settings["solver"] if isinstance(settings["solver"], list) else [settings["solver"]]
    return f"mf (rank {settings['rank']}, {'/'.join(sorted(set(solvers)))}), {what}"


def _read_report(path: Path) -> dict[str, Any]:
    try:
        report = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise AnonymizationError(f"cannot read the report {path}", hint=str(error)) from None
    if not isinstance(report, dict) or report.get("format") != REPORT_FORMAT or "mapping" not in report:
        raise AnonymizationError(
            f"{path} is not a report of `veil materialize factorize`",
            hint="give the --report file that command wrote",
        )
    return report


def _default_source(options: dict[str, Any], recorded: dict[str, Any]) -> None:
    """No source options given: the source the report names."""
    if options["input_path"] or options["dataset"] or options["table"]:
        return
    source = recorded["source"]
    options["input_path"] = Path(source["input_path"]) if source.get("input_path") else None
    options["dataset"], options["table"] = source.get("dataset"), source.get("table")
    options["delimiter"] = source.get("delimiter")
    options["config_path"] = Path(source["config_path"])
