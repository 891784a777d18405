"""``SELECT * FROM veil_reconstruct('release', 'attribute', …)``: a cross-tabulation estimated from a release
of value sets that ``veil materialize diversity --out db:release`` wrote into the dataset's database.

A release is public by the data holder's decision, so reading it spends no budget; a table the policy
declares private is refused (a private table is never read row by row, and a release is never declared
private). The release's metadata is its companion table ``release__metadata``.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

from proxy.analysis.refusals import CLAUSE_NAMES, refuse
from proxy.config import DatasetPolicy

RECONSTRUCT_FUNCTION = "veil_reconstruct"
MAX_ATTRIBUTES = 6  # a cross-tabulation's cells multiply: six attributes of 18 values are 34 million
_USAGE = "SELECT * FROM veil_reconstruct('release_table', 'attribute' [, 'attribute' …])"


@dataclass(frozen=True)
class ReconstructQuery:
    release: str
    attributes: tuple[str, ...]


def is_reconstruct(tree: exp.Expression) -> bool:
    return isinstance(tree, exp.Select) and _call(tree) is not None


def reconstruct_query(tree: exp.Select, dataset: DatasetPolicy) -> ReconstructQuery:
    call = _call(tree)
    assert call is not None
    if len(tree.expressions) != 1 or not isinstance(tree.expressions[0], exp.Star):
        raise refuse(
            "select * from veil_reconstruct(…): its columns are the attributes and count", hint=_USAGE
        )
    for clause in (
        "where",
        "group",
        "having",
        "order",
        "limit",
        "offset",
        "distinct",
        "joins",
        "with_",
    ):
        if tree.args.get(clause):
            raise refuse(f"veil_reconstruct takes no {CLAUSE_NAMES[clause]} clause", hint=_USAGE)
    arguments = call.expressions
    if not 2 <= len(arguments) <= MAX_ATTRIBUTES + 1 or not all(
        isinstance(a, exp.Literal) and a.is_string for a in arguments
    ):
        raise refuse(
            f"veil_reconstruct takes the release's name and 1 to {MAX_ATTRIBUTES} attribute names, as strings",
            hint=_USAGE,
        )
    release, *attributes = (str(a.this) for a in arguments)
    declared = dataset.table(release)
    if declared is not None and not declared.public:
        raise refuse(
            f'"{release}" is a private table: veil_reconstruct reads published releases only', hint=_USAGE
        )
    if len(set(attributes)) != len(attributes):
        raise refuse("veil_reconstruct names an attribute twice", hint=_USAGE)
    return ReconstructQuery(release, tuple(attributes))


def _call(tree: exp.Select) -> exp.Anonymous | None:
    source = tree.args.get("from_")
    table = source.this if source is not None else None
    function = table.this if isinstance(table, exp.Table) else None
    if isinstance(function, exp.Anonymous) and str(function.this).lower() == RECONSTRUCT_FUNCTION:
        return function
    return None
