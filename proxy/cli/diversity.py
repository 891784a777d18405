"""``veil materialize diversity``: a release where every sensitive quasi-identifier is published as a *set*
of values, frequency/entropy (l_1..l_q)-diverse and/or (t_1..t_q)-close (spec sensitive-qid-diversity.md,
anonymizers/sensitive_qid.py), with the metadata an analyst needs to reconstruct cross-tabulations
(``veil reconstruct``).

This is not differential privacy and spends no budget: it is a data holder's export, like the other
``materialize`` commands. Every release is verified against its promises before it is written.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click
import numpy as np
import pandas as pd

from anonymizers.errors import AnonymizationError
from anonymizers.output import OutputTarget, ensure_writable, write_frame
from anonymizers.published_sets import METADATA_TABLE_SUFFIX
from anonymizers.sensitive_qid import AttributeRelease, plan_attribute, randomize, verify_release
from anonymizers.set_output import set_column, write_sets
from proxy.cli.anonymize_options import assignments, split_columns
from proxy.cli.domains import Domain, attribute_codes, check_domain_sizes, policy_domains, resolve_domains
from proxy.cli.sources import engine_errors, open_source, source_arguments, source_options
from proxy.cli.support import echo_json, friendly_errors, json_option, print_table

METADATA_SUFFIX = ".metadata.json"


@click.command(
    "diversity", short_help="Publish each sensitive QID as a set of values: (l1..lq)-diverse, (t1..tq)-close."
)
@source_options
@click.option("--attributes", required=True, help="Sensitive quasi-identifiers, comma-separated.")
@click.option("--l", "l_values", help="l for every attribute (--l 3) or per attribute (--l age=3,job=2).")
@click.option(
    "--t", "t_values", help="t for every attribute (--t 0.2) or per attribute (--t age=0.1,job=0.3)."
)
@click.option(
    "--variant",
    type=click.Choice(["frequency", "entropy"]),
    default="frequency",
    show_default=True,
    help="Which l-diversity the report states (the sets are the same: Theorems 2 and 3).",
)
@click.option(
    "--domain", "domains", multiple=True, help="COLUMN=v1,v2,…: an attribute's public domain. Repeatable."
)
@click.option(
    "--domain-file",
    type=click.Path(path_type=Path, dir_okay=False, exists=True),
    help='JSON: {"col": ["v1", …]}.',
)
@click.option("--bins", multiple=True, help="COLUMN=e0,e1,…: bin a number at these public edges. Repeatable.")
@click.option(
    "--domains-from-data",
    is_flag=True,
    help="Take a domain missing elsewhere from the column's values (rare values then become public; the "
    "report says so).",
)
@click.option(
    "--out", "out", required=True, help="PATH.csv (JSON arrays), PATH.parquet (lists), or db:TABLE (arrays)."
)
@click.option(
    "--metadata",
    "metadata_path",
    type=click.Path(path_type=Path, dir_okay=False),
    help=f"Where the analyst's metadata goes (default: next to --out, *{METADATA_SUFFIX}).",
)
@click.option("--replace", is_flag=True, help="Overwrite --out and the metadata if they exist.")
@click.option(
    "--report", "report_path", type=click.Path(path_type=Path, dir_okay=False), help="Write the report."
)
@click.option(
    "--seed",
    type=int,
    help="Seed the randomization, for reproducible research runs only: anyone who knows the seed can undo "
    "the randomization. Without it the OS's CSPRNG seeds it.",
)
@json_option
@friendly_errors
@engine_errors
def diversity_command(**options: Any) -> None:
    """Publish sensitive quasi-identifiers as sets of values, per Sei et al. (seed 001).

    Every record becomes one row; for each attribute S_j the row holds a set of η_j values: with
    probability p_j the true value and η_j − 1 others, else η_j values drawn from the domain. --l gives
    (p, η) = (1, l): frequency and entropy l-diversity of every equivalence class (Theorems 2–3); --t picks
    (p, η) by Algorithm 1 so that no single record's Bayes posterior is farther than t from the table's
    distribution; both give both. Domains are public: --domain, --domain-file, the policy's values, or
    --bins, never silently the data. Rows are shuffled. The metadata (domains, p, η) lets analysts
    reconstruct cross-tabulations with `veil reconstruct`.

    \b
    Example:
      veil materialize diversity --input adult.csv --attributes age,occupation,salary \\
          --bins age=17,30,45,60,91 --domain-file adult_domains.json --l 3 --out adult_l3.parquet
    """
    attributes = split_columns(options["attributes"], "--attributes")
    ls = _per_attribute(options["l_values"], attributes, "--l", int)
    ts = _per_attribute(options["t_values"], attributes, "--t", float)
    if not ls and not ts:
        raise AnonymizationError("give --l, --t or both", hint="e.g. --l 3, or --t 0.2, or --l age=3,job=2")
    target = OutputTarget.parse(options["out"])
    metadata_path = options["metadata_path"] or _default_metadata(target)
    with open_source(*source_arguments(options)) as source:
        source.require_columns(attributes)
        ensure_writable(target, source, replace=options["replace"])
        _check_metadata_path(metadata_path, options["replace"])
        domains = resolve_domains(
            attributes,
            options=options["domains"],
            domain_file=options["domain_file"],
            bins=options["bins"],
            policy_values=policy_domains(*source_arguments(options)[:3]),
            source=source,
            from_data=options["domains_from_data"],
        )
        check_domain_sizes(domains, ls)
        codes = attribute_codes(source, attributes, domains)
        releases = [
            plan_attribute(
                attribute,
                domains[attribute].values,
                codes[:, j],
                l=ls.get(attribute),
                t=ts.get(attribute),
                diversity=options["variant"],
            )
            for j, attribute in enumerate(attributes)
        ]
        rng = np.random.default_rng(options["seed"] if options["seed"] is not None else secrets.randbits(128))
        order = rng.permutation(len(codes))  # rows leave in an order that says nothing about the table's
        shuffled = codes[order]
        published = randomize(shuffled, releases, rng)
        verify_release(shuffled, published, releases)
        columns = {r.attribute: set_column(p, r.domain) for r, p in zip(releases, published, strict=True)}
        write_sets(columns, target, source=source, replace=options["replace"])
        metadata = _metadata(releases, domains, len(codes), options)
        if target.kind == "table":  # next to the release, for veil_reconstruct over the wire
            companion = OutputTarget.parse(f"db:{target.table}{METADATA_TABLE_SUFFIX}")
            document = pd.DataFrame({"document": [json.dumps(metadata, ensure_ascii=False)]})
            write_frame(document, companion, source=source, replace=options["replace"])
    metadata_path.write_text(json.dumps(metadata, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    report = {**metadata, "command": "veil materialize diversity", "source": source.description}
    report |= {"output": options["out"], "metadata_file": str(metadata_path)}
    if options["report_path"] is not None:
        options["report_path"].write_text(
            json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
        )
    if options["as_json"]:
        echo_json(report)
    else:
        _print_summary(report)


def _per_attribute(text: str | None, attributes: Sequence[str], option: str, kind: type) -> dict[str, Any]:
    """``3`` → the same for every attribute; ``age=3,job=2`` → those attributes only."""
    if text is None:
        return {}
    try:
        if "=" not in text:
            return dict.fromkeys(attributes, kind(text))
        values = {name: kind(value) for name, value in assignments(text.split(","), option, "age=3,job=2")}
    except ValueError:
        raise AnonymizationError(
            f"cannot read {option} {text!r}", hint=f"e.g. {option} 3 or {option} age=3"
        ) from None
    unknown = sorted(set(values) - set(attributes))
    if unknown:
        raise AnonymizationError(f"{option} names {unknown[0]!r}, which is not in --attributes")
    return values


def _default_metadata(target: OutputTarget) -> Path:
    if target.path is not None:
        return target.path.with_name(target.path.name + METADATA_SUFFIX)
    assert target.table is not None
    return Path(target.table + METADATA_SUFFIX)


def _check_metadata_path(path: Path, replace: bool) -> None:
    if path.exists() and not replace:
        raise AnonymizationError(
            f"{path} already exists", hint="choose another --metadata, or pass --replace"
        )


def _metadata(
    releases: Sequence[AttributeRelease], domains: dict[str, Domain], rows: int, options: dict[str, Any]
) -> dict[str, Any]:
    """What the analyst needs (and what the report states): per attribute its domain and where it came
    from, p, η and the guarantee."""
    attributes = []
    for release in releases:
        entry = release.to_metadata()
        entry["domain_source"] = domains[release.attribute].source
        entry["guarantee"] = _guarantee(release, options["variant"])
        attributes.append(entry)
    data_derived = [r.attribute for r in releases if domains[r.attribute].source == "data"]
    return {
        "format": "veil sensitive-QID release 1",
        "rows": rows,
        "attributes": attributes,
        "seeded": options["seed"] is not None,
        "domains_from_data": data_derived,
        "note": "not differential privacy: each record's sets are randomized as Sei et al. describe",
    }


def _guarantee(release: AttributeRelease, variant: str) -> str:
    parts = []
    if release.l is not None:
        parts.append(f"{variant} l={release.l}")
    if release.t is not None:
        parts.append(f"t={release.t:g} (worst-case EMD {release.achieved_emd:.4g})")
    return ", ".join(parts)


def _print_summary(report: dict[str, Any]) -> None:
    click.echo(f"{report['rows']:,} rows → {report['output']} (metadata: {report['metadata_file']})")
    rows = [
        {
            "attribute": a["attribute"],
            "d": a["d"],
            "p": round(a["p"], 6),
            "eta": a["eta"],
            "guarantee": a["guarantee"],
            "expected_l2": "∞" if a["expected_l2"] is None else round(a["expected_l2"], 6),
            "domain": a["domain_source"],
        }
        for a in report["attributes"]
    ]
    print_table(rows, ["attribute", "d", "p", "eta", "guarantee", "expected_l2", "domain"])
    if report["seeded"]:
        click.echo("warning: --seed makes the randomization reproducible by anyone who knows the seed")
    if report["domains_from_data"]:
        click.echo(f"warning: domains read from the data: {', '.join(report['domains_from_data'])}")
