"""Optimal global recoding against ARX 3.9 (Flash, default Loss metric) on ARX's Adult, then at scale:
Census-Income KDD (~200k rows) and a generated 10-million-row DuckDB table.

Run with ``make bench``; numbers go into docs/benchmarks.md by hand. ARX's figures are a **recorded
reference**, not measured here: issue 6 lists ARX 3.9's results (Flash, default Loss metric, warmed JVM,
"this machine class"); ARX is a Java library distributed from its own site and GitHub, neither reachable
from this machine, so no run of ARX can be timed next to Veil's. The bench therefore asserts the
deterministic result (Loss ≤ ARX's recorded optimum in every row) and prints Veil's own times — the median
of warm runs: ``search`` is the lattice search on the frequency set, ``end to end`` adds the engine's
GROUP BY over the table — with no ratio to ARX's recorded times.

The 10-million-row run happens in a child process, started from a fresh, small helper process whose
``RUSAGE_CHILDREN`` is then the child's alone: on Linux a child's ``ru_maxrss`` starts from the
high-water mark of the process that spawned it, so measured from pytest (which holds the generated
table by then) it is pytest's peak, not the anonymization's. The child also reports its own ``VmHWM``
as a cross-check, writes its result to a file (not stdout) and turns DuckDB's progress bar off, which
otherwise prints into stdout. The goal is < 60 s and < 2 GB.
"""

from __future__ import annotations

import json
import resource
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pytest

from anonymizers.diversity import DiversityModel
from anonymizers.frequency import FrequencySet, frequency_set
from anonymizers.global_recoding import GlobalRecodingResult, PrivacyModel, anonymize, search
from anonymizers.hierarchy import Hierarchy, hierarchy_from_spec, load_arx_hierarchy
from anonymizers.source import TableSource
from tests.bench.child_process import run_measured

pytestmark = pytest.mark.bench

DATA = Path(__file__).resolve().parents[3] / "shared" / "data"
ADULT_QI = ["sex", "age", "race", "marital-status", "education", "native-country", "workclass", "occupation"]
RUNS = 5


@dataclass(frozen=True)
class Reference:
    """One configuration and ARX 3.9's recorded result for it (issue 6; not measured in this run)."""

    name: str
    arx_seconds: float  # recorded reference only: never divided into a Veil time
    arx_loss: float
    model: PrivacyModel
    suppression_limit: float
    sensitive: str | None = None
    arx_result: str = ""

    @property
    def qi(self) -> list[str]:
        return [q for q in ADULT_QI if q != self.sensitive]


REFERENCES = [
    Reference("k=2, 0 %", 0.065, 0.527, PrivacyModel(k=2), 0.0, arx_result="60 classes; 1−gran 0.643"),
    Reference("k=5, 0 %", 0.060, 0.592, PrivacyModel(k=5), 0.0, arx_result="30 classes; 1−gran 0.714"),
    Reference("k=10, 0 %", 0.040, 0.592, PrivacyModel(k=10), 0.0),
    Reference("k=20, 0 %", 0.029, 0.649, PrivacyModel(k=20), 0.0),
    Reference(
        "k=5, 5 %",
        0.480,
        0.252,
        PrivacyModel(k=5),
        0.05,
        arx_result="1,458 suppressed, 399 classes; 1−gran 0.300",
    ),
    Reference(
        "distinct-l=3 occupation, 5 %",
        0.211,
        0.154,
        PrivacyModel(k=1, diversity=DiversityModel(l=3)),
        0.05,
        "occupation",
        "527 classes",
    ),
    Reference(
        "t=0.2 salary, 5 %",
        3.2,
        0.480,
        PrivacyModel(k=1, diversity=DiversityModel(t=0.2)),
        0.05,
        "salary-class",
        "95 classes",
    ),
]


def median_seconds(action: Callable[[], object], runs: int = RUNS) -> float:
    action()  # warm
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        action()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


@pytest.fixture(scope="module")
def adult() -> Iterator[TableSource]:
    if not (DATA / "adult.csv").exists():
        pytest.skip(f"needs {DATA / 'adult.csv'}")
    with TableSource.csv(DATA / "adult.csv", delimiter=";") as source:
        yield source


@pytest.fixture(scope="module")
def adult_hierarchies() -> dict[str, Hierarchy]:
    return {q: load_arx_hierarchy(DATA / f"adult_hierarchy_{q}.csv", q) for q in ADULT_QI}


@pytest.mark.parametrize("reference", REFERENCES, ids=[r.name for r in REFERENCES])
def test_adult_against_arx(
    adult: TableSource, adult_hierarchies: dict[str, Hierarchy], reference: Reference
) -> None:
    tree = [adult_hierarchies[q] for q in reference.qi]
    frequency = frequency_set(adult, reference.qi, tree, sensitive=reference.sensitive)
    assert isinstance(frequency, FrequencySet)
    options = {"suppression_limit": reference.suppression_limit}

    def run_search() -> GlobalRecodingResult:
        return search(frequency, reference.qi, reference.model, **options)

    def run_all() -> GlobalRecodingResult:
        return anonymize(adult, reference.qi, tree, reference.model, sensitive=reference.sensitive, **options)

    result = run_search()
    searched = median_seconds(run_search)
    end_to_end = median_seconds(run_all, runs=3)
    print(
        f"\n{reference.name:32} ARX 3.9 recorded reference (issue 6, not run here): Loss {reference.arx_loss:.3f}"
        f" ({reference.arx_result})"
        f"\n{'':32} Veil {searched * 1000:6.0f} ms search,"
        f" {end_to_end * 1000:.0f} ms end to end  Loss {result.metrics['loss']:.4f}"
        f"  1−gran {result.metrics['granularity_loss']:.3f}  {result.class_count} classes,"
        f" {result.suppressed_records} suppressed, levels {result.levels},"
        f" {result.statistics.nodes_checked}/{result.statistics.nodes_total} nodes checked"
    )
    assert result.metrics["loss"] <= reference.arx_loss + 0.0005


CENSUS_QI = {  # header-less file: DuckDB names the columns column00 … column41
    "column00": "age",
    "column01": "class of worker",
    "column04": "education",
    "column07": "marital status",
    "column10": "race",
    "column12": "sex",
    "column35": "citizenship",
    "column39": "weeks worked in year",
}


def test_census_income_kdd() -> None:
    path = DATA / "census_income_kdd.csv.gz"
    if not path.exists():
        pytest.skip(f"needs {path}")
    with TableSource.csv(path, delimiter=", ", header=False) as source:
        qi = list(CENSUS_QI)
        tree = [hierarchy_from_spec(q, None, source.distinct_values(q, as_text_values=False)) for q in qi]
        model = PrivacyModel(k=5)

        def run() -> GlobalRecodingResult:
            return anonymize(source, qi, tree, model, suppression_limit=0.05)

        result = run()
        seconds = median_seconds(run, runs=3)
        rows = source.row_count()
    print(
        f"\nCensus-Income KDD ({rows:,} rows, 8 QIs, auto hierarchies; ARX's recorded 420 ms used its own"
        " hierarchies and is not comparable):"
        f"\n  Veil {seconds * 1000:.0f} ms end to end, levels "
        f"{ {CENSUS_QI[q]: level for q, level in result.level_map.items()} }, Loss {result.metrics['loss']:.4f},"
        f" {result.class_count} classes, {result.suppressed_records} suppressed,"
        f" {result.statistics.nodes_checked}/{result.statistics.nodes_total} nodes checked"
    )
    assert result.achieved["k"] >= 5


ROWS = 10_000_000
GENERATE = f"""
CREATE TABLE people AS
SELECT i AS id,
       18 + CAST(hash(i) % 73 AS INTEGER) AS age,
       CASE WHEN hash(i + {ROWS}) % 2 = 0 THEN 'F' ELSE 'M' END AS sex,
       CAST(10000 + (hash(i + {2 * ROWS}) % 200) * 37 AS VARCHAR) AS zip,
       'edu-' || CAST(hash(i + {3 * ROWS}) % 16 AS VARCHAR) AS education,
       CAST(hash(i + {4 * ROWS}) % 100000 AS INTEGER) AS income
FROM range({ROWS}) AS t(i)
"""
CHILD = """
import json, sys, time
from pathlib import Path
from anonymizers.global_recoding import PrivacyModel, anonymize
from anonymizers.hierarchy import Hierarchy, interval_hierarchy, suppression_hierarchy
from anonymizers.source import TableSource

start = time.perf_counter()
with TableSource.duckdb_file(Path(sys.argv[1]), "people", memory_limit="1GB") as source:
    source.engine.connection.execute("SET enable_progress_bar = false")  # it prints into stdout
    zips = tuple(source.distinct_values("zip"))
    tree = [
        interval_hierarchy("age", source.distinct_values("age", as_text_values=False), [5, 10, 20]),
        suppression_hierarchy("sex", source.distinct_values("sex")),
        Hierarchy("zip", (zips, tuple(z[:4] + "*" for z in zips), tuple(z[:3] + "**" for z in zips),
                          tuple(z[:2] + "***" for z in zips), ("*",) * len(zips))),
        suppression_hierarchy("education", source.distinct_values("education")),
    ]
    result = anonymize(source, ["age", "sex", "zip", "education"], tree, PrivacyModel(k=5),
                       max_base_classes=int(sys.argv[2]))
seconds = time.perf_counter() - start
status = Path("/proc/self/status")
hwm = [int(line.split()[1]) for line in status.read_text().splitlines() if line.startswith("VmHWM:")] \
    if status.exists() else []
Path(sys.argv[3]).write_text(json.dumps({
    "seconds": seconds, "levels": result.level_map, "classes": result.class_count,
    "checked": result.statistics.nodes_checked, "loss": result.metrics["loss"],
    "vmhwm_kib": hwm[0] if hwm else None}))
"""


@pytest.fixture(scope="module")
def ten_million(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("kanon") / "ten_million.duckdb"
    with duckdb.connect(str(path)) as connection:
        connection.execute(GENERATE)
    return path


# the raw frequency set has ~467,000 classes: 5,000,000 keeps it in numpy; 100,000 forces every node's
# GROUP BY into the engine (EngineFrequency), the path for tables whose raw combinations do not fit
@pytest.mark.parametrize("max_base_classes", [5_000_000, 100_000], ids=["numpy-rollups", "engine-per-node"])
def test_ten_million_rows_in_duckdb(ten_million: Path, max_base_classes: int, tmp_path: Path) -> None:
    output = tmp_path / "report.json"
    start = time.perf_counter()
    usage = run_measured([sys.executable, "-c", CHILD, str(ten_million), str(max_base_classes), str(output)])
    peak_mb = usage.peak_mb
    wall = time.perf_counter() - start
    assert usage.returncode == 0
    report = json.loads(output.read_text(encoding="utf-8"))
    hwm = f"{report['vmhwm_kib'] / 1024:.0f} MB" if report["vmhwm_kib"] is not None else "n/a"
    pytest_peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        f"\n10,000,000 rows (DuckDB file, 4 QIs, k=5, max_base_classes={max_base_classes:,}):"
        f" {report['seconds']:.1f} s in the child ({wall:.1f} s with interpreter starts),"
        f" the child's peak RSS {peak_mb:.0f} MB (its own VmHWM {hwm}; pytest's, not counted:"
        f" {pytest_peak:.0f} MB); levels {report['levels']},"
        f" {report['classes']:,} classes, Loss {report['loss']:.4f}, {report['checked']} nodes checked"
    )
    assert report["seconds"] < 60
    assert peak_mb < 2048
