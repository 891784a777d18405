"""Qrlew's differentially private rewriting of the MovieLens per-decade count, for
test_auto_bound_sweep.py. Run with a Python that has ``pyqrlew`` (0.9.27 pins numpy ~= 1.24, which
Veil's venv does not carry, so it lives in its own venv: ``python3 -m venv /tmp/qrlew &&
/tmp/qrlew/bin/pip install pyqrlew``).

Usage: ``python qrlew_runner.py DSN SCHEMA DELTA EPSILON...``, where SCHEMA holds ``ratings(user_id,
year)`` and ``ratings_by_decade(user_id, decade text)`` on the PostgreSQL server at DSN (libpq
key=value form). Prints one JSON object: ``{"version", "results": {variant: {ε: {"sql",
"dp_event"}}}}`` — the rewritten SQL, which the driver runs on PostgreSQL once per draw (its noise comes
from ``RANDOM()`` in the SQL, fresh at every run), and the ``DpEvent`` Qrlew reports for it.

Two variants, both with Qrlew's defaults for everything not listed (``max_multiplicity``: 100 rows per
user, ℓ2-clipped; ``max_privacy_unit_groups``; Gaussian noise):

* ``same_sql``: Veil's SQL over ``ratings`` with what Veil's policy declares — the privacy unit
  (``user_id``) and the public range of ``year`` (1900–2019). Qrlew does not infer a list of decades from
  a range, so it releases only decades above a τ-threshold, with half the budget spent on it.
* ``public_decades``: the decade as a text column with its twelve values declared public
  (``with_possible_values``; Qrlew 0.9.27 ignores possible values on integer columns), grouped by it —
  Qrlew's best case: no threshold, all of the budget on the counts.
"""

from __future__ import annotations

import importlib.metadata
import json
import sys

import pyqrlew as qrl
import sqlalchemy


def main() -> None:
    dsn, schema, delta, *epsilons = sys.argv[1:]
    fields = dict(part.split("=", 1) for part in dsn.split())
    url = sqlalchemy.engine.URL.create(
        "postgresql+psycopg2",
        username=fields.get("user"),
        password=fields.get("password"),
        host=fields.get("host"),
        port=int(fields["port"]) if "port" in fields else None,
        database=fields.get("dbname"),
    )
    engine = sqlalchemy.create_engine(url)
    dataset = qrl.Dataset.from_database("movies", engine, schema_name=schema)
    dataset = dataset.with_range(schema, "ratings", "year", 1900, 2019)
    decades = [str(decade) for decade in range(1900, 2020, 10)]
    dataset = dataset.with_possible_values(schema, "ratings_by_decade", "decade", decades)
    variants = {
        "same_sql": (
            "ratings",
            f"SELECT (year / 10) * 10 AS decade, COUNT(*) AS n FROM {schema}.ratings GROUP BY (year / 10) * 10",
        ),
        "public_decades": (
            "ratings_by_decade",
            f"SELECT decade, COUNT(*) AS n FROM {schema}.ratings_by_decade GROUP BY decade",
        ),
    }
    results: dict[str, dict[str, object]] = {}
    for variant, (table, sql) in variants.items():
        relation = dataset.relation(sql)
        results[variant] = {}
        for epsilon in epsilons:
            rewritten = relation.rewrite_with_differential_privacy(
                dataset, [(table, [], "user_id")], {"epsilon": float(epsilon), "delta": float(delta)}
            )
            results[variant][epsilon] = {
                "sql": rewritten.relation().to_query(),
                "dp_event": rewritten.dp_event().to_dict(),
            }
    print(json.dumps({"version": importlib.metadata.version("pyqrlew"), "results": results}, default=str))


if __name__ == "__main__":
    main()
