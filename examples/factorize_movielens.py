"""Matrix-factorization de-identification of time-sequence data on MovieLens: the shape of [D] ch. 5's
Tables 5.2–5.14 (seed 000 ch. 5, journal version 003; spec ``matrix-factorization.md`` §6-7 and
``simulated-attack-risk.md`` §8).

The seed's web-access log is not public. As the spec prescribes, this script uses MovieLens ratings: the
200 most active users × the 1,000 most rated items, window t1 = each user's ratings before their median
rating, t2 = after it (the same users under fresh pseudonyms). The windows are built by the engine exactly
as ``veil materialize factorize --window median`` builds them (:mod:`anonymizers.event_windows`).

Experiments (one factorization per window and rank, reused by every de-identification of that rank):

* Table 5.2 — linkage on the raw windows;
* Table 5.3 — MF alone, r ∈ ``--ranks``: re-identification (M_t1 against U Vᵀ) and linkage;
* Tables 5.4 / 5.5 — the baselines A_k(M) (k-member clustering of M's rows) and A_φ(M) (Laplace on M);
* Tables 5.6–5.9 — MF + k-member clustering of U, MF + Laplace noise on U, over k or φ and r;
* Tables 5.10–5.14 — utility: logistic regression over fifty random item columns
  (:mod:`anonymizers.matrix_utility`; window t1, the same user split and columns for every release), as
  precision, recall, F and Uti = F(release)/F(original);
* the seed's central claim: at a given re-identification risk, does MF + noise keep more utility than noise
  on M? (seed: risk 0.61 at Uti 0.907 for A_(φ=0.15, r=30) against 0.62 at 0.744 for A_(φ=1.5)(M)).

Risk scoring is the sources' (1/k credit for clustered releases, Euclidean Hungarian assignment).
``--item genres`` uses each movie's genre combination as the item instead of the movie: a user rates a
movie once, so movie windows barely overlap, while tastes in genres persist across windows.

    .venv/bin/python examples/factorize_movielens.py [--data ../shared/data/movielens_dslabs.csv]
        [--item movieId|genres] [--users 200] [--items 1000] [--ranks 10,20,30,40] [--iterations 100]
        [--seed 1] [--plot-dir DIR] [--json]

Without the data file the script exits with the download address before any work. The default run takes
about two minutes on 2 cores. The seed is an experiment's; a production release never takes one. Results
and discussion: docs/reproductions.md.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from anonymizers.errors import AnonymizationError
from anonymizers.event_windows import EventWindows, WindowSpec, build_windows
from anonymizers.factorization import factorize, k_member_clusters, laplace_rows, release
from anonymizers.factorized_release import score_windows
from anonymizers.matrix_utility import matrix_utility
from anonymizers.plots import DPI, require_matplotlib
from anonymizers.source import TableSource

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "movielens_dslabs.csv"
DOWNLOAD_HINT = (
    "Download MovieLens 'ml-latest-small' (https://grouplens.org/datasets/movielens/) or the dslabs copy "
    "(R package dslabs, data 'movielens') as CSV with columns userId, movieId, genres, timestamp, and pass "
    "--data PATH."
)
KS = (2, 4, 6, 8, 10)
MATRIX_NOISE = (0.3, 0.6, 0.9, 1.2, 1.5)
FACTOR_NOISE = (0.05, 0.10, 0.15, 0.20)
UTILITY_NOISE = (0.10, 0.15)
SEED_CLAIM = {"noise_on_m": (1.5, 0.62, 0.744), "mf_noise": (0.15, 30, 0.61, 0.907)}


@dataclass
class Results:
    """Every table as rows of plain values, for the text report and --json."""

    setup: dict[str, Any]
    tables: dict[str, list[dict[str, Any]]] = field(default_factory=dict)

    def add(self, table: str, **row: Any) -> None:
        self.tables.setdefault(table, []).append(row)


def load_windows(path: Path, item: str, users: int, items: int) -> EventWindows:
    with TableSource.csv(path) as source:
        return build_windows(
            source,
            user="userId",
            item=item,
            time="timestamp",
            spec=WindowSpec.parse("median"),
            top_users=users,
            top_items=items,
        )


def risks(windows: EventWindows, published: list[np.ndarray], k: int | None) -> tuple[float, float]:
    """(re-identification of t1, linkage t1 → t2), the sources' scoring."""
    scored = score_windows(windows.matrices, published, k=k)
    return scored.reidentification[0]["risk"], scored.linkage[0]["risk"]


def utility(windows: EventWindows, published_t1: np.ndarray, seed: int) -> dict[str, float]:
    """Window t1's Uti with the same user split and target columns for every release (same seed)."""
    scores = matrix_utility(windows.matrices[0], published_t1, rng=np.random.default_rng(seed))
    return {
        "precision": scores.released.precision,
        "recall": scores.released.recall,
        "f": scores.released.f_measure,
        "uti": scores.uti,
        "f_original": scores.original.f_measure,
    }


def baselines(windows: EventWindows, results: Results, rng: np.random.Generator, seed: int) -> None:
    """Tables 5.2, 5.4, 5.5, 5.10 and 5.11: raw windows, A_k(M), A_φ(M)."""
    results.add("5.2", window="median split", linkage=risks(windows, windows.matrices, None)[1])
    for k in KS:
        clusterings = [k_member_clusters(m, k, rng) for m in windows.matrices]
        published = [c.rows for c in clusterings]
        reid, link = risks(windows, published, k)
        results.add("5.4", k=k, reidentification=reid, linkage=link)
        results.add("5.10", k=k, **utility(windows, published[0], seed))
    for phi in MATRIX_NOISE:
        published = [laplace_rows(m, phi, rng) for m in windows.matrices]
        reid, link = risks(windows, published, None)
        results.add("5.5", phi=phi, reidentification=reid, linkage=link)
        results.add("5.11", phi=phi, reidentification=reid, **utility(windows, published[0], seed))


def factorized(
    windows: EventWindows,
    results: Results,
    ranks: list[int],
    iterations: int,
    rng: np.random.Generator,
    seed: int,
) -> None:
    """Tables 5.3, 5.6–5.9 and 5.12–5.14: every window factorized once per rank."""
    for rank in ranks:
        factors = [factorize(m, rank=rank, iterations=iterations, rng=rng) for m in windows.matrices]
        results.add("errors", rank=rank, t1=factors[0].errors.round(1).tolist())
        reid, link = risks(windows, [release(f.u, f.v) for f in factors], None)
        results.add("5.3", rank=rank, reidentification=reid, linkage=link)
        for k in KS:
            clusterings = [k_member_clusters(f.u, k, rng) for f in factors]
            published = [release(c.rows, f.v) for c, f in zip(clusterings, factors, strict=True)]
            reid, link = risks(windows, published, k)
            results.add("5.6/5.7", k=k, rank=rank, reidentification=reid, linkage=link)
            if k == 2:
                results.add("5.12", rank=rank, reidentification=reid, **utility(windows, published[0], seed))
        for phi in sorted({*FACTOR_NOISE, *UTILITY_NOISE}):
            published = [release(laplace_rows(f.u, phi, rng), f.v) for f in factors]
            reid, link = risks(windows, published, None)
            results.add("5.8/5.9", phi=phi, rank=rank, reidentification=reid, linkage=link)
            if phi in UTILITY_NOISE:
                table = "5.13" if phi == 0.10 else "5.14"
                results.add(table, rank=rank, reidentification=reid, **utility(windows, published[0], seed))


def central_claim(results: Results) -> dict[str, Any]:
    """For every MF + noise utility row, the A_φ(M) row closest in re-identification risk: which keeps more
    utility at (about) the same risk?"""
    on_m = results.tables["5.11"]
    pairs = []
    for table in ("5.13", "5.14"):
        phi = 0.10 if table == "5.13" else 0.15
        for row in results.tables.get(table, []):
            nearest = min(on_m, key=lambda r: abs(r["reidentification"] - row["reidentification"]))
            pairs.append(
                {
                    "mf_noise": f"φ = {phi}, r = {row['rank']}",
                    "mf_risk": row["reidentification"],
                    "mf_uti": row["uti"],
                    "noise_on_m": f"φ = {nearest['phi']}",
                    "m_risk": nearest["reidentification"],
                    "m_uti": nearest["uti"],
                }
            )
    wins = sum(p["mf_uti"] > p["m_uti"] for p in pairs)
    return {"pairs": pairs, "mf_noise_keeps_more_utility": f"{wins} of {len(pairs)}", "seed": SEED_CLAIM}


def run(arguments: argparse.Namespace) -> Results:
    started = time.monotonic()
    windows = load_windows(arguments.data, arguments.item, arguments.users, arguments.items)
    results = Results(
        setup={
            "data": str(arguments.data),
            "item": arguments.item,
            "users": len(windows.users),
            "items": len(windows.items),
            "ones": [int(m.sum()) for m in windows.matrices],
            "density": [round(float(m.mean()), 4) for m in windows.matrices],
            "ranks": arguments.ranks,
            "iterations": arguments.iterations,
            "seed": arguments.seed,
        }
    )
    rng = np.random.default_rng(arguments.seed)
    baselines(windows, results, rng, arguments.seed)
    factorized(windows, results, arguments.ranks, arguments.iterations, rng, arguments.seed)
    results.tables["claim"] = [central_claim(results)]
    results.setup["seconds"] = round(time.monotonic() - started, 1)
    return results


def render(results: Results) -> str:
    """The tables as Markdown, in the seed's order."""
    lines = [f"setup: {json.dumps(results.setup)}", ""]
    for table, rows in results.tables.items():
        if table in ("errors", "claim"):
            continue
        lines += [f"Table {table}", _markdown(rows), ""]
    claim = results.tables["claim"][0]
    lines += [
        "Central claim (MF + noise against noise on M at the nearest re-identification risk)",
        _markdown(claim["pairs"]),
        f"MF + noise keeps more utility in {claim['mf_noise_keeps_more_utility']} pairs",
    ]
    return "\n".join(lines)


def _markdown(rows: list[dict[str, Any]]) -> str:
    header = list(rows[0])
    body = ["| " + " | ".join(_cell(row[key]) for key in header) + " |" for row in rows]
    return "\n".join(["| " + " | ".join(header) + " |", "|" + "---|" * len(header), *body])


def _cell(value: Any) -> str:
    return f"{value:.3f}" if isinstance(value, float) else str(value)


def plot(results: Results, directory: Path) -> list[Path]:
    """Figs 5.4–5.5's shape: risk against rank, one line per φ (MF + noise) and per k (MF + k)."""
    require_matplotlib()
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for key, name in (("phi", "mf_noise"), ("k", "mf_kanon")):
        table = results.tables["5.8/5.9" if key == "phi" else "5.6/5.7"]
        figure = Figure(figsize=(9.6, 3.8), dpi=DPI, layout="constrained")
        FigureCanvasAgg(figure)
        for axes, measure in zip(figure.subplots(1, 2), ("reidentification", "linkage"), strict=True):
            for value in sorted({row[key] for row in table}):
                rows = sorted((r for r in table if r[key] == value), key=lambda r: r["rank"])
                axes.plot(
                    [r["rank"] for r in rows],
                    [r[measure] for r in rows],
                    marker="o",
                    label=f"{key} = {value}",
                )
            axes.set_xlabel("rank r")
            axes.set_ylabel(f"{measure} risk")
            axes.set_ylim(0, 1.02)
            axes.legend(fontsize=7)
        figure.suptitle(
            f"MovieLens ({results.setup['item']}): MF + {'noise' if key == 'phi' else 'k-member'}"
        )
        path = directory / f"factorize_{name}_{results.setup['item']}.png"
        figure.savefig(path)
        written.append(path)
    return written


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="MovieLens ratings CSV.")
    parser.add_argument("--item", default="movieId", help="Item column: movieId (the spec's) or genres.")
    parser.add_argument("--users", type=int, default=200, help="Most active users kept.")
    parser.add_argument("--items", type=int, default=1000, help="Most rated items kept.")
    parser.add_argument("--ranks", type=lambda s: [int(x) for x in s.split(",")], default=[10, 20, 30, 40])
    parser.add_argument("--iterations", type=int, default=100)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--plot-dir", type=Path, help="Write the Figs 5.4–5.5-like PNGs here.")
    parser.add_argument("--json", action="store_true", help="Print the results as JSON.")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    arguments = parse(argv)
    if not arguments.data.exists():
        print(f"{arguments.data} does not exist. {DOWNLOAD_HINT}", file=sys.stderr)
        return 1
    if arguments.plot_dir is not None:
        require_matplotlib()
    try:
        results = run(arguments)
    except AnonymizationError as error:
        print(f"error: {error.message}" + (f"\nhint: {error.hint}" if error.hint else ""), file=sys.stderr)
        return 1
    print(
        json.dumps({"setup": results.setup, "tables": results.tables}, indent=1)
        if arguments.json
        else render(results)
    )
    if arguments.plot_dir is not None:
        for path in plot(results, arguments.plot_dir):
            print(f"plot: {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
