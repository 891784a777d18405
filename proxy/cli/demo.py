"""A synthetic health dataset and its policy, so that ``veil init-demo`` gives a working proxy at once.

Everything is drawn from one seeded :class:`numpy.random.Generator` in a fixed order, so the same seed
gives the same rows. The generation is vectorised (numpy arrays → pandas frames → one
``CREATE TABLE … AS SELECT`` each), which keeps 100,000 people to about a second.

The data are invented but shaped like a real registry, so that DP answers look plausible: a population
pyramid for age, regions of uneven size, log-normal incomes, a heavy-tailed number of visits per person
that grows with age, diagnoses whose frequencies depend on age, and costs that depend on the diagnosis.
Numeric values are kept inside the bounds declared in the policy and text values inside the declared
public domains, so the demo policy is truthful about its own data.
"""

from __future__ import annotations

import contextlib
import datetime
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import numpy.typing as npt
import pandas as pd

from proxy.config import write_document
from proxy.errors import ConfigError

DATASET = "demo"
CONFIG_FILE = "veil.toml"
DATABASE_FILE = "demo.duckdb"
LEDGER_FILE = "ledger.sqlite"
DEFAULT_PEOPLE = 100_000
DEFAULT_SEED = 20261126

FIRST_DAY = datetime.date(2024, 1, 1)
LAST_DAY = datetime.date(2025, 12, 31)
MAX_AGE = 99
INCOME_BOUNDS = (0, 250_000)
COST_BOUNDS = (0, 5_000)
AGE_BOUNDS = (0, 100)
MAX_VISITS_PER_PATIENT = 20

VISITS_MAX_CONTRIBUTIONS = 10
"""Rows of ``visits`` kept per patient at query time.

Visits per patient are heavy-tailed (negative binomial, mean about 3.3, capped at 20). Keeping 10
keeps every row of about 95% of patients and about 94% of all visits, while one patient can move a
COUNT by at most 10 and a SUM(cost) by at most 10 × 5,000. Keeping 15 would keep 99% of visits but
make every answer 1.5 times noisier; keeping 5 would halve the noise but drop a quarter of the visits.
The demo sits in between so that both effects, truncation bias and noise, are visible.
"""

SEXES = ("female", "male")
FEMALE_SHARE = 0.51

REGIONS = ("capital", "north", "south", "east", "west", "coast", "islands")
REGION_SHARES = (0.26, 0.18, 0.17, 0.14, 0.12, 0.09, 0.04)

# Diagnosis → median cost of a visit (currency units). Age profiles are in _diagnosis_weights.
DIAGNOSIS_MEDIAN_COST = {
    "checkup": 80.0,
    "respiratory_infection": 120.0,
    "otitis": 90.0,
    "asthma": 150.0,
    "dermatitis": 110.0,
    "injury": 350.0,
    "anxiety": 180.0,
    "depression": 200.0,
    "back_pain": 220.0,
    "hypertension": 160.0,
    "diabetes": 260.0,
    "arthritis": 300.0,
    "copd": 450.0,
    "heart_disease": 950.0,
}
DIAGNOSES = tuple(DIAGNOSIS_MEDIAN_COST)

_FloatArray = npt.NDArray[np.float64]
_IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True)
class DemoLayout:
    """Where :func:`build_demo` put things. The ledger is only named here; ``veil init-demo`` creates it."""

    config_path: Path
    database_path: Path
    ledger_path: Path
    dataset: str = DATASET
    tables: tuple[str, ...] = ("patients", "visits")


def build_demo(directory: Path, *, people: int = DEFAULT_PEOPLE, seed: int = DEFAULT_SEED) -> DemoLayout:
    """Write ``demo.duckdb`` and ``veil.toml`` into ``directory``; the same seed gives the same rows.

    Refuses to touch a directory that already holds a demo, so an existing ledger or policy edits
    are never silently replaced. The database is built under a temporary name and renamed at the
    end, so an interrupted build leaves nothing that blocks the next attempt.
    """
    if people < 1:
        raise ConfigError(f"the demo needs at least one person, not {people}")
    layout = DemoLayout(
        config_path=directory / CONFIG_FILE,
        database_path=directory / DATABASE_FILE,
        ledger_path=directory / LEDGER_FILE,
    )
    existing = [p for p in (layout.config_path, layout.database_path, layout.ledger_path) if p.exists()]
    if existing:
        raise ConfigError(
            f"{directory} already holds a demo ({', '.join(p.name for p in existing)})",
            hint="choose another directory, or delete those files to start over",
        )
    directory.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    patients = _patients(rng, people)
    visits = _visits(rng, patients)
    partial = directory / f".{DATABASE_FILE}.partial"
    try:
        _write_database(partial, patients=patients, visits=visits)
        partial.replace(layout.database_path)
        write_document(layout.config_path, _policy_document())
    except BaseException:
        for leftover in (partial, partial.with_name(partial.name + ".wal"), layout.database_path):
            with contextlib.suppress(FileNotFoundError):
                leftover.unlink()
        raise
    return layout


def _patients(rng: np.random.Generator, people: int) -> pd.DataFrame:
    ages = np.arange(MAX_AGE + 1)
    # A population pyramid: flat to 50 (slightly fewer children), thinning quickly after 60.
    weights = np.where(ages < 50, 1.0, np.exp(-(((ages - 50) / 26.0) ** 2)))
    weights[ages < 18] *= 0.9
    age = rng.choice(ages, size=people, p=weights / weights.sum())
    female = rng.random(people) < FEMALE_SHARE
    region = rng.choice(len(REGIONS), size=people, p=np.asarray(REGION_SHARES))
    return pd.DataFrame(
        {
            "patient_id": np.arange(1, people + 1, dtype=np.int64),
            "age": age.astype(np.int32),
            "sex": pd.Categorical.from_codes(np.where(female, 0, 1), categories=list(SEXES)),
            "region": pd.Categorical.from_codes(region, categories=list(REGIONS)),
            "income": _income(rng, age),
        }
    )


def _income(rng: np.random.Generator, age: _IntArray) -> _FloatArray:
    """Log-normal yearly income whose median peaks in mid-life; none under 16, some adults none at all."""
    median = 14_000 + 34_000 * np.exp(-(((age - 48) / 17.0) ** 2))
    median = np.where(age >= 67, 26_000.0, median)
    income = median * rng.lognormal(mean=0.0, sigma=0.7, size=age.size)
    no_income = (age < 16) | (rng.random(age.size) < 0.06)
    income = np.where(no_income, 0.0, income)
    return np.round(np.clip(income, *INCOME_BOUNDS), 2)


def _visits(rng: np.random.Generator, patients: pd.DataFrame) -> pd.DataFrame:
    age = patients["age"].to_numpy(np.int64)
    # Negative binomial (a gamma-mixed Poisson): most people few visits, a few many. Babies and
    # the old visit more often.
    mean = 1.0 + 2.2 * np.exp(-age / 3.0) + 0.06 * age
    shape = 1.6
    counts = np.minimum(rng.negative_binomial(shape, shape / (shape + mean)), MAX_VISITS_PER_PATIENT)
    owner = np.repeat(np.arange(age.size), counts)
    total = owner.size
    day = rng.integers(0, (LAST_DAY - FIRST_DAY).days + 1, size=total)
    diagnosis = _diagnoses(rng, age[owner])
    median_cost = np.asarray(list(DIAGNOSIS_MEDIAN_COST.values()))[diagnosis]
    cost = np.round(np.clip(median_cost * rng.lognormal(0.0, 0.8, size=total), *COST_BOUNDS), 2)
    order = np.lexsort((owner, day))  # visit ids follow the calendar, as in a real registry
    return pd.DataFrame(
        {
            "visit_id": np.arange(1, total + 1, dtype=np.int64),
            "patient_id": patients["patient_id"].to_numpy()[owner[order]],
            "visit_date": np.datetime64(FIRST_DAY, "D") + day[order],
            "diagnosis": pd.Categorical.from_codes(diagnosis[order], categories=list(DIAGNOSES)),
            "cost": cost[order],
            "region": patients["region"].to_numpy()[owner[order]],
        }
    )


def _diagnoses(rng: np.random.Generator, age: _IntArray) -> _IntArray:
    """Draw one diagnosis per visit from an age-dependent distribution (inverse CDF, vectorised)."""
    cumulative = np.cumsum(_diagnosis_weights(), axis=1)
    cumulative /= cumulative[:, -1:]
    u = rng.random(age.size)
    chosen = (u[:, None] >= cumulative[age]).sum(axis=1)
    return np.minimum(chosen, len(DIAGNOSES) - 1).astype(np.int64)


def _diagnosis_weights() -> _FloatArray:
    """Relative frequency of each diagnosis (columns, in DIAGNOSES order) at each age 0–99 (rows)."""
    a = np.arange(MAX_AGE + 1, dtype=np.float64)

    def hump(centre: float, width: float) -> _FloatArray:
        return np.exp(-(((a - centre) / width) ** 2))

    def rising(midpoint: float, width: float) -> _FloatArray:
        return 1.0 / (1.0 + np.exp(-(a - midpoint) / width))

    profiles = {
        "checkup": np.full_like(a, 3.0),
        "respiratory_infection": 2.5 * (1.0 + 1.5 * np.exp(-a / 8.0)),
        "otitis": 2.0 * np.exp(-a / 6.0) + 0.05,
        "asthma": 0.6 + 0.6 * np.exp(-a / 15.0),
        "dermatitis": np.full_like(a, 0.7),
        "injury": 1.2 * (1.0 + hump(20.0, 12.0)),
        "anxiety": 0.8 * hump(35.0, 20.0) + 0.1,
        "depression": 0.8 * hump(45.0, 22.0) + 0.1,
        "back_pain": 1.2 * hump(50.0, 20.0) + 0.05,
        "hypertension": 3.0 * rising(50.0, 8.0),
        "diabetes": 2.0 * rising(55.0, 9.0),
        "arthritis": 1.5 * rising(60.0, 8.0),
        "copd": 1.0 * rising(65.0, 8.0),
        "heart_disease": 1.8 * rising(65.0, 7.0),
    }
    return np.column_stack([profiles[name] for name in DIAGNOSES])


_CREATE_PATIENTS = """
CREATE TABLE patients AS
SELECT patient_id::BIGINT AS patient_id, age::INTEGER AS age, sex::VARCHAR AS sex,
       region::VARCHAR AS region, income::DOUBLE AS income
FROM patients_frame ORDER BY patient_id
"""
_CREATE_VISITS = """
CREATE TABLE visits AS
SELECT visit_id::BIGINT AS visit_id, patient_id::BIGINT AS patient_id, visit_date::DATE AS visit_date,
       diagnosis::VARCHAR AS diagnosis, cost::DOUBLE AS cost, region::VARCHAR AS region
FROM visits_frame ORDER BY visit_id
"""


def _write_database(path: Path, *, patients: pd.DataFrame, visits: pd.DataFrame) -> None:
    with duckdb.connect(str(path)) as connection:
        connection.register("patients_frame", patients)
        connection.register("visits_frame", visits)
        connection.execute(_CREATE_PATIENTS)
        connection.execute(_CREATE_VISITS)
        connection.unregister("patients_frame")
        connection.unregister("visits_frame")
        connection.execute("CHECKPOINT")


def _policy_document() -> dict[str, Any]:
    def private(type_name: str) -> dict[str, Any]:
        return {"type": type_name}

    def bounded(type_name: str, bounds: tuple[int, int]) -> dict[str, Any]:
        return {"type": type_name, "lower": bounds[0], "upper": bounds[1]}

    def public(values: tuple[str, ...]) -> dict[str, Any]:
        return {"type": "text", "public": True, "values": list(values)}

    patients = {
        "privacy_unit": "patient_id",
        "max_contributions": 1,
        "columns": {
            "patient_id": private("integer"),
            "age": bounded("integer", AGE_BOUNDS),
            "sex": public(SEXES),
            "region": public(REGIONS),
            "income": bounded("real", INCOME_BOUNDS),
        },
    }
    visits = {
        "privacy_unit": "patient_id",
        "max_contributions": VISITS_MAX_CONTRIBUTIONS,
        "columns": {
            "visit_id": private("integer"),
            "patient_id": private("integer"),
            "visit_date": {"type": "date", "lower": FIRST_DAY, "upper": LAST_DAY},
            "diagnosis": public(DIAGNOSES),
            "cost": bounded("real", COST_BOUNDS),
            "region": public(REGIONS),
        },
    }
    return {
        "ledger": {"path": LEDGER_FILE},
        "datasets": {
            DATASET: {
                "backend": "duckdb",
                "path": DATABASE_FILE,
                "default_epsilon": 0.1,
                "max_epsilon": 1.0,
                "tables": {"patients": patients, "visits": visits},
            }
        },
    }
