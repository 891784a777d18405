"""OpenDP 0.16's user-level grouped count on MovieLens, for test_auto_bound_sweep.py. Run with a Python that
has ``opendp[polars]==0.16.0`` (it pins polars 1.36.1, which Veil's venv does not carry, so it lives in its
own venv: ``python3 -m venv /tmp/opendp && /tmp/opendp/bin/pip install "opendp[polars]==0.16.0"``).

Usage: ``python opendp_runner.py RATINGS_CSV DRAWS ROWS_PER_USER EPSILON...``. Prints one JSON object:
``{"version", "results": {ε: {"scale", "charge", "draws": [[count per decade 1900…2010], …]}}}``.

The pipeline is OpenDP's own for user-level privacy with an identifier: the privacy unit is one
``user_id`` (``dp.unit_of(contributions=1, identifier=…)``), the query truncates each user to
``ROWS_PER_USER`` rows (``truncate_per_group``: a random sample of the user's rows, OpenDP's default
``keep``), groups by decade with the twelve decades as public keys (``with_keys``, as Veil's policy
declares them) and releases ``dp.len()`` — integer Laplace noise calibrated by OpenDP's privacy map.
The query is resolved once per ε into an OpenDP measurement (about 5 s of construction) and invoked once
per draw: each invocation is a fresh release whose cost is the measurement's privacy map at one
identifier, reported as ``charge`` (ε, δ = 0); ``dp.len(signed=False)`` clamps counts at zero, OpenDP's
current default, named to silence its warning that the default will change.
"""

from __future__ import annotations

import json
import sys
import warnings

import opendp.prelude as dp
import polars as pl

DECADES = list(range(1900, 2020, 10))


def main() -> None:
    path, draws, rows_per_user, *epsilons = sys.argv[1:]
    dp.enable_features("contrib")
    warnings.simplefilter("ignore")  # "epsilon should be less than or equal to 5" at ε = 10
    ratings = (
        pl.read_csv(path, null_values=["NA", ""])
        .filter(pl.col("year").is_not_null())
        .select(pl.col("userId").alias("user_id"), pl.col("year").cast(pl.Int64))
        .with_columns(((pl.col("year") // 10) * 10).alias("decade"))
        .lazy()
    )
    keys = pl.LazyFrame({"decade": DECADES})
    results = {}
    for epsilon in epsilons:
        context = dp.Context.compositor(
            data=ratings,
            privacy_unit=dp.unit_of(contributions=1, identifier=pl.col("user_id")),
            privacy_loss=dp.loss_of(epsilon=float(epsilon)),
            split_evenly_over=1,
        )
        query = (
            context.query()
            .truncate_per_group(int(rows_per_user))
            .group_by("decade")
            .agg(dp.len(signed=False))
            .with_keys(keys)
        )
        measurement = query.resolve()
        runs = []
        for _ in range(int(draws)):
            released = dict(measurement(ratings).collect().iter_rows())
            runs.append([int(released.get(decade, 0)) for decade in DECADES])
        results[epsilon] = {
            "scale": float(query.summarize()["scale"][0]),
            "charge": float(measurement.map(1)),  # OpenDP's privacy map: ε of one invocation
            "draws": runs,
        }
    print(json.dumps({"version": dp.__version__, "results": results}))


if __name__ == "__main__":
    main()
