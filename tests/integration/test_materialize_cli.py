"""``veil materialize kanon|combine`` and ``veil risk`` end to end, on generated data in a DuckDB file,
CSV and Parquet: what is written meets the model, the report says what was done and how risky it is."""

from __future__ import annotations

import io
import itertools
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pandas as pd
import pytest
import tomli_w
from click.testing import CliRunner

from anonymizers.release_search import Target, k_grid, suppression_grid
from proxy.cli.main import main as veil_main
from proxy.cli.sources import progress_callback
from tests.conftest import veil_command

QIS = ["age", "sex", "zip"]
ROWS = 800


def people(rows: int = ROWS, seed: int = 7) -> pd.DataFrame:
    """A small table with a row id, three QIs, a sensitive disease and an income class tied to age."""
    rng = np.random.default_rng(seed)
    age = rng.integers(18, 80, rows)
    return pd.DataFrame(
        {
            "id": np.arange(rows),
            "age": age,
            "sex": rng.choice(["F", "M"], rows),
            "zip": rng.choice(["10115", "10117", "10119", "20095", "20097"], rows),
            "disease": rng.choice(["flu", "asthma", "diabetes", "none"], rows),
            "income": np.where(age + rng.normal(0, 8, rows) > 50, ">50K", "<=50K"),
        }
    )


def zip_hierarchy(directory: Path) -> Path:
    path = directory / "zip.csv"
    lines = [f"{z};{z[:3]}xx;{z[0]}xxxx;*" for z in ("10115", "10117", "10119", "20095", "20097")]
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture
def data(tmp_path: Path) -> dict[str, Path]:
    frame = people()
    csv = tmp_path / "people.csv"
    frame.to_csv(csv, index=False)
    database = tmp_path / "people.duckdb"
    with duckdb.connect(str(database)) as connection:
        connection.register("frame", frame)
        connection.execute("CREATE TABLE people AS SELECT * FROM frame")
    config = tmp_path / "veil.toml"
    config.write_text(tomli_w.dumps({"datasets": {"d": {"backend": "duckdb", "path": str(database)}}}))
    return {
        "csv": csv,
        "database": database,
        "config": config,
        "zip": zip_hierarchy(tmp_path),
        "dir": tmp_path,
    }


def veil(*arguments: str, expect: int = 0) -> Any:
    result = CliRunner().invoke(veil_main, [str(a) for a in arguments])
    assert result.exit_code == expect, result.output
    return result


def report_of(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text())


def class_sizes(frame: pd.DataFrame) -> pd.Series:
    return frame.astype(str).groupby(QIS).size()


def test_optimal_recoding_writes_a_k_anonymous_csv_and_reports_its_risk(data: dict[str, Path]) -> None:
    out, report = data["dir"] / "k5.csv", data["dir"] / "k5.json"
    veil("materialize", "kanon", "--input", data["csv"], "--qi", ",".join(QIS), "--k", 5,
         "--hierarchy", f"zip={data['zip']}", "--suppression-limit", 0.02,
         "--out", out, "--report", report)  # fmt: skip
    released = pd.read_csv(out)
    written = report_of(report)
    assert class_sizes(released).min() >= 5
    assert written["rows_in"] == ROWS and written["rows_out"] == len(released) >= ROWS * 0.98
    assert written["risk"]["simulated_attack"]["n_q"] == class_sizes(released).min()
    assert written["transformation"]["suppressed_records"] == ROWS - len(released)
    assert set(written["transformation"]["levels"]) == set(QIS)
    assert 0 <= written["utility"]["metrics"]["loss"] <= 1
    assert sorted(released["id"]) == sorted(set(released["id"]))  # other columns pass through, once each


def test_risk_command_agrees_with_the_report_on_a_linked_release(data: dict[str, Path]) -> None:
    out, report = data["dir"] / "k4.parquet", data["dir"] / "k4.json"
    hierarchies = ["--hierarchy", f"zip={data['zip']}", "--hierarchy", "age=interval:5,10,20,40"]
    veil("materialize", "kanon", "--input", data["csv"], "--qi", ",".join(QIS), "--k", 4, *hierarchies,
         "--sensitive", "disease", "--out", out, "--report", report)  # fmt: skip
    scored = veil("risk", "--input", data["csv"], "--released", out, "--qi", ",".join(QIS), "--link", "id",
                  *hierarchies, "--sensitive", "disease", "--json")  # fmt: skip
    result = json.loads(scored.stdout)
    expected = report_of(report)["risk"]["simulated_attack"]
    assert result["simulated_attack"]["n_q"] == expected["n_q"] == result["classic"]["achieved_k"] >= 4
    assert result["simulated_attack"]["n_s"] == expected["n_s"]
    assert result["simulated_attack"]["records_at_risk_zero"] == 0
    assert result["diversity"]["distinct_l"] == expected["n_s"]
    assert 0 <= result["diversity"]["t"] <= 1


def arx_style(original: pd.DataFrame, released: pd.DataFrame) -> pd.DataFrame:
    """Veil's export (suppressed records left out) rewritten as ARX writes it: every record in input
    order, the quasi-identifiers of a suppressed record all ``*``."""
    kept = released.astype({q: str for q in QIS}).set_index("id")[QIS].reindex(original["id"])
    return original.assign(**{q: kept[q].fillna("*").to_numpy() for q in QIS})


def test_risk_of_an_arx_style_release_with_star_rows_is_its_class_sizes(data: dict[str, Path]) -> None:
    """Issue 12: the `*` rows were candidates for every record (n_q = their number, not the classes')."""
    out, report, arx = data["dir"] / "k5s.csv", data["dir"] / "k5s.json", data["dir"] / "arx.csv"
    hierarchies = ["--hierarchy", f"zip={data['zip']}", "--hierarchy", "age=interval:5,10,20,40"]
    veil("materialize", "kanon", "--input", data["csv"], "--qi", ",".join(QIS), "--k", 5, *hierarchies,
         "--suppression-limit", 0.02, "--sensitive", "disease", "--out", out, "--report", report)  # fmt: skip
    release = arx_style(pd.read_csv(data["csv"]), pd.read_csv(out))
    release.to_csv(arx, index=False)
    scored = json.loads(veil("risk", "--input", data["csv"], "--released", arx, "--qi", ",".join(QIS),
                             *hierarchies, "--sensitive", "disease", "--json").stdout)  # fmt: skip
    attack, classic = scored["simulated_attack"], scored["classic"]
    sizes, written = class_sizes(release), report_of(report)
    assert (release[QIS] == "*").all(axis=1).sum() == written["transformation"]["suppressed_records"]
    assert sizes[("*", "*", "*")] >= 5
    assert attack["histogram"] == [
        {"candidates": float(size), "records": int(size * count)}
        for size, count in sizes.value_counts().sort_index().items()
    ]  # every record's candidates are exactly its class: the `*` rows for the suppressed, none for others
    assert attack["n_q"] == classic["achieved_k"] == written["risk"]["simulated_attack"]["n_q"] == 5
    assert attack["risk"] == pytest.approx(1 / 5) and attack["records_at_risk_zero"] == 0
    distinct = release.groupby(QIS)["disease"].nunique()
    assert attack["n_s"] == scored["diversity"]["distinct_l"] == distinct.min()


def test_risk_keeps_a_sampled_outlier_at_risk_unless_told_to_use_the_whole_support(tmp_path: Path) -> None:
    """Issue 12: a low-confidence region = the whole support made no noised record an outlier."""
    original = pd.DataFrame({"id": range(41), "age": np.append(np.repeat(np.arange(30, 40), 4), 85)})
    original.to_csv(tmp_path / "o.csv", index=False)
    original[(original["id"] % 5 != 0) | (original["id"] == 40)].to_csv(tmp_path / "r.csv", index=False)
    arguments = ["risk", "--input", tmp_path / "o.csv", "--released", tmp_path / "r.csv", "--link", "id",
                 "--qi", "age", "--step", "age=laplace:epsilon=1,lower=17,upper=90", "--sample", 0.8, "--json"]  # fmt: skip
    default = json.loads(veil(*arguments).stdout)["simulated_attack"]
    assert default["n_q"] == 1 and default["low_threshold"] == 0.99  # the 85-year-old, alone
    support = json.loads(veil(*arguments, "--low-confidence", 1).stdout)["simulated_attack"]
    assert support["n_q"] == 1.25 and support["low_threshold"] == 1
    refused = veil(*arguments, "--low-confidence", 0.5, expect=1)
    assert "T <= T_L" in refused.output


ADULT = Path(__file__).parents[1] / "unit" / "anonymizers" / "arx_adult"
RACES = ["Amer-Indian-Eskimo", "Asian-Pac-Islander", "Black", "Other", "White"]


@pytest.fixture
def adult_sex_age_race(tmp_path: Path) -> dict[str, Path]:
    """docs/anonymize.md's population-uniqueness example: ARX's Adult on sex × age × race (72 ages seen), in
    a CSV file and in a dataset whose policy declares the domains (age 0–119, two sexes, five races)."""
    classes = pd.read_csv(ADULT / "classes_sex_age_race.csv")
    rows = classes.loc[classes.index.repeat(classes["count"]), ["sex", "age", "race"]]
    csv, database = tmp_path / "adult.csv", tmp_path / "adult.duckdb"
    rows.to_csv(csv, index=False)
    with duckdb.connect(str(database)) as connection:
        connection.register("frame", rows.reset_index(drop=True))
        connection.execute("CREATE TABLE adult AS SELECT * FROM frame")
    columns = {"age": {"type": "integer", "lower": 0, "upper": 119},
               "sex": {"type": "text", "public": True, "values": ["Female", "Male"]},
               "race": {"type": "text", "public": True, "values": RACES}}  # fmt: skip
    table = {"privacy_unit": "row", "columns": columns}
    dataset = {"backend": "duckdb", "path": str(database), "tables": {"adult": table}}
    config = tmp_path / "veil.toml"
    config.write_text(tomli_w.dumps({"datasets": {"d": dataset}}))
    return {"csv": csv, "config": config}


UNIQUES = ["--qi", "sex,age,race", "--sampling-fraction", 0.01, "--population", 3_000_000, "--json"]


def test_population_uniques_take_k_from_the_policy_domains(adult_sex_age_race: dict[str, Path]) -> None:
    """Issue 12: K was the product of the values seen (72 ages: 720 cells, U = 0.2854) although the policy
    declares 120 ages; with the declared 1,200 cells U is 0.4016, 41 % more."""
    source = ["--config", adult_sex_age_race["config"], "--dataset", "d", "--table", "adult"]
    uniques = json.loads(veil("risk", *source, *UNIQUES).stdout)["population_uniques"]
    assert uniques["cells"] == 1200 and uniques["sample_uniques"] == 62
    assert uniques["population_uniques"] == pytest.approx(0.40159, abs=5e-5)
    assert uniques["domains"] == {"sex": {"size": 2, "source": "policy"},
                                  "age": {"size": 120, "source": "policy"},
                                  "race": {"size": 5, "source": "policy"}}  # fmt: skip


def test_population_uniques_take_k_from_hierarchy_files_else_from_the_data(
    adult_sex_age_race: dict[str, Path],
) -> None:
    source = ["--input", adult_sex_age_race["csv"]]
    observed = json.loads(veil("risk", *source, *UNIQUES).stdout)["population_uniques"]
    assert observed["cells"] == 720 and observed["population_uniques"] == pytest.approx(0.28542, abs=5e-6)
    assert observed["domains"]["age"] == {"size": 72, "source": "observed"}
    hierarchy = ["--hierarchy", f"age={ADULT / 'adult_hierarchy_age.csv'}"]  # ARX's file: ages 1–100
    declared = json.loads(veil("risk", *source, *hierarchy, *UNIQUES).stdout)["population_uniques"]
    assert declared["cells"] == 1000 and declared["domains"]["age"] == {"size": 100, "source": "hierarchy"}
    assert declared["domains"]["sex"] == {"size": 2, "source": "observed"}


def test_l_diversity_holds_in_every_released_class(data: dict[str, Path]) -> None:
    out = data["dir"] / "l3.csv"
    veil("materialize", "kanon", "--input", data["csv"], "--qi", ",".join(QIS), "--k", 3,
         "--sensitive", "disease", "--l", 3, "--hierarchy", f"zip={data['zip']}", "--out", out)  # fmt: skip
    released = pd.read_csv(out).astype(str)
    assert released.groupby(QIS)["disease"].nunique().min() >= 3


def test_mondrian_writes_parquet_with_classes_of_at_least_k(data: dict[str, Path]) -> None:
    out, report = data["dir"] / "m.parquet", data["dir"] / "m.json"
    veil("materialize", "kanon", "--algorithm", "mondrian", "--input", data["csv"], "--qi", "age,zip",
         "--hierarchy", f"zip={data['zip']}", "--k", 6, "--recoding", "range", "--out", out,
         "--report", report)  # fmt: skip
    released = duckdb.read_parquet(str(out)).df()  # pandas would need pyarrow
    assert len(released) == ROWS
    assert released.astype(str).groupby(["age", "zip"]).size().min() >= 6
    assert released["age"].str.match(r"^\[\d+-\d+\]$").all()
    written = report_of(report)
    assert written["risk"]["simulated_attack"]["n_q"] >= 6
    assert 0 < written["utility"]["metrics"]["gcp"] < 1


def test_mondrian_report_counts_the_classes_the_export_shows(tmp_path: Path) -> None:
    """Issue 12: two boxes under the same labels were two classes of 3 in the report (n_q 3) while the
    export shows one class of 6."""
    source, jobs, out, report = (tmp_path / name for name in ("j.csv", "jobs.csv", "m.csv", "m.json"))
    pd.DataFrame({"age": [30] * 6, "job": ["a", "a", "b", "c", "d", "d"]}).to_csv(source, index=False)
    jobs.write_text("a;*\nb;*\nc;*\nd;*\n")
    veil("materialize", "kanon", "--algorithm", "mondrian", "--input", source, "--qi", "age,job", "--k", 3,
         "--hierarchy", f"job={jobs}", "--recoding", "range", "--out", out, "--report", report)  # fmt: skip
    written = report_of(report)
    assert written["transformation"]["classes"] == len(pd.read_csv(out).drop_duplicates()) == 1
    assert written["transformation"]["boxes"] == 2
    assert written["transformation"]["class_sizes"] == {"6": 1}
    assert written["risk"]["simulated_attack"]["n_q"] == 6


def test_combine_writes_a_table_in_the_dataset_and_scores_it(data: dict[str, Path]) -> None:
    report = data["dir"] / "c.json"
    arguments = ["materialize", "combine", "--config", data["config"], "--dataset", "d", "--table", "people",
                 "--qi", ",".join(QIS), "--sensitive", "disease",
                 "--step", "age=laplace:epsilon=1,lower=18,upper=79", "--step", "zip=generalize:1",
                 "--hierarchy", f"zip={data['zip']}", "--step", "sex=randomize:epsilon=2",
                 "--sample", 0.5, "--seed", 11, "--out", "db:released", "--report", report]  # fmt: skip
    veil(*arguments)
    with duckdb.connect(str(data["database"]), read_only=True) as connection:
        released = connection.execute("SELECT * FROM released").df()
    assert 0.4 * ROWS < len(released) < 0.6 * ROWS  # Bernoulli(0.5): ±7 standard deviations
    assert released["age"].between(18, 79).all()
    assert set(released["zip"]) <= {"101xx", "200xx"}
    written = report_of(report)
    attack = written["risk"]["simulated_attack"]
    assert attack["sampling_rate"] == 0.5 and attack["records"] == ROWS
    assert attack["records_at_risk_zero"] >= ROWS - len(released)
    assert written["transformation"]["seed"] == 11
    again = veil(*arguments, expect=1)  # the table exists now
    assert "exists" in again.output and "--replace" in again.output


def test_utility_of_a_release_is_reported(data: dict[str, Path]) -> None:
    pytest.importorskip("sklearn", reason="the [eval] extra (scikit-learn) is not installed")
    out = data["dir"] / "u.csv"
    result = veil("materialize", "kanon", "--input", data["csv"], "--qi", "age,sex", "--k", 5,
                  "--utility-target", "income", "--utility-model", "logistic", "--seed", 1,
                  "--out", out, "--json")  # fmt: skip
    ml = json.loads(result.stdout)["utility"]["ml"]
    assert ml["model"] == "logistic" and 0 < ml["uti"] < 2


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--qi", "age,height", "--k", "2"], "column 'height' is not in"),
        (["--qi", "age", "--k", "2", "--l", "2"], "add --sensitive"),
        (["--qi", "age", "--k", "2", "--hierarchy", "zip=x.csv"], "not a quasi-identifier"),
        (["--qi", "age,age", "--k", "2"], "names 'age' twice"),
        (["--qi", "age", "--k", "100000"], "no generalization meets the privacy model"),
        (["--qi", "age"], "give --k, or --max-risk R"),
        (["--qi", "age", "--k", "2", "--plot", "x.png"], "--plot on veil materialize draws the --max-risk"),
        (["--qi", "age", "--max-risk", "0.2", "--algorithm", "mondrian"], "optimal global recoding only"),
        (["--qi", "age", "--max-risk", "0.2", "--risk-measure", "journalist"], "needs --sampling-fraction"),
    ],
)
def test_bad_requests_fail_with_one_clear_line(
    data: dict[str, Path], arguments: list[str], message: str
) -> None:
    out = data["dir"] / "bad.csv"
    result = veil("materialize", "kanon", "--input", data["csv"], *arguments, "--out", out, expect=1)
    assert result.output.startswith("Error: ") and message in result.output
    assert "Traceback" not in result.output
    assert not out.exists()


def test_bad_step_shows_an_example(data: dict[str, Path]) -> None:
    result = veil("materialize", "combine", "--input", data["csv"], "--qi", "age",
                  "--step", "age=laplace:epsilon=1", "--out", data["dir"] / "x.csv", expect=1)  # fmt: skip
    assert "needs lower, upper" in result.output


def test_existing_output_file_is_kept_without_replace(data: dict[str, Path]) -> None:
    out = data["dir"] / "keep.csv"
    out.write_text("precious\n")
    result = veil(
        "materialize", "kanon", "--input", data["csv"], "--qi", "sex", "--k", 2, "--out", out, expect=1
    )
    assert "--replace" in result.output and out.read_text() == "precious\n"
    veil("materialize", "kanon", "--input", data["csv"], "--qi", "sex", "--k", 2, "--out", out, "--replace")
    assert len(pd.read_csv(out)) == ROWS


def test_parquet_input_is_read_like_csv(data: dict[str, Path]) -> None:
    parquet = data["dir"] / "people.parquet"
    duckdb.sql(f"COPY (SELECT * FROM read_csv_auto('{data['csv']}')) TO '{parquet}' (FORMAT parquet)")
    out = data["dir"] / "from_parquet.csv"
    veil("materialize", "kanon", "--input", parquet, "--qi", ",".join(QIS), "--k", 5,
         "--hierarchy", f"zip={data['zip']}", "--out", out)  # fmt: skip
    assert class_sizes(pd.read_csv(out)).min() >= 5


def test_risk_scores_a_mondrian_release_through_its_ranges_and_value_sets(data: dict[str, Path]) -> None:
    out, report = data["dir"] / "mondrian.csv", data["dir"] / "mondrian.json"
    veil("materialize", "kanon", "--algorithm", "mondrian", "--input", data["csv"], "--qi", "age,zip",
         "--hierarchy", f"zip={data['zip']}", "--k", 6, "--recoding", "range", "--categorical", "set",
         "--out", out, "--report", report)  # fmt: skip
    scored = veil("risk", "--input", data["csv"], "--released", out, "--qi", "age,zip",
                  "--hierarchy", f"zip={data['zip']}", "--json")  # fmt: skip
    attack = json.loads(scored.stdout)["simulated_attack"]
    assert attack["records_at_risk_zero"] == 0  # every record's own class box holds it
    # a record's candidates include its whole class: the simulated n_q is at least the smallest class
    assert attack["n_q"] >= report_of(report)["risk"]["simulated_attack"]["n_q"] >= 6


@pytest.mark.parametrize(
    "command",
    [
        ["kanon", "--k", "2", "--l", "2"],
        ["kanon", "--algorithm", "mondrian", "--k", "2", "--l", "2"],
        ["combine", "--step", "a=laplace:epsilon=1,lower=0,upper=9"],
    ],
)
def test_nulls_in_the_columns_read_are_refused_by_every_algorithm(tmp_path: Path, command: list[str]) -> None:
    source = tmp_path / "nulls.csv"
    source.write_text("a,s\n1,p\n2,\n3,q\n1,q\n")
    result = veil("materialize", command[0], "--input", source, "--qi", "a", "--sensitive", "s", *command[1:],
                  "--out", tmp_path / "out.csv", expect=1)  # fmt: skip
    assert "s has NULL values" in result.output and "Traceback" not in result.output


# --- --max-risk: risk-targeted release ----------------------------------------------------------------------

PNG = b"\x89PNG\r\n\x1a\n"


def kanon_arguments(data: dict[str, Path]) -> list[object]:
    return ["materialize", "kanon", "--input", data["csv"], "--qi", ",".join(QIS),
            "--hierarchy", f"zip={data['zip']}", "--hierarchy", "age=interval:5,10,20,40"]  # fmt: skip


def prosecutor_risk(path: Path) -> float:
    return 1.0 / class_sizes(pd.read_csv(path)).min()


def test_max_risk_search_picks_the_least_loss_grid_point_under_r_like_brute_force(
    data: dict[str, Path],
) -> None:
    """Every grid point released by the plain command and scored from the written file; the search must
    land on the least loss among those at risk ≤ R."""
    target = Target(0.1, "prosecutor")
    best: tuple[float, float] | None = None
    for limit, k in itertools.product(suppression_grid(0.02), k_grid(2, ROWS, target)):
        out, report = data["dir"] / f"g{k}_{limit}.csv", data["dir"] / f"g{k}_{limit}.json"
        result = CliRunner().invoke(veil_main, [str(a) for a in [*kanon_arguments(data), "--k", k,
                                    "--suppression-limit", limit, "--out", out, "--report", report]])  # fmt: skip
        if result.exit_code != 0:
            assert "no generalization meets" in result.output
            continue
        loss, risk = report_of(report)["utility"]["metrics"]["loss"], prosecutor_risk(out)
        if risk <= 0.1 and (best is None or (loss, risk) < best):
            best = (loss, risk)
    out, report = data["dir"] / "searched.csv", data["dir"] / "searched.json"
    veil(*kanon_arguments(data), "--max-risk", 0.1, "--risk-measure", "prosecutor", "--suppression-limit", 0.02,
         "--out", out, "--report", report)  # fmt: skip
    written = report_of(report)
    chosen = next(c for c in written["search"]["candidates"] if c["chosen"])
    assert best is not None and (chosen["loss"], chosen["risk"]) == pytest.approx(best)
    assert written["utility"]["metrics"]["loss"] == pytest.approx(best[0])
    assert prosecutor_risk(out) == pytest.approx(chosen["risk"]) and chosen["risk"] <= 0.1


def test_max_risk_refuses_and_writes_nothing_when_r_is_unreachable(data: dict[str, Path]) -> None:
    out, report, plot = data["dir"] / "kept.csv", data["dir"] / "r.json", data["dir"] / "r.png"
    out.write_text("precious\n")
    result = veil(*kanon_arguments(data), "--max-risk", 0.0001, "--out", out, "--replace",
                  "--report", report, "--plot", plot, expect=1)  # fmt: skip
    first = result.output.splitlines()[0]
    assert first.startswith(
        "Error: no release meets --max-risk 0.0001: the lowest simulated risk reached is 0.00125"
    )
    assert "(k=500, suppression_limit=0)" in first and "nothing was written" in first
    assert out.read_text() == "precious\n" and not report.exists() and not plot.exists()


def test_max_risk_report_holds_the_frontier_and_plot_draws_it_on_a_duckdb_dataset(
    data: dict[str, Path],
) -> None:
    report, plot = data["dir"] / "f.json", data["dir"] / "frontier.png"
    result = veil("materialize", "kanon", "--config", data["config"], "--dataset", "d", "--table", "people",
                  "--qi", ",".join(QIS), "--hierarchy", f"zip={data['zip']}", "--max-risk", 0.05,
                  "--risk-measure", "marketer", "--suppression-limit", 0.05, "--out", "db:searched",
                  "--report", report, "--plot", plot)  # fmt: skip
    search = report_of(report)["search"]
    assert (search["max_risk"], search["risk_measure"], search["utility"]) == (0.05, "marketer", "loss")
    candidates = search["candidates"]
    assert {c["parameters"]["suppression_limit"] for c in candidates} == {0.0, 0.01, 0.02, 0.05}
    assert all({"parameters", "risk", "loss", "meets_target", "chosen"} <= set(c) for c in candidates)
    chosen = [c for c in candidates if c["chosen"]]
    assert len(chosen) == 1 and chosen[0]["parameters"] == search["chosen"] and chosen[0]["meets_target"]
    assert min(c["loss"] for c in candidates if c["meets_target"]) == chosen[0]["loss"]
    with duckdb.connect(str(data["database"]), read_only=True) as connection:
        released = connection.execute("SELECT * FROM searched").df()
    sizes = class_sizes(released)
    assert len(sizes) / len(released) == pytest.approx(chosen[0]["risk"])
    assert chosen[0]["risk"] <= 0.05
    assert plot.read_bytes().startswith(PNG) and plot.stat().st_size > 0
    assert f"plot: {plot}" in result.output and "candidates explored" in result.output


def test_combine_max_risk_writes_the_draw_it_measured_from_parquet(data: dict[str, Path]) -> None:
    parquet, out, report = data["dir"] / "people.parquet", data["dir"] / "c.csv", data["dir"] / "c.json"
    duckdb.sql(f"COPY (SELECT * FROM read_csv_auto('{data['csv']}')) TO '{parquet}' (FORMAT parquet)")
    steps = ["--step", "age=laplace:epsilon=1,lower=18,upper=79", "--step", "zip=generalize:1",
             "--hierarchy", f"zip={data['zip']}"]  # fmt: skip
    veil("materialize", "combine", "--input", parquet, "--qi", ",".join(QIS), *steps, "--max-risk", 0.05,
         "--seed", 3, "--out", out, "--report", report)  # fmt: skip
    written = report_of(report)
    search, attack = written["search"], written["risk"]["simulated_attack"]
    assert len(search["candidates"]) == 16 and search["utility"] == "cell_loss"
    chosen = next(c for c in search["candidates"] if c["chosen"])
    assert chosen["risk"] == attack["risk"] <= 0.05
    assert chosen["loss"] == written["utility"]["metrics"]["cell_loss"]
    assert min(c["loss"] for c in search["candidates"] if c["meets_target"]) == chosen["loss"]
    rate = chosen["parameters"]["sample_rate"]
    described = ["--step", f"age=laplace:epsilon={chosen['parameters']['epsilon']['age']},lower=18,upper=79",
                 *steps[2:], *([] if rate == 1 else ["--sample", rate])]  # fmt: skip
    scored = json.loads(veil("risk", "--input", parquet, "--released", out, "--link", "id", "--qi", ",".join(QIS),
                             *described, "--json").stdout)  # fmt: skip
    assert scored["simulated_attack"]["risk"] == chosen["risk"]  # the file written is the draw measured


def test_combine_max_risk_refuses_when_no_draw_meets_r(data: dict[str, Path]) -> None:
    out = data["dir"] / "none.csv"
    result = veil("materialize", "combine", "--input", data["csv"], "--qi", "age,sex",
                  "--step", "age=laplace:epsilon=1,lower=18,upper=79", "--max-risk", 0.0001,
                  "--risk-measure", "prosecutor", "--out", out, expect=1)  # fmt: skip
    assert "no release meets --max-risk 0.0001: the lowest prosecutor risk reached is" in result.output
    assert "sample_rate=" in result.output and not out.exists()


def test_journalist_target_scales_the_class_size_by_the_sampling_fraction(data: dict[str, Path]) -> None:
    """Risk λ/|class| ≤ 0.1 with λ = 0.5: classes of at least 5."""
    out, report = data["dir"] / "j.csv", data["dir"] / "j.json"
    veil(*kanon_arguments(data), "--max-risk", 0.1, "--risk-measure", "journalist", "--sampling-fraction", 0.5,
         "--out", out, "--report", report)  # fmt: skip
    chosen = next(c for c in report_of(report)["search"]["candidates"] if c["chosen"])
    assert class_sizes(pd.read_csv(out)).min() >= 5
    assert chosen["risk"] == pytest.approx(0.5 / class_sizes(pd.read_csv(out)).min())


def test_missing_matplotlib_is_refused_before_any_work(
    data: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # `import matplotlib` raises ImportError
    out = data["dir"] / "p.csv"
    result = veil(*kanon_arguments(data), "--max-risk", 0.2, "--out", out, "--plot", data["dir"] / "p.png",
                  expect=1)  # fmt: skip
    assert (
        result.output
        == "Error: --plot needs matplotlib, which is not installed: pip install 'veil-sql[plot]'\n"
    )
    assert not out.exists()
    scored = veil("risk", "--input", data["csv"], "--qi", "age", "--plot", data["dir"] / "r.png", expect=1)
    assert "pip install 'veil-sql[plot]'" in scored.output


def test_risk_plot_draws_the_candidate_counts(data: dict[str, Path]) -> None:
    out, plot = data["dir"] / "k4.csv", data["dir"] / "risk.png"
    veil(*kanon_arguments(data), "--k", 4, "--out", out)
    result = veil("risk", "--input", data["csv"], "--released", out, "--link", "id", "--qi", ",".join(QIS),
                  "--hierarchy", f"zip={data['zip']}", "--hierarchy", "age=interval:5,10,20,40", "--plot", plot)  # fmt: skip
    assert plot.read_bytes().startswith(PNG) and 0 < plot.stat().st_size < 100_000
    assert result.output.rstrip().endswith(f"plot: {plot}")
    classes_only = data["dir"] / "classes.png"
    veil("risk", "--input", data["csv"], "--qi", "sex,zip", "--plot", classes_only, "--json")
    assert classes_only.read_bytes().startswith(PNG)


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_shows_a_rate_on_a_terminal_and_stays_quiet_under_json(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    quiet, close = progress_callback("searching", quiet=True, unit="candidates")
    quiet(1, 4)
    close()
    assert terminal.getvalue() == ""
    update, close = progress_callback("searching", quiet=False, unit="candidates")
    for done in range(5):
        update(done, 4)
    close()
    assert "searching" in terminal.getvalue() and "4/4" in terminal.getvalue()
    assert "candidates/s" in terminal.getvalue()
    monkeypatch.setattr(terminal, "isatty", lambda: False)
    before = terminal.getvalue()
    update, close = progress_callback("searching", quiet=False, unit="candidates")
    update(1, 4)
    close()
    assert terminal.getvalue() == before  # not a terminal: nothing


def spark_lake(data: dict[str, Path], *, remote: str | None = None, one_file: bool = False) -> Path:
    """The people table as a Spark dataset: a directory of two Parquet files DuckDB wrote (or one file,
    whose rows Spark reads in the file's order); a policy with a local session, or ``spark_remote``."""
    parquet = data["dir"] / "people_parquet"
    parquet.mkdir(exist_ok=True)
    parts = [("all", "true")] if one_file else [("a", "id < 400"), ("b", "id >= 400")]
    with duckdb.connect(str(data["database"]), read_only=True) as connection:
        for part, rows in parts:
            connection.execute(
                f"COPY (SELECT * FROM people WHERE {rows}) TO '{parquet / part}.parquet' (FORMAT parquet)"
            )
    source = parquet / "all.parquet" if one_file else parquet
    lake: dict[str, Any] = {"backend": "spark", "sources": {"people": str(source)}}
    if remote is not None:
        lake["spark_remote"] = remote
    config = data["dir"] / "spark.toml"
    config.write_text(tomli_w.dumps({"datasets": {"lake": lake}}))
    return config


KANON_RUNS = {
    "optimal": ["--k", 5, "--suppression-limit", 0.02, "--sensitive", "disease", "--l", 2],
    "mondrian": ["--k", 5, "--algorithm", "mondrian", "--sensitive", "disease"],
    "max-risk": ["--max-risk", 0.2, "--suppression-limit", 0.05],
}


def kanon_in_both(
    data: dict[str, Path], spark_config: Path, arguments: list[Any], run: Callable[..., Any] | None = None
) -> dict[str, tuple[pd.DataFrame, dict[str, Any]]]:
    """``veil materialize kanon`` on the DuckDB dataset and on the Spark dataset: (released table sorted
    by id, report without the source's name) of each."""
    results = {}
    for name, where in (("duckdb", ["--config", data["config"], "--dataset", "d"]),
                        ("spark", ["--config", spark_config, "--dataset", "lake"])):  # fmt: skip
        out, report = data["dir"] / f"{name}.csv", data["dir"] / f"{name}.json"
        (run or veil)("materialize", "kanon", *where, "--table", "people", "--qi", ",".join(QIS),
                      "--hierarchy", f"zip={data['zip']}", *arguments, "--seed", 3, "--replace",
                      "--out", out, "--report", report)  # fmt: skip
        released = pd.read_csv(out).sort_values("id").reset_index(drop=True)
        written = report_of(report)
        del (
            written["source"],
            written["output"],
            written["parameters"]["dataset"],
            written["parameters"]["out"],
        )
        results[name] = released, written
    return results


@pytest.mark.spark
@pytest.mark.parametrize("algorithm", list(KANON_RUNS))
def test_a_spark_dataset_releases_what_the_duckdb_dataset_releases(
    spark_ready: None, data: dict[str, Path], algorithm: str
) -> None:
    """The same rows as a Spark dataset (frequency sets computed in Spark's local session) and as a
    DuckDB dataset: the same released table, the same risk and utility report."""
    results = kanon_in_both(data, spark_lake(data), KANON_RUNS[algorithm])
    (duck_table, duck_report), (spark_table, spark_report) = results["duckdb"], results["spark"]
    assert len(spark_table) and class_sizes(spark_table).min() >= 5
    pd.testing.assert_frame_equal(spark_table, duck_table)
    assert spark_report == duck_report


def veil_process(*arguments: Any) -> None:
    """``veil`` in a process of its own: pyspark turns a whole process to Spark Connect once it opens a
    remote session, and this one keeps its local session for the other tests."""
    completed = subprocess.run(
        [*veil_command(), *(str(a) for a in arguments)], capture_output=True, text=True, check=False
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr


@pytest.mark.spark
def test_a_spark_connect_dataset_releases_what_the_duckdb_dataset_releases(
    spark_connect: str, data: dict[str, Path]
) -> None:
    """``spark_remote``: the frequency sets are computed by a real Spark Connect server."""
    results = kanon_in_both(data, spark_lake(data, remote=spark_connect), KANON_RUNS["optimal"], veil_process)
    (duck_table, duck_report), (spark_table, spark_report) = results["duckdb"], results["spark"]
    pd.testing.assert_frame_equal(spark_table, duck_table)
    assert spark_report == duck_report


@pytest.mark.spark
def test_a_spark_dataset_writes_no_table(spark_ready: None, data: dict[str, Path]) -> None:
    output = veil("materialize", "kanon", "--config", spark_lake(data), "--dataset", "lake", "--table", "people",
                  "--qi", ",".join(QIS), "--k", 5, "--out", "db:released", expect=1).output  # fmt: skip
    assert "Veil writes no tables into a Spark dataset" in output and "PATH.parquet" in output


OTHER_COMMANDS = {  # the commands that read rows or codes: combine (rows), diversity (codes by row)
    "combine": ["combine", "--qi", ",".join(QIS), "--sensitive", "disease", "--hierarchy", "zip={zip}",
                "--step", "age=laplace:epsilon=1,lower=18,upper=79", "--step", "zip=generalize:1",
                "--step", "sex=randomize:epsilon=2", "--sample", 0.5, "--seed", 11],
    "diversity": ["diversity", "--attributes", ",".join(QIS), "--bins", "age=18,30,45,60,90",
                  "--domain", "zip=10115,10117,10119,20095,20097", "--domain", "sex=F,M",
                  "--l", "age=2,zip=2,sex=2", "--seed", 1],
}  # fmt: skip


@pytest.mark.spark
@pytest.mark.parametrize("command", list(OTHER_COMMANDS))
def test_other_materialize_commands_write_from_spark_what_they_write_from_duckdb(
    spark_ready: None, data: dict[str, Path], command: str
) -> None:
    """Row by row, with the same seed: the rows reach the random draws in the same order, since Spark
    reads a single file in its order (several files: the larger first — docs/scaling.md)."""
    spark_config = spark_lake(data, one_file=True)
    arguments = [str(a).format(zip=data["zip"]) for a in OTHER_COMMANDS[command]]
    written = {}
    for name, where in (("duckdb", ["--config", data["config"], "--dataset", "d"]),
                        ("spark", ["--config", spark_config, "--dataset", "lake"])):  # fmt: skip
        out = data["dir"] / f"{command}_{name}.csv"
        veil("materialize", *arguments[:1], *where, "--table", "people", *arguments[1:], "--out", out)
        written[name] = pd.read_csv(out)
    assert len(written["spark"]) > ROWS / 3
    pd.testing.assert_frame_equal(written["spark"], written["duckdb"])


@pytest.mark.spark
def test_a_spark_table_that_cannot_be_read_is_named_with_sparks_reason(
    spark_ready: None, data: dict[str, Path]
) -> None:
    output = veil("materialize", "kanon", "--config", spark_lake(data), "--dataset", "lake", "--table", "nobody",
                  "--qi", "age", "--k", 5, "--out", data["dir"] / "o.csv", expect=1).output  # fmt: skip
    assert "Spark cannot read table nobody from the catalog's database default" in output
    assert "TABLE_OR_VIEW_NOT_FOUND" in output  # the holder's own table: Spark's reason is theirs to read
    assert not (data["dir"] / "o.csv").exists()
