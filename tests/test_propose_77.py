"""Issue 77, item 4: the proposer writes what a data owner would (swflow/tables/propose.py)."""
from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from swflow.tables import Schema
from swflow.tables.propose import round_bounds


def _round(x: float) -> bool:
    """1, 2 or 5 times a power of ten, or a whole multiple of one of those with at most two significant digits."""
    if x == 0:
        return True
    digits = f"{abs(x):.12g}".replace(".", "").strip("0")
    return len(digits) <= 2


@pytest.mark.parametrize("low, high, integer", [(19.416304326369563, 8813.276955704327, False), (18, 80, True),
                                                (0.0123, 0.9876, False), (-3.2, 4.1, False), (1990, 2023, True),
                                                (-500.5, -20.25, False), (1e-4, 3e-4, False), (1e6 + 3, 1e6 + 90, True)])
def test_bounds_are_round_and_hold_every_public_value_with_room(low, high, integer):
    new_low, new_high = round_bounds(low, high, integer=integer)
    span = high - low
    assert new_low <= low - 0.1 * span or new_low == 0 <= low
    assert new_high >= high + 0.1 * span or new_high == 0 >= high
    assert _round(new_low) or _round(new_high - new_low), (new_low, new_high)
    assert new_high - new_low <= 3 * span  # room, not a different scale
    if integer:
        assert new_low == math.floor(new_low) and new_high == math.floor(new_high)


def test_non_negative_values_keep_a_non_negative_bound():
    assert round_bounds(3.0, 500.0)[0] == 0.0
    assert round_bounds(-500.0, -3.0)[1] == 0.0


def test_a_private_value_one_percent_beyond_the_public_maximum_is_accepted(tmp_path):
    rng = np.random.default_rng(0)
    public = pd.DataFrame({"pay": rng.lognormal(7, 1, 500), "age": rng.integers(18, 80, 500)})
    schema = Schema.propose(public)
    beyond = pd.DataFrame({"pay": [public["pay"].max() * 1.01, public["pay"].min() * 0.99],
                           "age": [int(public["age"].max() * 1.01) + 1, 18]})
    checked = schema.check(beyond)  # refused (SchemaError) were the bounds the public extremes
    assert len(checked) == 2
    with pytest.raises(ValueError):
        Schema.from_json({"columns": [{"name": "pay", "type": "numeric", "min": float(public["pay"].min()),
                                       "max": float(public["pay"].max())}]}).check(beyond[["pay"]])


def test_whole_days_are_proposed_as_dates_and_every_column_carries_a_note(tmp_path, capsys):
    from swflow.cli import main

    public = pd.DataFrame({"admitted": pd.to_datetime(["2020-03-01", "2021-07-15", "2022-12-31"] * 10),
                           "seen": pd.to_datetime(["2020-03-01 10:00", "2021-07-15 11:00", "2022-12-31 09:00"] * 10),
                           "ward": ["a", "b", "c"] * 10, "cost": np.linspace(12.5, 980.25, 30)})
    public.to_csv(tmp_path / "public.csv", index=False)
    assert main(["schema", str(tmp_path / "public.csv")]) == 0
    columns = {c["name"]: c for c in json.loads(capsys.readouterr().out)["columns"]}
    assert columns["admitted"]["type"] == "date" and columns["admitted"]["min"] == "2019-01-01"
    assert columns["admitted"]["max"] == "2023-12-31"
    assert columns["seen"]["type"] == "datetime" and columns["seen"]["unit"] == "hour"
    assert all("public values" in c["note"] for c in columns.values())
    assert "rounded out" in columns["cost"]["note"] and (columns["cost"]["min"], columns["cost"]["max"]) == (0, 1100)
    # the notes round-trip and are never read by a run
    schema = Schema.from_json({"columns": list(columns.values())})
    assert Schema.from_json(schema.to_json()) == schema
