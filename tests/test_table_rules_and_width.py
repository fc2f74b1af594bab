"""Rules between columns, and wide tables (issue 59): the samples keep declared rules by resampling, with the share
drawn again reported; a wide table releases a stated number of pairs from the schema alone, and the particles' fit
computes its gradient by hand, checked here against autograd."""
import numpy as np
import pandas as pd
import pytest
import torch

from swflow.tables import Schema, SchemaError
from swflow.tables.flow import _gradient
from swflow.tables.pairs import MAX_SCHEMA_PAIRS, schema_pairs

COLUMNS = [{"name": "start", "type": "date", "min": "2020-01-01", "max": "2020-12-31"},
           {"name": "end", "type": "date", "min": "2020-01-01", "max": "2020-12-31", "missing": True},
           {"name": "low", "type": "numeric", "min": 0, "max": 100},
           {"name": "high", "type": "numeric", "min": 0, "max": 100},
           {"name": "kind", "type": "categorical", "categories": ["a", "b"]},
           {"name": "other", "type": "categorical", "categories": ["a", "b"]}]


def test_rules_are_parsed_and_checked_against_the_columns():
    schema = Schema.from_json({"columns": COLUMNS, "rules": ["start <= end", "low < high", "high <= 90",
                                                             "kind != other"]})
    assert [r.text for r in schema.rules] == ["start <= end", "low < high", "high <= 90", "kind != other"]
    assert Schema.from_json(schema.to_json()) == schema
    for bad, words in [("start <= finish", "neither a column"), ("kind <= other", "categorical"),
                       ("kind == 3", "categorical"), ("start <= 5", "date or datetime column"),
                       ("low ~ high", "a rule is"),
                       ("start <= high", "date or datetime column"), ("low > end", "date or datetime column"),
                       (3, "a rule is")]:
        with pytest.raises(SchemaError, match=words):
            Schema.from_json({"columns": COLUMNS, "rules": [bad]})
    with pytest.raises(SchemaError, match="not \\['rule'\\]"):
        Schema.from_json({"columns": COLUMNS, "rule": ["start <= end"]})


def test_a_rule_holds_where_a_value_is_missing_and_compares_dates_by_date():
    schema = Schema.from_json({"columns": COLUMNS, "rules": ["start <= end"]})
    frame = pd.DataFrame({"start": ["2020-03-01", "2020-03-01", "2020-03-01"],
                          "end": ["2020-02-28", "2020-03-01", None], "low": [1, 2, 3], "high": [4, 5, 6],
                          "kind": ["a"] * 3, "other": ["b"] * 3})
    assert schema.rules[0].holds(schema.check(frame)).tolist() == [False, True, True]


def test_dates_and_datetimes_in_different_units_compare_as_instants():
    """A date (days), an hourly datetime (hours) and a datetime (seconds) in one rule each: the rule reads the
    instants, as pandas compares the Timestamps, not the numbers each column counts."""
    columns = [{"name": "day", "type": "date", "min": "2020-01-01", "max": "2020-12-31"},
               {"name": "hour", "type": "datetime", "min": "2020-01-01T00:00", "max": "2021-01-01T00:00",
                "unit": "hour"},
               {"name": "second", "type": "datetime", "min": "2020-01-01T00:00", "max": "2021-01-01T00:00"}]
    rules = ["day <= hour", "hour < second", "day < second"]
    schema = Schema.from_json({"columns": columns, "rules": rules})
    assert Schema.from_json(schema.to_json()) == schema
    frame = pd.DataFrame({"day": ["2020-03-02", "2020-03-01", "2020-03-01"],
                          "hour": ["2020-03-01T10:00", "2020-03-01T10:00", "2020-03-01T00:00"],
                          "second": ["2020-03-01T10:00:01", "2020-03-01T09:59:59", "2020-03-01T00:00:00"]})
    stamps = {name: pd.to_datetime(frame[name]) for name in frame}
    expected = [stamps["day"] <= stamps["hour"], stamps["hour"] < stamps["second"], stamps["day"] < stamps["second"]]
    checked = schema.check(frame)
    for rule, truth in zip(schema.rules, expected):
        assert rule.holds(checked).tolist() == truth.tolist(), rule.text


def _fitted(schema_json, rows=2000, seed=0):
    from swflow.pipeline.tables import TableSynthesizer

    rng = np.random.default_rng(seed)
    low = rng.uniform(0, 100, rows)
    frame = pd.DataFrame({"start": pd.Timestamp("2020-01-01") + pd.to_timedelta(rng.integers(0, 200, rows), "D"),
                          "end": pd.Timestamp("2020-06-01") + pd.to_timedelta(rng.integers(0, 200, rows), "D"),
                          "low": low, "high": rng.uniform(0, 100, rows),
                          "kind": rng.choice(["a", "b"], rows), "other": rng.choice(["a", "b"], rows)})
    frame["start"], frame["end"] = frame["start"].dt.date, frame["end"].dt.date
    return TableSynthesizer(schema=schema_json, epsilon=5.0, steps=150).fit(frame)


def test_samples_keep_every_rule_and_report_the_share_drawn_again():
    rules = ["low <= high", "start <= end", "kind == other"]
    syn = _fitted({"columns": COLUMNS, "rules": rules})
    frame = syn.sample(1500, seed=3)
    checked = syn.schema.check(frame)
    assert len(frame) == 1500 and all(rule.holds(checked).all() for rule in syn.schema.rules)
    # the rate is the share of drawn records that broke a rule. In the private law the columns are independent:
    # P(low <= high) = 1/2, P(kind == other) = 1/2, P(start <= end) = 1 - 48^2 / (2 * 200^2) (the days overlap
    # by 48 of 200), so 1 - 0.5 * 0.5 * 0.9712 = 0.757 are drawn again, up to the release's noise and the fit
    assert abs(syn.rejected - (1 - 0.25 * (1 - 48 ** 2 / (2 * 200 ** 2)))) < 0.05
    # and with a condition, both hold
    conditioned = syn.sample(200, seed=5, conditions={"kind": "b"})
    assert set(conditioned["kind"]) == {"b"} and set(conditioned["other"]) == {"b"}


def test_rules_the_release_cannot_support_are_refused():
    syn = _fitted({"columns": COLUMNS, "rules": ["high <= 0"]})
    with pytest.raises(ValueError, match="almost no support"):
        syn.sample(100, seed=0)


def test_a_wide_table_releases_neighbouring_pairs_up_to_the_stated_budget():
    assert schema_pairs([8] * 32) == [(i, j) for i in range(32) for j in range(i + 1, 32)]  # 496: every pair
    wide = schema_pairs([8] * 200)
    width = MAX_SCHEMA_PAIRS // 200
    assert len(wide) <= MAX_SCHEMA_PAIRS and all(0 < j - i <= width for i, j in wide)
    assert {c for pair in wide for c in pair} == set(range(200))  # every column has a marginal
    assert len(schema_pairs([8] * 40)) == sum(min(12, 39 - i) for i in range(40))  # w = 496 // 40 = 12


def test_a_table_of_two_many_category_columns_is_left_out_where_they_have_others():
    """insteval's shape: students by lecturers (6.4 million cells) is left out, a 256 × 256 table is kept, and a
    table whose columns have no other stays (every column keeps a marginal)."""
    assert schema_pairs([2972, 2160, 4, 6]) == [(0, 2), (0, 3), (1, 2), (1, 3), (2, 3)]
    assert schema_pairs([256, 256, 4]) == [(0, 1), (0, 2), (1, 2)]
    assert schema_pairs([2972, 2160]) == [(0, 1)]
    assert schema_pairs([300, 300, 300]) == [(0, 2), (1, 2)]  # the first left out; then each is needed


@pytest.mark.parametrize("pairs", [[(0, 1), (0, 2), (1, 3), (2, 3), (0, 3), (1, 2)], [(0, 1), (2, 3), (0, 3)],
                                   [(0, 1), (1, 2, 3), (0, 2, 3)], [(3, 0), (1, 0), (2, 1)]])
def test_the_fit_gradient_is_autograds(pairs):
    """Every pair, a few, three-way marginals, and pairs written with the wider column first or second, against
    autograd of L = Σ ‖M − T / n‖², M the particles' marginal (Σ_n of the outer product of the columns' blocks,
    over N)."""
    torch.manual_seed(0)
    sizes = [3, 4, 2, 5]
    tables = [torch.rand(*[sizes[c] for c in cols]) * 7 for cols in pairs]
    simplex = [torch.rand(50, k, requires_grad=True) for k in sizes]
    reference = 0.0
    for cols, table in zip(pairs, tables):
        spec = ",".join("n" + "abc"[a] for a in range(len(cols))) + "->" + "abc"[:len(cols)]
        reference = reference + (torch.einsum(spec, *[simplex[c] for c in cols]) / 50 - table / 7).pow(2).sum()
    reference.backward()
    loss, grad = _gradient(tables, sizes, pairs, 7, 50)([s.detach() for s in simplex])
    assert float(loss) == pytest.approx(float(reference.detach()), rel=1e-5)
    for mine, theirs in zip(grad, simplex):
        assert torch.allclose(mine, theirs.grad, atol=1e-6)


def test_cells_are_chosen_per_column_and_re_derived_on_load(tmp_path):
    from swflow.cli.tables import parse_cells
    from swflow.pipeline.tables import TableSynthesizer
    from swflow.tables import example_table

    frame, schema = example_table(3000)
    syn = TableSynthesizer(schema=schema, epsilon=2.0, delta=1e-6, steps=30, cells={"age": 20}).fit(frame)
    sizes = dict(zip(schema.names, syn.codec.sizes))
    rule = TableSynthesizer(schema=schema, epsilon=2.0, delta=1e-6, steps=30).fit(frame).codec.sizes
    assert sizes["age"] == 20 and sizes["hours"] == dict(zip(schema.names, rule))["hours"] != 20
    assert TableSynthesizer.load(syn.save(tmp_path / "t.pt")).codec.sizes == syn.codec.sizes
    for bad in ({"salary": 5}, {"age": 1}, 1, {"age": True}):
        with pytest.raises(ValueError, match="cells"):
            TableSynthesizer(schema=schema, epsilon=1.0, cells=bad)
    assert parse_cells(["12"]) == 12 and parse_cells(["age=20", "hours=8"]) == {"age": 20, "hours": 8}


def test_a_long_fit_says_so_even_when_quiet(monkeypatch, capsys):
    """progress='auto' (quiet unless long) opens a bar with an estimate when the first steps say the fit
    takes over a minute, and stays silent otherwise: a clock that moves 1 s (or 1 ms) a reading, not a timed test
    (read after the first step and after the fifth: 4 steps in 1 s, so 1 000 steps in about 4 min)."""
    import time

    from swflow.tables import flow

    for tick, shown in ((1.0, True), (0.001, False)):
        clock = iter(range(10_000))
        monkeypatch.setattr(time, "perf_counter", lambda: next(clock) * tick)
        with flow._Progress(1000, "auto", "fitting") as bar:
            for _ in range(10):
                bar.step()
        said = capsys.readouterr()
        assert ("about 4 min" in said.out + said.err) == shown and ("fitting" in said.out + said.err) == shown


def test_a_target_keeps_its_pair_with_every_column_of_a_wide_table():
    """Issue 94: past 496 pairs the schema's neighbours were the only pairs, and a target at column 50 of 60 was
    measured with 16 columns of 59; it now keeps all 59, wherever it sits, and the other columns keep only their
    next neighbour, so that half of the tables are the target's (each neighbour's table cost them precision); the
    run says so."""
    from swflow.pipeline.tables import TableSynthesizer
    from swflow.tables import Schema

    assert sum(50 in pair for pair in schema_pairs([2] * 60)) == 16
    for target in (0, 50, 59):
        pairs = schema_pairs([2] * 60, target=target)
        assert {j for pair in pairs if target in pair for j in pair} == set(range(60))
        others = {pair for pair in pairs if target not in pair}
        assert others == {(i, i + 1) for i in range(59)} - {(target - 1, target), (target, target + 1)}
        assert len(pairs) == 59 + len(others) and len(others) in (57, 58)
    schema = Schema.from_json({"columns": [{"name": f"c{i}", "type": "categorical", "categories": ["a", "b"]}
                                           for i in range(60)]})
    syn = TableSynthesizer(schema=schema, epsilon=1.0, delta=1e-9, target="c50")
    assert ("each column with the next one in the schema's order, and 'c50' (the target) with every column (116 of "
            "the 1770 pairs" in syn.pairs_chosen_by), syn.pairs_chosen_by
    assert "its next 8 in the schema's order (" in TableSynthesizer(schema=schema, epsilon=1.0,
                                                                    delta=1e-9).pairs_chosen_by


def test_a_rule_the_release_cannot_keep_keeps_the_release(tmp_path, capsys):
    """Issue 96: a rule no sample can keep ('age > 79' where few ages are) was found after the budget was spent,
    and the run wrote nothing: a rerun spent ε again. Now the release is written (privacy.json, model.pt, no
    samples), verifies, and records are drawn from it with --ignore-rules."""
    import json

    from swflow.cli import main
    from swflow.tables import example_table

    frame, schema = example_table(1500, seed=2)
    frame.to_csv(tmp_path / "private.csv", index=False)
    (tmp_path / "schema.json").write_text(json.dumps({**schema.to_json(), "rules": ["age > 79"]}))
    out = tmp_path / "run"
    assert main(["generate", "--table", str(tmp_path / "private.csv"), "--schema", str(tmp_path / "schema.json"),
                 "--epsilon", "1", "--delta", "1e-7", "--steps", "30", "--out", str(out), "--quiet"]) == 2
    assert "The release is kept" in capsys.readouterr().err
    assert sorted(p.name for p in out.iterdir() if not p.name.startswith(".")) == ["model.pt", "privacy.json"]
    assert main(["verify", str(out), "--quiet"]) == 0
    assert main(["sample", str(out), "--n", "40", "--out", str(tmp_path / "drawn"), "--ignore-rules", "--quiet"]) == 0
    assert len(pd.read_csv(tmp_path / "drawn" / "samples.csv")) == 40


def test_a_category_only_with_those_of_another_column():
    """`if ... then ...` rules (issue 96, 11): a breed only with its species; samples keep them, the JSON form
    round-trips, a comparison with a missing value does not meet a condition, and bad rules are refused."""
    import warnings

    from swflow.pipeline.tables import TableSynthesizer
    from swflow.tables.schema import Schema, SchemaError

    rng = np.random.default_rng(0)
    species = rng.choice(["dog", "cat"], 2000)
    breed = np.where(species == "dog", rng.choice(["poodle", "beagle"], 2000), rng.choice(["siamese", "persian"], 2000))
    weight = np.where(rng.uniform(size=2000) < 0.1, np.nan, rng.uniform(1, 40, 2000))
    frame = pd.DataFrame({"species": species, "breed": breed, "weight": weight})
    columns = [{"name": "species", "type": "categorical", "categories": ["dog", "cat"]},
               {"name": "breed", "type": "categorical", "categories": ["poodle", "beagle", "siamese", "persian"]},
               {"name": "weight", "type": "numeric", "min": 0, "max": 50, "missing": True}]
    rules = ["if breed in {poodle, 'beagle'} then species == dog", "if species == dog then breed in {poodle, beagle}",
             "if weight > 30 then species != cat"]
    schema = Schema.from_json({"columns": columns, "rules": rules})
    assert Schema.from_json(schema.to_json()).rules == schema.rules
    checked = schema.check(pd.DataFrame({"species": ["cat", "cat", "dog"], "breed": ["persian"] * 3,
                                         "weight": [35.0, np.nan, 2.0]}))
    assert schema.rules[2].holds(checked).tolist() == [False, True, True]  # missing weight: the rule does not apply
    assert schema.rules[1].holds(checked).tolist() == [True, True, False]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        syn = TableSynthesizer(schema=schema, epsilon=0.3, steps=60, n_particles=400).fit(frame)
    free, kept = syn.sample(4000, seed=1, rules=False), syn.sample(4000, seed=1)
    mixed = lambda f: ((f.species == "dog") != f.breed.isin(["poodle", "beagle"])).mean()  # noqa: E731
    assert mixed(free) > 0.01 and mixed(kept) == 0  # the noise mixes them; the rules keep them apart
    assert not ((kept.species == "cat") & (kept.weight > 30)).any()
    for bad, words in (("if breed in {labrador} then species == dog", "labrador"),
                       ("if weight in {1, 2} then species == dog", "not a categorical column"),
                       ("if breed in {} then species == dog", "nothing")):
        with pytest.raises(SchemaError, match=words):
            Schema.from_json({"columns": columns, "rules": [bad]})
