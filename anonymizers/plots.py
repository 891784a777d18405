"""PNG pictures of a risk report and of a risk-targeted search, for people who would rather look than read.

matplotlib is the optional ``[plot]`` extra: it is imported only when a picture is drawn, and
:func:`require_matplotlib` lets a command refuse ``--plot`` before its long work rather than after it.
Figures are drawn on matplotlib's Agg canvas (no display, no pyplot global state), small (≈ 6×4 in at
100 dpi: tens of kilobytes).
"""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path
from typing import Any

import numpy as np

from anonymizers.errors import AnonymizationError
from anonymizers.release_search import Candidate, Frontier

MISSING = "--plot needs matplotlib, which is not installed: pip install 'veil-sql[plot]'"
SIZE = (6.4, 4.0)
DPI = 100


def require_matplotlib() -> None:
    """Fail in one line when the ``[plot]`` extra is missing."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise AnonymizationError(MISSING) from None


def _figure() -> tuple[Any, Any]:
    """A figure on the Agg canvas and its axes."""
    require_matplotlib()
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=SIZE, dpi=DPI, layout="constrained")
    FigureCanvasAgg(figure)
    return figure, figure.subplots()


def plot_candidate_counts(sizes: np.ndarray, path: Path, *, title: str, what: str) -> None:
    """Histogram of the records' candidate counts |C_i| on log axes (risk lives at the small end, where
    records are few), the smallest marked as n_q, and how many records the attack fails on (NaN: risk 0)."""
    figure, axes = _figure()
    attacked = sizes[~np.isnan(sizes)]
    failed = int(np.isnan(sizes).sum())
    if len(attacked):
        top = max(float(attacked.max()), 2.0)
        bins = np.unique(np.geomspace(1.0, top * 1.001, num=min(40, max(2, len(np.unique(attacked))))))
        axes.hist(attacked, bins=bins, color="#4477aa", edgecolor="white", linewidth=0.5)
        axes.set_xscale("log")
        axes.set_yscale("log")  # the few records at the small end are the risk: keep them visible
        axes.set_ylim(bottom=0.7)  # a bin of one record stays visible
        n_q = float(attacked.min())
        axes.axvline(n_q, color="#cc3311", linestyle="--", linewidth=1.2)
        axes.annotate(
            f"n_q = {n_q:g} (risk {1 / n_q:.3g})",
            xy=(n_q, 0.95),
            xycoords=("data", "axes fraction"),
            xytext=(4, 0),
            textcoords="offset points",
            color="#cc3311",
            va="top",
        )
        risk = axes.secondary_xaxis("top", functions=(_reciprocal, _reciprocal))
        risk.set_xlabel("re-identification risk 1/|C_i|")
    axes.set_xlabel(what)
    axes.set_ylabel("records")
    axes.set_title(f"{title}: {len(attacked):,} records scored, {failed:,} at risk 0", fontsize=10)
    figure.savefig(path)


def plot_frontier(frontier: Frontier, path: Path) -> None:
    """Risk (x) against information loss (y) of every candidate explored: those that meet the target
    filled, the others hollow, the Pareto frontier (no other candidate has both less risk and less loss)
    as a step line, R as a vertical line and the chosen candidate starred; every point labelled."""
    figure, axes = _figure()
    target = frontier.target
    measured = [c for c in frontier.candidates if c.risk is not None]
    for meets, style in ((True, {"color": "#4477aa"}), (False, {"color": "white"})):
        group = [c for c in measured if c.meets(target.max_risk) == meets]
        if group:
            axes.scatter([c.risk for c in group], [c.loss for c in group], s=28, edgecolors="#4477aa",
                         zorder=3, label="risk ≤ R" if meets else "risk > R", **style)  # fmt: skip
    front = _pareto(measured)
    axes.step([c.risk for c in front], [c.loss for c in front], where="post", color="#999999", linewidth=0.8,
              zorder=2, label="frontier")  # fmt: skip
    if frontier.chosen is not None:
        chosen = frontier.candidates[frontier.chosen]
        axes.scatter(chosen.risk, chosen.loss, marker="*", s=220, color="#cc3311", zorder=4, label="chosen")
    axes.axvline(
        target.max_risk, color="#cc3311", linestyle="--", linewidth=1, label=f"R = {target.max_risk:g}"
    )
    for values, scale in (
        ([c.risk for c in measured], axes.set_xscale),
        ([c.loss for c in measured], axes.set_yscale),
    ):
        if _spread(values):
            scale("log")
    axes.margins(x=0.16, y=0.08)
    starred = None if frontier.chosen is None else frontier.candidates[frontier.chosen]
    labels = [
        (risk, loss, _labels(alike), 9.0 if starred in alike else 3.0)
        for (risk, loss), alike in _coincident(measured).items()
    ]
    _place_labels(axes, labels)
    axes.set_xlabel(f"{target.measure} risk")
    axes.set_ylabel(f"information loss ({frontier.utility})")
    axes.set_title(f"risk–utility frontier: {len(frontier.candidates)} candidates explored", fontsize=10)
    axes.legend(loc="best", fontsize=7)
    figure.savefig(path)


def plot_curves(
    curves: dict[str, list[tuple[float, float, str]]],
    path: Path,
    *,
    title: str,
    x: str,
    y: str,
    unjoined: Collection[str] = (),
) -> None:
    """One line of labelled (x, y) points per curve (points only for the ``unjoined`` ones, whose points
    are not a sweep), x on a log axis when it spans more than 20× — for sweeps such as
    ``examples/adult_ch4.py``'s risk (n_q) against utility (Uti) per dataset and ε."""
    figure, axes = _figure()
    labels = []
    for name, points in curves.items():
        ordered = sorted(points)
        style = "none" if name in unjoined else "-"
        axes.plot([p[0] for p in ordered], [p[1] for p in ordered], marker="o", markersize=4, linestyle=style,
                  label=name)  # fmt: skip
        labels += [(px, py, text, 3.0) for px, py, text in ordered]
    if _spread([p[0] for points in curves.values() for p in points]):
        axes.set_xscale("log")
    axes.margins(x=0.1, y=0.1)
    _place_labels(axes, labels)
    axes.set_xlabel(x)
    axes.set_ylabel(y)
    axes.set_title(title, fontsize=10)
    axes.legend(loc="best", fontsize=7)
    figure.savefig(path)


def _pareto(candidates: list[Candidate]) -> list[Candidate]:
    """The candidates no other beats on both risk and loss, by increasing risk."""
    front: list[Candidate] = []
    for candidate in sorted(candidates, key=lambda c: (c.risk, c.loss)):
        if not front or candidate.loss < front[-1].loss:
            front.append(candidate)
    return front


def _place_labels(axes: Any, points: list[tuple[float, float, str, float]]) -> None:
    """Each label ``dx`` points right of its point (clear of the star), moved down a line while it would
    overprint a label already placed or another point's marker (6-pt text ≈ 3.3 pt per character and
    7 pt high; a marker ≈ 8 pt square)."""
    axes.autoscale_view()
    scale = 72 / axes.figure.dpi
    anchors = [axes.transData.transform((x, y)) * scale for x, y, _, _ in points]
    markers = [(mx - 4, my - 4, 8.0, 8.0) for mx, my in anchors]
    placed: list[tuple[float, float, float, float]] = []
    for index in sorted(range(len(points)), key=lambda i: (-points[i][1], points[i][0])):
        x, y, text, dx = points[index]
        left, bottom, width = anchors[index][0] + dx, anchors[index][1] + 3.0, 3.3 * len(text)
        obstacles = placed + markers[:index] + markers[index + 1 :]
        while any(_overlap((left, bottom, width, 7.0), box) for box in obstacles):
            bottom -= 7
        placed.append((left, bottom, width, 7.0))
        axes.annotate(text, (x, y), xytext=(dx, bottom - anchors[index][1]), textcoords="offset points",
                      fontsize=6, color="#555555")  # fmt: skip


def _overlap(a: tuple[float, float, float, float], b: tuple[float, float, float, float]) -> bool:
    """Whether two (left, bottom, width, height) boxes overlap."""
    return a[0] < b[0] + b[2] and b[0] < a[0] + a[2] and a[1] < b[1] + b[3] and b[1] < a[1] + a[3]


def _spread(values: list[Any]) -> bool:
    """Whether positive values span more than a factor 20: then a log axis keeps the small ones apart."""
    return bool(values) and min(values) > 0 and max(values) / min(values) > 20


def _coincident(candidates: list[Candidate]) -> dict[tuple[float, float], list[Candidate]]:
    """Candidates by point: different parameters can make the same release (one label per point)."""
    points: dict[tuple[float, float], list[Candidate]] = {}
    for candidate in candidates:
        points.setdefault((candidate.risk, candidate.loss), []).append(candidate)  # type: ignore[arg-type]
    return points


def _labels(alike: list[Candidate]) -> str:
    """Short point labels: ``k=5 s=0.02``, or ``k=5 s=0.02,0.05`` for one release reached twice;
    ``ε=0.5/1 α=0.7`` (each noised column's ε)."""
    first = alike[0].parameters
    if "k" in first:
        limits = ",".join(f"{c.parameters['suppression_limit']:g}" for c in alike)
        same_k = all(c.parameters["k"] == first["k"] for c in alike)
        return f"k={first['k']} s={limits}" if same_k else " | ".join(_labels([c]) for c in alike)
    epsilons = first.get("epsilon", {})
    spent = "ε=" + "/".join(f"{e:g}" for e in epsilons.values()) + " " if epsilons else ""
    return " | ".join([f"{spent}α={first['sample_rate']:g}", *(_labels([c]) for c in alike[1:])])


def _reciprocal(values: Any) -> Any:
    """1/x, both ways between the candidate-count axis and the risk axis (matplotlib probes the ends of
    the axis with 0 and huge values: their inverses are ∞ and 0, not a warning)."""
    with np.errstate(divide="ignore", over="ignore"):
        return 1.0 / np.asarray(values, dtype=float)


def plot_factorization(report: dict[str, Any], path: Path) -> None:
    """A factorized release at a glance: each window's error curve Σ|M − X| per epoch (left; absent for the
    baselines) and the attacks' risks (right: re-identification per window, linkage per pair)."""
    require_matplotlib()
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(SIZE[0] * 1.6, SIZE[1]), dpi=DPI, layout="constrained")
    FigureCanvasAgg(figure)
    curves, bars = figure.subplots(1, 2)
    for window, errors in enumerate(report.get("errors") or []):
        if errors is not None:
            curves.plot(range(1, len(errors) + 1), errors, label=f"window {window + 1}")
    curves.set_xlabel("epoch")
    curves.set_ylabel("Σ|M − UVᵀ|")
    curves.set_title("factorization error", fontsize=10)
    if curves.lines:
        curves.legend(fontsize=7)
    risk = report["risk"]
    names = [f"re-id {w + 1}" for w in range(len(risk["reidentification"]))]
    names += [f"link {w + 1}→{w + 2}" for w in range(len(risk["linkage"]))]
    values = [r["risk"] for r in risk["reidentification"] + risk["linkage"]]
    bars.bar(
        names, values, color=["tab:red"] * len(risk["reidentification"]) + ["tab:blue"] * len(risk["linkage"])
    )
    for x, value in enumerate(values):
        bars.annotate(f"{value:.3f}", (x, value), ha="center", va="bottom", fontsize=7)
    bars.set_ylim(0, 1.05)
    bars.set_ylabel("risk")
    bars.set_title("Hungarian attacks", fontsize=10)
    figure.savefig(path)
