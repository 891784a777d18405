"""Per-window matrices built by the engine (anonymizers/event_windows.py), checked against the spec's
Table 5.1 toy log and against numpy on a generated log."""

from __future__ import annotations

from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pytest

from anonymizers.errors import AnonymizationError
from anonymizers.event_windows import WindowSpec, build_windows
from anonymizers.source import TableSource
from tests.event_log import START, WINDOW_HOURS, event_log

TOY = [  # spec matrix-factorization.md §2 (Table 5.1): x' and z' are x and z under their t2 pseudonyms
    ("x", "16:13:48", "google"),
    ("y", "16:15:14", "mail.google"),
    ("x", "16:17:13", "youtube"),
    ("z", "16:19:01", "facebook"),
    ("x", "16:21:15", "youtube"),
    ("x", "16:22:42", "google"),
    ("z", "16:25:01", "youtube"),
]
M_T1 = [[1, 0, 1, 0], [0, 1, 0, 0], [0, 0, 0, 1]]
M_T2 = [[1, 0, 1, 0], [0, 0, 0, 0], [0, 0, 1, 0]]
ITEMS = ["google", "mail.google", "youtube", "facebook"]


def duckdb_table(tmp_path: Path, frame: pd.DataFrame, name: str = "log") -> Path:
    path = tmp_path / "events.duckdb"
    with duckdb.connect(str(path)) as connection:
        connection.register("frame", frame)
        connection.execute(f"CREATE TABLE {name} AS SELECT * FROM frame")
    return path


def in_spec_order(windows, users: list[str]) -> list[np.ndarray]:
    rows = [windows.users.index(u) for u in users]
    columns = [windows.items.index(i) for i in ITEMS]
    return [m[np.ix_(rows, columns)] for m in windows.matrices]


def toy_frame(epoch: bool = False) -> pd.DataFrame:
    frame = pd.DataFrame(TOY, columns=["uid", "ts", "item"])
    frame["ts"] = pd.to_datetime("2024-03-04 " + frame["ts"])
    if epoch:
        frame["ts"] = frame["ts"].astype("datetime64[s]").astype("int64")
    return frame


@pytest.mark.parametrize("epoch", [False, True], ids=["timestamp", "epoch-seconds"])
def test_the_table_5_1_log_gives_the_spec_matrices_exactly(tmp_path: Path, epoch: bool) -> None:
    start = "2024-03-04 16:10:00" if not epoch else str(int(pd.Timestamp("2024-03-04 16:10:00").timestamp()))
    with TableSource.duckdb_file(duckdb_table(tmp_path, toy_frame(epoch)), "log") as source:
        windows = build_windows(
            source, user="uid", item="item", time="ts", spec=WindowSpec.parse("10min", start=start)
        )
    t1, t2 = in_spec_order(windows, ["x", "y", "z"])
    assert t1.tolist() == M_T1 and t2.tolist() == M_T2
    assert windows.events == 7 and sorted(windows.users) == ["x", "y", "z"]


def test_median_windows_split_each_users_events_in_half(tmp_path: Path) -> None:
    with TableSource.duckdb_file(duckdb_table(tmp_path, toy_frame()), "log") as source:
        windows = build_windows(source, user="uid", item="item", time="ts", spec=WindowSpec.parse("median"))
    t1, t2 = in_spec_order(windows, ["x", "y", "z"])
    # x: 4 events, the first two (google, youtube) before its median; z: facebook then youtube; y: one event,
    # which is not in the first half of one
    assert t1.tolist() == [[1, 0, 1, 0], [0, 0, 0, 0], [0, 0, 0, 1]]
    assert t2.tolist() == [[1, 0, 1, 0], [0, 1, 0, 0], [0, 0, 1, 0]]


def test_generated_log_matches_numpy_and_top_cuts_keep_the_most_active(tmp_path: Path) -> None:
    frame = event_log(users=30, items=20, seed=8)
    with TableSource.duckdb_file(duckdb_table(tmp_path, frame), "log") as source:
        spec = WindowSpec.parse(f"{WINDOW_HOURS}h", start=str(START))
        windows = build_windows(
            source, user="uid", item="item", time="ts", spec=spec, top_users=10, top_items=8
        )
    activity = frame["uid"].value_counts()
    ranked_users = sorted(activity.index, key=lambda u: (-activity[u], u))[:10]
    popularity = frame["item"].value_counts()
    ranked_items = sorted(popularity.index, key=lambda i: (-popularity[i], i))[:8]
    assert windows.users == ranked_users and windows.items == ranked_items
    window = ((frame["ts"] - START) // pd.Timedelta(hours=WINDOW_HOURS)).to_numpy()
    for w, matrix in enumerate(windows.matrices):
        expected = np.zeros((10, 8))
        for user, item in frame.loc[window == w, ["uid", "item"]].itertuples(index=False):
            if user in ranked_users and item in ranked_items:
                expected[ranked_users.index(user), ranked_items.index(item)] = 1
        np.testing.assert_array_equal(matrix, expected)


@pytest.mark.parametrize(
    ("text", "count", "message"),
    [
        ("8 parsecs", 2, "cannot read the window"),
        ("0h", 2, "cannot read the window"),
        ("8h", 1, "at least 2"),
    ],
)
def test_bad_windows_are_refused(text: str, count: int, message: str) -> None:
    with pytest.raises(AnonymizationError, match=message):
        WindowSpec.parse(text, count=count)


def test_a_text_time_column_is_refused_with_a_hint(tmp_path: Path) -> None:
    frame = toy_frame().assign(ts=lambda f: f["ts"].astype(str))
    with (
        TableSource.duckdb_file(duckdb_table(tmp_path, frame), "log") as source,
        pytest.raises(AnonymizationError, match="not a timestamp") as error,
    ):
        build_windows(source, user="uid", item="item", time="ts", spec=WindowSpec.parse("8h"))
    assert "CAST" in (error.value.hint or "")


def test_windows_with_no_events_are_refused(tmp_path: Path) -> None:
    spec = WindowSpec.parse("1h", start="2030-01-01 00:00:00")
    with (
        TableSource.duckdb_file(duckdb_table(tmp_path, toy_frame()), "log") as source,
        pytest.raises(AnonymizationError, match="no event falls"),
    ):
        build_windows(source, user="uid", item="item", time="ts", spec=spec)
