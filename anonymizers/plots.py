"""PNG pictures of a risk report and of a risk-targeted search, for people who would rather look than read.

matplotlib is the optional ``[plot]`` extra: it is imported only when a picture is drawn, and
:func:`require_matplotlib` lets a command refuse ``--plot`` before its long work rather than after it.
Figures are drawn on matplotlib's Agg canvas (no display, no pyplot global state), small (≈ 6×4 in at
100 dpi: tens of kilobytes).
"""

from __future__ import annotations

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
    for candidate in measured:
        axes.annotate(_label(candidate.parameters), (candidate.risk, candidate.loss), fontsize=6,
                      xytext=(3, 3), textcoords="offset points", color="#555555")  # fmt: skip
    front = _pareto(measured)
    axes.step([c.risk for c in front], [c.loss for c in front], where="post", color="#999999", linewidth=0.8,
              zorder=2, label="frontier")  # fmt: skip
    if frontier.chosen is not None:
        chosen = frontier.candidates[frontier.chosen]
        axes.scatter(chosen.risk, chosen.loss, marker="*", s=220, color="#cc3311", zorder=4, label="chosen")
    axes.axvline(
        target.max_risk, color="#cc3311", linestyle="--", linewidth=1, label=f"R = {target.max_risk:g}"
    )
    axes.margins(x=0.12, y=0.08)
    axes.set_xlabel(f"{target.measure} risk")
    axes.set_ylabel(f"information loss ({frontier.utility})")
    axes.set_title(f"risk–utility frontier: {len(frontier.candidates)} candidates explored", fontsize=10)
    axes.legend(loc="best", fontsize=7)
    figure.savefig(path)


def _pareto(candidates: list[Candidate]) -> list[Candidate]:
    """The candidates no other beats on both risk and loss, by increasing risk."""
    front: list[Candidate] = []
    for candidate in sorted(candidates, key=lambda c: (c.risk, c.loss)):
        if not front or candidate.loss < front[-1].loss:
            front.append(candidate)
    return front


def _label(parameters: dict[str, Any]) -> str:
    """Short point labels: ``k=5 s=0.02``, ``ε×0.5 α=0.7``."""
    if "k" in parameters:
        return f"k={parameters['k']} s={parameters['suppression_limit']:g}"
    epsilons = parameters.get("epsilon", {})
    spent = "ε=" + "/".join(f"{e:g}" for e in epsilons.values()) + " " if epsilons else ""
    return f"{spent}α={parameters['sample_rate']:g}"


def _reciprocal(values: Any) -> Any:
    """1/x, both ways between the candidate-count axis and the risk axis (matplotlib probes the ends of
    the axis with 0 and huge values: their inverses are ∞ and 0, not a warning)."""
    with np.errstate(divide="ignore", over="ignore"):
        return 1.0 / np.asarray(values, dtype=float)
