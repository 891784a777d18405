"""Command-line specs of ``veil materialize`` and ``veil risk`` → the anonymizers' objects.

Why a module of its own: ``--hierarchy age=interval:5,10,20`` and ``--step age=laplace:epsilon=1,…`` are
small languages; parsing them apart from click keeps the commands short and lets tests check every
message. Every error names the option and shows a correct example. The simulated attack's options are
declared here once, for every command that runs it (``materialize combine`` and ``risk``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import click

from anonymizers.errors import AnonymizationError
from anonymizers.hierarchy import Hierarchy, load_arx_hierarchy, value_text
from anonymizers.release_search import MEASURES
from anonymizers.risk.attack import DEFAULT_OUTLIER_K, DEFAULT_THRESHOLD
from anonymizers.risk.pipeline import (
    AttributePipeline,
    Generalize,
    Laplace,
    Pipeline,
    Randomize,
    Sample,
    Step,
    coarsen,
)
from anonymizers.risk.uniqueness import DeclaredValues
from proxy.config import ColumnPolicy, ColumnType

STEP_EXAMPLES = (
    "age=laplace:epsilon=1,lower=17,upper=90 · workclass=generalize:1 · marital-status=randomize:epsilon=1"
)
LAPLACE_KEYS = {"epsilon", "lower", "upper", "unit", "sensitivity", "law"}
RANDOMIZE_KEYS = {"epsilon", "sensitivity"}

attack_options = [
    click.option(
        "--threshold",
        type=click.FloatRange(0, 1, min_open=True),
        default=DEFAULT_THRESHOLD,
        show_default=True,
        help="T: probability mass of the attacker's high-confidence region.",
    ),
    click.option(
        "--low-confidence",
        "low_threshold",
        type=click.FloatRange(0, 1, min_open=True),
        help="T_L: probability mass of the low-confidence region, from T to 1 [default: 1 − (1 − T)², "
        "0.99 at T = 0.9]. 1 = the whole support: then no noised record is ever an outlier, and sampling "
        "understates an outlier's risk up to 1/α.",
    ),
    click.option(
        "--outlier-k",
        type=click.FloatRange(0, min_open=True),
        default=DEFAULT_OUTLIER_K,
        show_default=True,
        help="k of the sampling simulator's outlier threshold T' = k·α.",
    ),
]

target_options = [
    click.option(
        "--max-risk",
        type=click.FloatRange(0, 1, min_open=True),
        help="Search the parameters for the release with the least information loss whose risk is at "
        "most this; write nothing (and exit 1) if none is. See docs/anonymize.md.",
    ),
    click.option(
        "--risk-measure",
        type=click.Choice(MEASURES),
        default="simulated",
        show_default=True,
        help="The risk compared with --max-risk: the simulated attack's 1/n_q, or the classic prosecutor "
        "(max), journalist (max, needs --sampling-fraction) or marketer risk.",
    ),
    click.option(
        "--sampling-fraction",
        type=click.FloatRange(0, 1, min_open=True),
        help="λ: the table is this share of the population (for --risk-measure journalist).",
    ),
    click.option(
        "--plot",
        "plot_path",
        type=click.Path(path_type=Path, dir_okay=False),
        help="With --max-risk: draw the risk–utility frontier, chosen point marked, to this PNG "
        "(needs [plot]).",
    ),
]


def split_columns(text: str, option: str) -> list[str]:
    """``a,b,c`` → ``["a", "b", "c"]``; refuses empty names and repeats."""
    names = [name.strip() for name in text.split(",")]
    if not all(names):
        raise AnonymizationError(f"{option} needs comma-separated column names, e.g. {option} age,sex,zip")
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise AnonymizationError(f"{option} names {repeated[0]!r} twice")
    return names


def assignments(texts: Sequence[str], option: str, example: str) -> list[tuple[str, str]]:
    """``COLUMN=SPEC`` pairs in the order given (a column may repeat: steps run in that order)."""
    pairs = []
    for text in texts:
        column, separator, spec = text.partition("=")
        if not separator or not column.strip() or not spec.strip():
            raise AnonymizationError(
                f"cannot read {option} {text!r}", hint=f"write COLUMN=SPEC, e.g. {example}"
            )
        pairs.append((column.strip(), spec.strip()))
    return pairs


def hierarchy_specs(texts: Sequence[str], columns: Sequence[str]) -> dict[str, str]:
    """``--hierarchy`` options by column; each must name one of ``columns``, once."""
    specs: dict[str, str] = {}
    for column, spec in assignments(texts, "--hierarchy", "age=interval:5,10,20 or education=edu.csv"):
        if column not in columns:
            raise AnonymizationError(
                f"--hierarchy names {column!r}, which is not a quasi-identifier",
                hint=f"quasi-identifiers: {', '.join(columns)}",
            )
        if column in specs:
            raise AnonymizationError(f"--hierarchy gives {column!r} twice")
        specs[column] = spec
    return specs


def declared_hierarchy(column: str, spec: str | None) -> Hierarchy | None:
    """The hierarchy a ``--hierarchy`` file declares, whose leaves are the column's domain; None for the
    specs built over the values found in the data (``interval:…``, ``date``, ``suppress``, none)."""
    if spec is None or spec in ("date", "suppress") or spec.startswith("interval:"):
        return None
    return load_arx_hierarchy(Path(spec), column)


def declared_values(column: ColumnPolicy | None) -> DeclaredValues | None:
    """A policy column's domain: its public values, else the integers between its bounds; None if the
    policy declares neither (a real column's bounds do not make a countable domain)."""
    if column is None:
        return None
    if column.values:
        texts = frozenset(value_text(v) for v in column.values)
        return DeclaredValues(len(texts), texts.__contains__)
    if column.type is ColumnType.INTEGER and column.lower is not None and column.upper is not None:
        low, high = math.ceil(column.lower), math.floor(column.upper)
        return DeclaredValues(high - low + 1, lambda text: _integer_between(text, low, high))
    return None


def _integer_between(text: str, low: int, high: int) -> bool:
    try:
        number = float(text)
    except ValueError:
        return False
    return number.is_integer() and low <= number <= high


def pipeline_from_steps(
    texts: Sequence[str],
    columns: Sequence[str],
    hierarchy_for: Callable[[str, Sequence[object] | None], Hierarchy],
    *,
    sample_rate: float | None,
) -> Pipeline:
    """``--step`` options (in order, per column) and ``--sample`` → the pipeline to run and to simulate.

    A column without steps is a quasi-identifier released as is. ``hierarchy_for(column, grid)`` gives a
    column's hierarchy; ``grid`` is the Laplace grid when noise comes first (then the hierarchy must cover
    every value the noise can publish, not only the values in the data).
    """
    steps: dict[str, list[Step]] = {column: [] for column in columns}
    for column, spec in assignments(texts, "--step", STEP_EXAMPLES):
        if column not in steps:
            raise AnonymizationError(
                f"--step names {column!r}, which is not a quasi-identifier",
                hint=f"add it to --qi ({', '.join(columns)})",
            )
        steps[column].append(_step(column, spec, steps[column], hierarchy_for))
    sample = None if sample_rate is None else Sample(sample_rate)
    return Pipeline(tuple(AttributePipeline(c, tuple(s)) for c, s in steps.items()), sample)


def _step(
    column: str,
    spec: str,
    before: Sequence[Step],
    hierarchy_for: Callable[[str, Sequence[object] | None], Hierarchy],
) -> Step:
    kind, _, arguments = spec.partition(":")
    grid = _grid(before)
    if kind == "generalize":
        return Generalize(hierarchy_for(column, grid), _level(column, arguments))
    if kind == "laplace":
        values = _keywords(column, kind, arguments, LAPLACE_KEYS, required={"epsilon", "lower", "upper"})
        law = values.pop("law", "discrete")
        return Laplace(**{k: _number(column, k, v) for k, v in values.items()}, law=law)  # type: ignore[arg-type]
    if kind == "randomize":
        values = _keywords(column, kind, arguments, RANDOMIZE_KEYS, required={"epsilon"})
        hierarchy = hierarchy_for(column, grid)
        generalized = [s.level for s in before if isinstance(s, Generalize)]
        if generalized and generalized[-1] > 0:
            hierarchy = coarsen(hierarchy, generalized[-1])  # randomize among the generalized cells
        return Randomize(hierarchy=hierarchy, **{k: _number(column, k, v) for k, v in values.items()})
    raise AnonymizationError(
        f"unknown step {kind!r} for {column}",
        hint=f"steps are generalize, laplace and randomize, e.g. {STEP_EXAMPLES}",
    )


def _grid(before: Sequence[Step]) -> list[object] | None:
    noise = next((s for s in before if isinstance(s, Laplace)), None)
    if noise is None:
        return None
    return [noise.lower + i * noise.unit for i in range(noise.grid_size)]


def _level(column: str, text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise AnonymizationError(
            f"generalize needs a level for {column}, got {text!r}", hint="e.g. workclass=generalize:1"
        ) from None


def _keywords(column: str, kind: str, text: str, allowed: set[str], *, required: set[str]) -> dict[str, str]:
    pairs = [part.partition("=") for part in text.split(",") if part.strip()]
    values = {key.strip(): value.strip() for key, _, value in pairs}
    unknown = sorted(set(values) - allowed)
    if unknown or any(not separator for _, separator, _ in pairs):
        raise AnonymizationError(
            f"cannot read the {kind} step of {column}: {text!r}",
            hint=f"keys: {', '.join(sorted(allowed))}; e.g. {STEP_EXAMPLES}",
        )
    missing = sorted(required - set(values))
    if missing:
        raise AnonymizationError(
            f"the {kind} step of {column} needs {', '.join(missing)}", hint=STEP_EXAMPLES
        )
    return values


def _number(column: str, key: str, text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise AnonymizationError(f"{key} of {column} must be a number, got {text!r}")
    return value


def with_options(options: Sequence[Callable[..., Any]]) -> Callable[..., Any]:
    def apply(function: Callable[..., Any]) -> Callable[..., Any]:
        for option in reversed(options):
            function = option(function)
        return function

    return apply


step_option = click.option(
    "--step",
    "steps",
    multiple=True,
    help="COLUMN=generalize:LEVEL | laplace:epsilon=E,lower=L,upper=U[,unit=1] | randomize:epsilon=E. "
    "Repeatable; a column's steps run in the order given.",
)
hierarchy_option = click.option(
    "--hierarchy",
    "hierarchies",
    multiple=True,
    help="COLUMN=SPEC: an ARX CSV file, interval:5,10,20[;top=80], date or suppress. Repeatable.",
)
