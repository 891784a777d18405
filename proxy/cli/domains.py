"""Where a released attribute's domain comes from, for ``veil materialize diversity``: never silently from
the data, since a domain read from the rows would publish its rare values (spec sensitive-qid-diversity §3).

In order: ``--domain COLUMN=v1,v2,…``; a ``--domain-file`` (JSON: ``{"column": ["v1", …]}``); the policy's
public ``values`` of the column (for a dataset's table); ``--bins COLUMN=e0,e1,…,ek`` for a number (the
labels are the intervals ``[e0,e1)`` … ``[ek-1,ek]``); and, only with ``--domains-from-data``, the distinct
values of the column — which the report then says.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from anonymizers.errors import AnonymizationError
from anonymizers.source import TableSource
from proxy.cli.anonymize_options import assignments
from proxy.cli.support import declared_dataset
from proxy.config import load_config


@dataclass(frozen=True)
class Domain:
    """An attribute's public domain and where it came from; ``edges`` for a binned number."""

    values: tuple[str, ...]
    source: str  # "--domain", "--domain-file", "policy", "--bins" or "data"
    edges: tuple[float, ...] | None = None


def resolve_domains(
    attributes: Sequence[str],
    *,
    options: Sequence[str],
    domain_file: Path | None,
    bins: Sequence[str],
    policy_values: Mapping[str, Sequence[object]],
    source: TableSource,
    from_data: bool,
) -> dict[str, Domain]:
    given = _given(options, domain_file, bins, attributes)
    domains: dict[str, Domain] = {}
    for attribute in attributes:
        if attribute in given:
            domains[attribute] = given[attribute]
        elif attribute in policy_values:
            domains[attribute] = Domain(tuple(str(v) for v in policy_values[attribute]), "policy")
        elif from_data:
            domains[attribute] = Domain(tuple(str(v) for v in source.distinct_values(attribute)), "data")
        else:
            raise AnonymizationError(
                f"no public domain for {attribute}",
                hint=f"give --domain {attribute}=v1,v2,… (or --domain-file, or --bins {attribute}=0,10,20 for "
                "a number, or public values in the policy); --domains-from-data reads them from the rows "
                "and says so in the report",
            )
    return domains


def policy_domains(config_path: Path, dataset: str | None, table: str | None) -> dict[str, Sequence[object]]:
    """The public ``values`` of a dataset table's columns (nothing for a file input)."""
    if dataset is None or table is None:
        return {}
    policy = declared_dataset(load_config(config_path), dataset).table(table)
    if policy is None:
        return {}
    return {name: column.values for name, column in policy.columns.items() if column.values}


def attribute_codes(
    source: TableSource, attributes: Sequence[str], domains: Mapping[str, Domain]
) -> np.ndarray:
    """N × q codes: each value's position in its domain, read by the engine in the table's row order, in
    one scan for all attributes (a value outside its domain, or a NULL, is refused with a count)."""
    dictionaries = {}
    for attribute in attributes:
        domain = domains[attribute]
        if domain.edges is None:
            codes = np.arange(len(domain.values))
            dictionaries[attribute] = pd.DataFrame({"value": list(domain.values), "code": codes})
        else:
            dictionaries[attribute] = _bin_dictionary(source, attribute, domain.edges)
    text = [a for a in attributes if domains[a].edges is None]
    try:
        codes = source.codes(dictionaries, text=text)
    except AnonymizationError as error:
        raise AnonymizationError(
            f"{error.message.split(' have ')[0]} have a value outside the public domain of "
            f"{', '.join(attributes)}, or NULL",
            hint="add the values to the attributes' domains (--domain, --domain-file, the policy, --bins), "
            "or recode or filter them first (e.g. in a view)",
        ) from None
    return np.column_stack([codes[a].astype(np.int64) for a in attributes])


def _given(
    options: Sequence[str], domain_file: Path | None, bins: Sequence[str], attributes: Sequence[str]
) -> dict[str, Domain]:
    given: dict[str, Domain] = {}

    def add(attribute: str, domain: Domain) -> None:
        if attribute not in attributes:
            raise AnonymizationError(
                f"{domain.source} names {attribute!r}, which is not in --attributes",
                hint=f"attributes: {', '.join(attributes)}",
            )
        if attribute in given:
            raise AnonymizationError(
                f"the domain of {attribute} is given twice ({given[attribute].source}, {domain.source})"
            )
        given[attribute] = domain

    for attribute, text in assignments(options, "--domain", "occupation=Sales,Tech-support,Other"):
        add(attribute, Domain(_distinct(text.split(","), attribute), "--domain"))
    if domain_file is not None:
        for attribute, values in _read_domain_file(domain_file).items():
            add(attribute, Domain(_distinct([str(v) for v in values], attribute), "--domain-file"))
    for attribute, text in assignments(bins, "--bins", "age=0,20,40,60,100"):
        edges = _edges(text, attribute)
        labels = [f"[{_number(a)},{_number(b)})" for a, b in itertools.pairwise(edges[:-1])]
        labels.append(f"[{_number(edges[-2])},{_number(edges[-1])}]")
        add(attribute, Domain(tuple(labels), "--bins", edges))
    return given


def _read_domain_file(path: Path) -> dict[str, list[object]]:
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as error:
        raise AnonymizationError(f"cannot read the domain file {path}: {error}") from None
    if not isinstance(document, dict) or not all(isinstance(v, list) for v in document.values()):
        raise AnonymizationError(
            f"{path} is not a domain file",
            hint='write a JSON object: {"occupation": ["Sales", "Tech-support"]}',
        )
    return document


def _distinct(values: Sequence[str], attribute: str) -> tuple[str, ...]:
    cleaned = [value.strip() for value in values]
    if not all(cleaned) or len(set(cleaned)) != len(cleaned):
        raise AnonymizationError(f"the domain of {attribute} has an empty or repeated value")
    return tuple(cleaned)


def _edges(text: str, attribute: str) -> tuple[float, ...]:
    try:
        edges = tuple(float(part) for part in text.split(","))
    except ValueError:
        raise AnonymizationError(f"--bins {attribute}={text}: the edges must be numbers") from None
    if len(edges) < 3 or any(b <= a for a, b in itertools.pairwise(edges)):
        raise AnonymizationError(
            f"--bins {attribute}: give at least three increasing edges (two bins), e.g. {attribute}=0,20,40"
        )
    return edges


def _bin_dictionary(source: TableSource, attribute: str, edges: tuple[float, ...]) -> pd.DataFrame:
    """Each distinct number of the column → its bin (the last bin includes its upper edge)."""
    values = np.asarray(source.distinct_values(attribute, as_text_values=False), dtype=np.float64)
    outside = (values < edges[0]) | (values > edges[-1])
    if outside.any():
        raise AnonymizationError(
            f"{attribute} has values outside the bins [{_number(edges[0])}, {_number(edges[-1])}]",
            hint="widen the outer edges of --bins (they are public bounds, not the data's range)",
        )
    codes = np.minimum(np.searchsorted(np.asarray(edges), values, side="right") - 1, len(edges) - 2)
    return pd.DataFrame({"value": values, "code": codes})


def _number(value: float) -> str:
    return f"{value:g}"


def check_domain_sizes(domains: Mapping[str, Domain], ls: Mapping[str, int]) -> None:
    """l values need a domain of at least l values: refused before any row is read."""
    for attribute, l_value in ls.items():
        size = len(domains[attribute].values)
        if size < l_value:
            raise AnonymizationError(
                f"the domain of {attribute} has {size} values, fewer than l = {l_value}",
                hint=f"lower --l for {attribute} (at most {size}), or declare its full domain",
            )
