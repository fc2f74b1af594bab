"""Defects the 80-case probe found (issue 76), each with a test that fails on the code before its fix."""
import re

import numpy as np
import pandas as pd
import pytest
from scipy.stats import norm

from swflow.tables import Schema
from swflow.tables.rules import keep_rules

RULED = Schema.from_json({"columns": [{"name": "start", "type": "numeric", "min": -10, "max": 10},
                                      {"name": "end", "type": "numeric", "min": -10, "max": 10}],
                          "rules": ["start <= end"]})


@pytest.mark.parametrize("n", [500, 2000, 20000])
def test_the_rule_rejection_share_is_the_rate_records_break_a_rule(n):
    """Records whose end is start + N(0.3, 0.35²) break 'start <= end' at Φ(−0.3/0.35) = 0.196; the reported share
    is that rate within five standard deviations of the records checked (it read 50 % at n = 500, counting the
    records drawn beyond the n needed as broken)."""
    def draw(count, seed):
        rng = np.random.default_rng(seed)
        start = rng.uniform(-5, 5, count)
        return pd.DataFrame({"start": start, "end": start + rng.normal(0.3, 0.35, count)})

    frame, rejected = keep_rules(draw, n, RULED, seed=0)
    truth = float(norm.cdf(-0.3 / 0.35))
    assert len(frame) == n and (frame["start"] <= frame["end"]).all()
    assert abs(rejected - truth) < 5 * np.sqrt(truth * (1 - truth) / n)


def test_a_table_without_rules_reports_no_rejection():
    frame, rejected = keep_rules(lambda count, seed: pd.DataFrame({"start": [0.0] * count, "end": [1.0] * count}),
                                 10, Schema(RULED.columns), seed=0)
    assert rejected == 0.0 and len(frame) == 10


def test_a_csv_that_cannot_be_parsed_is_refused_without_a_row_position(tmp_path):
    """pandas says "Expected 2 fields in line 51, saw 3": the line of a private row. The error names the file and
    what to check, never where."""
    from swflow.tables.files import read_table

    path = tmp_path / "private.csv"
    path.write_text("start,end\n" + "1,2\n" * 49 + "1,2,3\n" + "1,2\n" * 10)
    with pytest.raises(ValueError) as err:
        read_table(path, schema=RULED)
    message = str(err.value)
    assert "line" not in message and "51" not in message and "50" not in message
    assert "private.csv" in message and "fields" in message


def test_a_declared_category_that_looks_missing_comes_back_as_itself(tmp_path):
    """"NA" (Namibia) and "None" as declared categories are read as those categories, not as missing values; an
    empty field and the usual markers stay missing where the schema allows it."""
    from swflow.tables.files import read_table

    schema = Schema.from_json({"columns": [
        {"name": "country", "type": "categorical", "categories": ["NA", "ZA", None]},
        {"name": "answer", "type": "categorical", "categories": ["None", "Some"]},
        {"name": "x", "type": "numeric", "min": 0, "max": 10, "missing": True}]})
    path = tmp_path / "t.csv"
    path.write_text("country,answer,x,id\nNA,None,1,a\nZA,Some,NA,NA\n,None,,b\n")
    frame = read_table(path, schema=schema)
    assert frame["country"].tolist()[:2] == ["NA", "ZA"] and pd.isna(frame["country"].iloc[2])
    assert frame["answer"].tolist() == ["None", "Some", "None"]
    assert pd.isna(frame["x"].iloc[1]) and pd.isna(frame["x"].iloc[2]) and pd.isna(frame["id"].iloc[1])
    checked = schema.check(frame.drop(columns=["id"]))
    assert checked["country"].tolist()[:2] == ["NA", "ZA"]


def test_an_add_remove_refusal_of_delta_prints_no_count_of_records():
    """Under add/remove n is private: δ too large for the released count is refused without the count (each try
    drew a fresh one and printed 1/n̂)."""
    from swflow.pipeline.tables import TableSynthesizer
    from swflow.tables import example_table

    frame, schema = example_table(300)
    for _ in range(3):
        with pytest.raises(ValueError) as err:
            TableSynthesizer(schema=schema, epsilon=1.0, delta=0.01, adjacency="add-remove",
                             count_noise="gaussian").fit(frame)
        assert "whole record" in str(err.value)
        assert set(re.findall(r"[0-9][0-9.e-]*", str(err.value))) <= {"0.01", "1"}  # δ and "1/n" only


@pytest.mark.parametrize("rules, contradict", [
    (["start <= end"], False), (["start < end", "end < start"], True), (["start <= end", "end <= start"], False),
    (["start <= end", "end < start"], True), (["start > 8", "end >= start", "end < 5"], True),
    (["start > 10"], True), (["start >= 10"], False), (["start != end", "end != start"], False),
    (["start < end", "end < later", "later < start"], True), (["start < end", "end < later"], False)])
def test_rules_that_no_record_can_keep_are_refused_with_the_schema(rules, contradict):
    """Found before any private row is read (it was found at sampling, after the release): order rules that form a
    strict cycle, or that the bounds leave no room for. A column that may be missing keeps every rule."""
    from swflow.tables import SchemaError

    columns = [{"name": n, "type": "numeric", "min": -10, "max": 10} for n in ("start", "end", "later")]
    if contradict:
        with pytest.raises(SchemaError, match="contradict"):
            Schema.from_json({"columns": columns, "rules": rules})
        columns[0]["missing"] = True  # a record missing start keeps every rule on it
        columns[1]["missing"] = True
        Schema.from_json({"columns": columns, "rules": rules})
    else:
        Schema.from_json({"columns": columns, "rules": rules})


def test_a_column_named_twice_in_where_is_refused():
    from swflow.cli.tables import parse_conditions

    schema = Schema(RULED.columns)
    assert parse_conditions(["start=1"], schema) == {"start": 1.0}
    with pytest.raises(ValueError, match="twice"):
        parse_conditions(["start=1", "start=2"], schema)


def test_a_boolean_series_for_a_numeric_column_is_refused_with_what_to_declare():
    from swflow.tables import SchemaError

    with pytest.raises(SchemaError, match="categorical"):
        Schema(RULED.columns).check(pd.DataFrame({"start": [True, False], "end": [1.0, 2.0]}))


def test_the_target_s_positive_class_is_stated():
    """`evaluate --target` says which class its AUC is of (issue 76: it did not)."""
    from swflow.tables.example import example_table
    from swflow.tables.metrics import efficacy

    frame, schema = example_table(600, seed=1)
    named = efficacy(schema, frame.iloc[:300], frame.iloc[300:], "income")["positive_class"]
    assert named.startswith("income = 'high'")
    assert "top decile" in efficacy(schema, frame.iloc[:300], frame.iloc[300:], "hours")["positive_class"]


def test_no_budget_is_spent_naming_values_a_log_column_cannot_keep():
    """A real column on a log scale fills its tree, so its named values were always discarded (issue 76): the run
    names none there and spends no share on them; the same column on a linear scale still has its values named."""
    import numpy as np

    from swflow.pipeline.tables import TableSynthesizer
    from swflow.tables.example import example_table

    frame, schema = example_table(800, seed=2)
    frame["pay"] = np.round(np.random.default_rng(0).lognormal(7, 1, 800), 2)
    for scale, events in (("log", 2), ("linear", 3)):
        columns = schema.to_json()["columns"] + [{"name": "pay", "type": "numeric", "min": 0, "max": 100000,
                                                  "scale": scale}]
        syn = TableSynthesizer(schema={"columns": columns}, epsilon=1.0, delta=1e-7, count_noise="gaussian",
                               steps=10).fit(frame)
        ledger = syn.privacy_report().ledger
        assert len(ledger) == events, scale  # pairs, [values,] trees
        assert syn.privacy_report().run_config["repeated_values_columns"] == ([] if scale == "log" else ["pay"])
