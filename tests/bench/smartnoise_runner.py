"""Answer the comparison queries through smartnoise-sql, one at a time on request; driven by
test_vs_smartnoise.py with a Python that has smartnoise-sql installed (it pins older pandas/SQLAlchemy
than Veil, so it lives in its own venv).

Usage: ``python smartnoise_runner.py ADULT_DATA TOTAL_EPSILON``. smartnoise's ``Privacy(epsilon=…)`` is
per mechanism, and a query uses several (AVG is SUM and COUNT, and a grouped query adds a COUNT for
thresholding), so each query gets a reader whose per-mechanism ε is TOTAL_EPSILON divided by the number
of mechanisms smartnoise's own accounting (``get_privacy_cost``) counts for it: every query then costs
TOTAL_EPSILON in all, like Veil's.

Protocol, one JSON object per line. First out: per query, the per-mechanism ε and smartnoise's
documented cost (ε, δ). Then requests on stdin:

* ``{"query": NAME}`` → the seconds ``reader.execute`` took, the answer rows, and ``charge``: the (ε, δ)
  of this execution alone by smartnoise's odometer (its mechanisms composed on a fresh odometer);
* ``{"reset": true}`` → ``{}`` after resetting every reader's odometer (the driver's warm-up is over);
* ``{"totals": true}`` → per query, the reader's odometer since the reset. smartnoise composes a session
  with Kairouz et al.'s advanced composition (``OdometerHeterogeneous``), which for many mechanisms is
  less than their sum — unlike Veil's ledger, which sums (basic composition).
"""

from __future__ import annotations

import json
import sys
import time
import warnings

import pandas as pd
import snsql
from snsql.sql.odometer import OdometerHeterogeneous

QUERIES = {
    "count": "SELECT COUNT(*) AS n FROM adult.adult",
    "count_by_education": "SELECT education, COUNT(*) AS n FROM adult.adult GROUP BY education",
    "avg_sum_by_sex": "SELECT sex, AVG(age) AS a, SUM(hours_per_week) AS h FROM adult.adult GROUP BY sex",
}
DELTA = 1e-5
METADATA = {
    "Database": {
        "adult": {
            "adult": {
                "row_privacy": True,
                "rows": 32561,
                "age": {"type": "int", "lower": 17, "upper": 90},
                "education": {"type": "string"},
                "sex": {"type": "string"},
                "hours_per_week": {"type": "int", "lower": 1, "upper": 99},
            }
        }
    }
}


def readers(frame: pd.DataFrame, total_epsilon: float) -> dict[str, object]:
    """One reader per query, its per-mechanism ε chosen so that the query costs ``total_epsilon``."""
    chosen = {}
    for name, sql in QUERIES.items():
        probe = snsql.from_df(frame, privacy=snsql.Privacy(epsilon=1.0, delta=DELTA), metadata=METADATA)
        mechanisms = float(probe.get_privacy_cost(sql)[0])  # ε at 1 per mechanism = number of mechanisms
        privacy = snsql.Privacy(epsilon=total_epsilon / mechanisms, delta=DELTA)
        chosen[name] = snsql.from_df(frame, privacy=privacy, metadata=METADATA)
    return chosen


def main() -> None:
    warnings.simplefilter("ignore")
    path, total_epsilon = sys.argv[1], float(sys.argv[2])
    frame = pd.read_csv(path, header=None, skiprows=1, skipinitialspace=True)
    frame = pd.DataFrame(
        {"age": frame[0], "education": frame[3], "sex": frame[9], "hours_per_week": frame[12]}
    )
    by_query = readers(frame, total_epsilon)
    setup = {
        name: {
            "epsilon_per_mechanism": reader.privacy.epsilon,
            "documented_cost": _floats(reader.get_privacy_cost(QUERIES[name])),
        }
        for name, reader in by_query.items()
    }
    print(json.dumps(setup), flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        if "query" in request:
            reply = run(by_query[request["query"]], QUERIES[request["query"]])
        elif "reset" in request:
            for reader in by_query.values():
                reader.odometer.reset()
            reply = {}
        else:
            reply = {name: _floats(reader.odometer.spent) for name, reader in by_query.items()}
        print(json.dumps(reply), flush=True)


def run(reader: object, sql: str) -> dict[str, object]:
    steps = len(reader.odometer.steps)
    start = time.perf_counter()
    rows = reader.execute(sql)
    seconds = time.perf_counter() - start
    alone = OdometerHeterogeneous(reader.privacy)
    for epsilon, delta in reader.odometer.steps[steps:]:
        alone.spend(snsql.Privacy(epsilon=epsilon, delta=delta))
    return {
        "seconds": seconds,
        "answer": [list(map(_plain, row)) for row in rows[1:]],
        "charge": _floats(alone.spent),
    }


def _floats(values: object) -> list[float]:
    return [float(v) for v in values]


def _plain(value: object) -> object:
    return value.item() if hasattr(value, "item") else value


if __name__ == "__main__":
    main()
