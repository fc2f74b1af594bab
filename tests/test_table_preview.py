"""The preview (`swflow preview`, the page's Preview step): public rows run as if private, scored on a held-back
half, beside the floor and independent columns; bad input refused before anything runs."""
import json

import pytest

from swflow.pipeline.table_preview import preview_quality
from swflow.tables import example_table


def test_the_preview_orders_floor_release_and_independent_columns_on_a_dependent_table():
    """The example's columns depend on each other: at ε = 10 on 1 000 rows the release lands between the floor
    (the half itself) and independent columns, and nearer the floor than ε = 0.3 does."""
    public, schema = example_table(2000, seed=5)
    lines = preview_quality(public, schema, epsilons=(0.3, 10.0), target="income", steps=150)
    floor, independent, low, high = lines
    assert [line.label for line in lines] == ["floor (the first half itself)", "independent columns", "ε = 0.3",
                                              "ε = 10"]
    assert all(line.rows == 1000 for line in lines)
    assert floor.tvd_3way < high.tvd_3way < independent.tvd_3way
    assert high.tvd_3way < low.tvd_3way
    assert independent.auc < 0.6 < high.auc  # independent columns hold nothing of the target


def test_the_preview_refuses_too_few_rows_and_a_bad_epsilon():
    public, schema = example_table(100, seed=5)
    with pytest.raises(ValueError, match="at least 20 public rows"):
        preview_quality(public[:15], schema)
    with pytest.raises(ValueError, match="epsilons > 0"):
        preview_quality(public, schema, epsilons=(1.0, 0.0))


def test_the_command_prints_one_json_list(tmp_path, capsys):
    from swflow.cli import main

    public, schema = example_table(200, seed=5)
    public.to_csv(tmp_path / "public.csv", index=False)
    schema.write(tmp_path / "schema.json")
    assert main(["preview", str(tmp_path / "public.csv"), "--schema", str(tmp_path / "schema.json"), "--epsilon",
                 "1", "--json"]) == 0
    lines = json.loads(capsys.readouterr().out)
    assert [line["label"] for line in lines] == ["floor (the first half itself)", "independent columns", "ε = 1"]
