"""A generated event log (user, item, time) whose users behave alike in every window — each has a few
favourite items — so that linkage across windows is a real risk, as in the web logs of [D] ch. 5."""

from __future__ import annotations

import numpy as np
import pandas as pd

START = pd.Timestamp("2024-03-04 16:00:00")
WINDOW_HOURS = 8


def event_log(users: int = 40, items: int = 30, events_per_user: int = 24, seed: int = 3) -> pd.DataFrame:
    """Events over two 8-hour windows from START; ~80 % of a user's events fall on their 5 favourites."""
    rng = np.random.default_rng(seed)
    rows = []
    for user in range(users):
        favourites = rng.choice(items, size=5, replace=False)
        for _ in range(events_per_user):
            item = rng.choice(favourites) if rng.random() < 0.8 else rng.integers(items)
            offset = pd.Timedelta(seconds=int(rng.integers(2 * WINDOW_HOURS * 3600)))
            rows.append((f"user{user:03d}", f"item{int(item):02d}", START + offset))
    return pd.DataFrame(rows, columns=["uid", "item", "ts"])
