"""Run the comparison queries through smartnoise-sql; executed by test_vs_smartnoise.py with a Python
that has smartnoise-sql installed (it pins older pandas/SQLAlchemy, so it lives in its own venv).

Usage: python smartnoise_runner.py ADULT_DATA RUNS  → JSON on stdout: per query, latencies and answers.
"""

from __future__ import annotations

import json
import sys
import time
import warnings

import pandas as pd
import snsql

QUERIES = {
    "count": "SELECT COUNT(*) AS n FROM adult.adult",
    "count_by_education": "SELECT education, COUNT(*) AS n FROM adult.adult GROUP BY education",
    "avg_sum_by_sex": "SELECT sex, AVG(age) AS a, SUM(hours_per_week) AS h FROM adult.adult GROUP BY sex",
}
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


def main() -> None:
    warnings.simplefilter("ignore")
    path, runs = sys.argv[1], int(sys.argv[2])
    frame = pd.read_csv(path, header=None, skiprows=1, skipinitialspace=True)
    frame = pd.DataFrame(
        {"age": frame[0], "education": frame[3], "sex": frame[9], "hours_per_week": frame[12]}
    )
    reader = snsql.from_df(frame, privacy=snsql.Privacy(epsilon=1.0, delta=1e-5), metadata=METADATA)
    results = {}
    for name, sql in QUERIES.items():
        timings, answers = [], []
        for _ in range(runs):
            start = time.perf_counter()
            rows = reader.execute(sql)
            timings.append(time.perf_counter() - start)
            answers.append([list(map(_plain, row)) for row in rows[1:]])
        results[name] = {"seconds": timings, "answers": answers}
    json.dump(results, sys.stdout)


def _plain(value: object) -> object:
    return value.item() if hasattr(value, "item") else value


if __name__ == "__main__":
    main()
