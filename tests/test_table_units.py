"""Privacy per unit (issue 75): a table run that protects one unit (a customer, a student) and all of its rows.

Each release's sensitivity for a unit of up to k rows by brute force over every unit-level neighbour of tiny tables,
the bound independent of the rows' order, no identifier in any output, forged unit statements refused, the
white-box audit of a unit below its claim and above it when the bound is not applied."""
import itertools
import json
import math

import numpy as np
import pandas as pd
import pytest
import torch

from swflow.pipeline.tables import TableSynthesizer
from swflow.privacy.histogram import histogram_sensitivity
from swflow.privacy.marginals import pair_counts
from swflow.privacy.oneway import Tree, level_counts
from swflow.privacy.units import (ROW_CLASSES, UnitBound, drawn_classes, row_classes, spread_weights, tree_weights,
                                  unit_codes, unit_value_slots, unit_weights)
from swflow.privacy.verify import ClaimMismatch
from swflow.tables import example_table


def _units(frame: pd.DataFrame, *, units: int, seed: int = 0, prefix: str = "ID") -> pd.DataFrame:
    """``frame`` with a unit column: ``units`` identifiers, a few rows each and some with many."""
    rng = np.random.default_rng(seed)
    weights = rng.pareto(1.2, units) + 1
    ids = rng.choice(units, len(frame), p=weights / weights.sum())
    return frame.assign(person=[f"{prefix}-{i:05d}-zq" for i in ids])


def _identifier_in(data: bytes) -> bool:
    """Whether ``data`` holds an identifier of :func:`_units`, whole or its number with either end: a fragment of
    three bytes ("-zq") also turns up by chance in a model file's float bytes (about one file in a hundred)."""
    import re

    return re.search(rb"[A-Z]+-\d{5}|\d{5}-zq", data) is not None


def _fit(k=4, n=3000, units=400, **kwargs):
    frame, schema = example_table(n)
    frame = _units(frame, units=units)
    syn = TableSynthesizer(schema=schema, epsilon=1.0, delta=1e-7, steps=30, privacy_unit="person",
                           max_rows_per_unit=k, **kwargs)
    return syn.fit(frame), frame


# -- sensitivity by brute force ---------------------------------------------------------------------------------------
def _all_units(cells_per_column: list[int], largest: int):
    """Every unit of 1 … ``largest`` rows over the tiny domain (each row a tuple of cells), as row lists."""
    domain = list(itertools.product(*[range(c) for c in cells_per_column]))
    for size in range(1, largest + 1):
        yield from itertools.combinations_with_replacement(domain, size)


@pytest.mark.parametrize("k", [1, 2, 3])
def test_a_unit_moves_the_pair_tables_trees_and_count_by_at_most_k_times_a_row(k):
    """Brute force: a tiny table of three units; every neighbour that adds one more unit of 1 … k + 2 rows over a
    2 × 3 × 2 domain (every multiset of rows), and every neighbour that removes one of its units. The pair tables
    weighted by the count bound move by at most k·√K in ℓ2, the count of records by k, and the trees (a binary
    tree of two levels on one column, a flat one on another: G = 3 levels) weighted by their spread
    (privacy.units.tree_weights) by k·√G (the sensitivities a run records); each largest move reaches its bound
    (more than k rows in one cell), and a unit whose rows spread over the trees' nodes keeps more than k / n."""
    sizes, pairs = [2, 3, 2], [(0, 1), (0, 2), (1, 2)]
    trees, tree_columns = [Tree(3, 2, 2), Tree(2, 2, 1)], [1, 2]
    base_rows = [(0, 0, 0), (1, 2, 1), (1, 2, 1), (0, 1, 1), (0, 1, 0), (1, 0, 0), (1, 0, 0), (1, 0, 1)]
    base_units = [0, 1, 1, 2, 2, 2, 2, 2]

    def released(rows, units):
        cells = torch.tensor(rows, dtype=torch.int64).reshape(-1, 3)
        codes = np.array(units, dtype=np.int64)
        if not units:
            weights = tree_w = torch.zeros(0, dtype=torch.float64)
        else:
            weights = unit_weights(codes, max_rows=k)
            tree_w = tree_weights(codes, cells[:, tree_columns], trees, max_rows=k)
        return (pair_counts(cells, sizes, pairs, weights), level_counts(cells[:, tree_columns], trees, tree_w),
                float(weights.sum()), tree_w)

    base = released(base_rows, base_units)
    largest, spread = [0.0, 0.0, 0.0], 0
    neighbours = [(base_rows + list(unit), base_units + [3] * len(unit)) for unit in _all_units(sizes, k + 2)]
    neighbours += [([r for r, u in zip(base_rows, base_units) if u != gone],
                    [u if u < gone else u - 1 for u in base_units if u != gone]) for gone in range(3)]
    for rows, units in neighbours:
        other = released(rows, units)
        moves = [float((other[0] - base[0]).norm()), float((other[1] - base[1]).norm()), abs(other[2] - base[2])]
        largest = [max(a, b) for a, b in zip(largest, moves)]
        added = len(rows) - len(base_rows)
        if added > 0:
            assert torch.equal(other[3][:len(base_rows)], base[3])  # no other unit's weight changes
            spread += float(other[3][-1]) > min(1.0, k / added) + 1e-9
    bounds = [histogram_sensitivity(len(pairs), adjacency="add-remove", contribution=k).value,
              histogram_sensitivity(sum(t.levels for t in trees), adjacency="add-remove", contribution=k).value,
              histogram_sensitivity(1, adjacency="add-remove", contribution=k).value]
    assert bounds == pytest.approx([k * math.sqrt(3), k * math.sqrt(3), k * 1.0])
    assert largest == pytest.approx(bounds)
    assert spread > 0


@pytest.mark.parametrize("k", [1, 2, 3])
def test_a_units_spread_weight_moves_the_pair_tables_by_at_most_k_root_k(k):
    """Brute force, the pair tables' weights (privacy.units.spread_weights): a tiny table of three units over a
    2 × 3 × 2 domain and a fourth column constant in each unit (its weight's class, as a run's ROWS_COLUMN); every
    neighbour adding one more unit of 1 … k + 2 rows (every multiset), and every neighbour removing one. The five
    tables move by at most k·√K in ℓ2, and exactly that where a unit of more than k rows sits in one cell; no
    other unit's weight changes; a unit keeps at least the count bound's k / n of each row, and more where its rows
    spread (the largest weight for the bound, checked against its norm counted by pair_counts, on its own)."""
    sizes, pairs = [2, 3, 2, 4], [(0, 1), (0, 2), (1, 2), (0, 3), (2, 3)]
    bound = k * math.sqrt(len(pairs))
    base_rows = [(0, 0, 0), (1, 2, 1), (1, 2, 1), (0, 1, 1), (0, 1, 0), (1, 0, 0), (1, 0, 0), (1, 0, 1)]
    base_units = [0, 1, 1, 2, 2, 2, 2, 2]

    def released(rows, units):
        codes = np.array(units, dtype=np.int64)
        cells = np.array([(*r, 0) for r in rows], dtype=np.int64).reshape(-1, 4)
        weights = spread_weights(codes, cells, pairs, max_rows=k, constant=3)
        cells[:, 3] = row_classes(weights.numpy())  # the class column, set from the weight it does not change
        assert torch.equal(weights, spread_weights(codes, cells, pairs, max_rows=k, constant=3))
        return pair_counts(torch.from_numpy(cells), sizes, pairs, weights), weights

    base, base_weights = released(base_rows, base_units)
    largest, spread = 0.0, 0
    for unit in _all_units(sizes[:3], k + 2):
        tables, weights = released(base_rows + list(unit), base_units + [3] * len(unit))
        assert torch.equal(weights[:len(base_rows)], base_weights)
        alone = pair_counts(torch.tensor([(*r, 0) for r in unit]), sizes, pairs, torch.ones(len(unit),
                                                                                                dtype=torch.float64))
        weight = float(weights[-1])
        assert weight == pytest.approx(min(1.0, bound / float(alone.norm())), rel=1e-12)
        assert weight >= min(1.0, k / len(unit)) - 1e-12
        spread += weight > min(1.0, k / len(unit)) + 1e-9
        moved = float((tables - base).norm())
        assert moved <= bound * (1 + 1e-12)
        largest = max(largest, moved)
    for gone in range(3):
        rows = [r for r, u in zip(base_rows, base_units) if u != gone]
        tables, _ = released(rows, [u if u < gone else u - 1 for u in base_units if u != gone])
        assert float((tables - base).norm()) <= bound * (1 + 1e-12)
    assert largest == pytest.approx(bound)
    assert spread > 0


@pytest.mark.parametrize("per_unit", [1, 2])
def test_a_unit_moves_at_most_m_value_counts_of_each_column_by_one(per_unit):
    """Brute force over every unit of 1 … 3 rows whose two columns hold values in {1, 2, 3} (and a missing value, a
    bound: never a candidate): added to a tiny table, the units' counts of each value (what the repeated-values
    release counts) move by one in at most m values of each column, whatever the random choice: ℓ2 ≤ √(m·C). Each
    (unit, value) pair draws its own key, so the other units' choices are the same draws on both sides (coupled:
    the same stream); the guarantee is then a mixture over them of releases that differ by at most this."""
    inside = [(0.0, 10.0), (0.0, 10.0)]
    base = torch.tensor([[1.0, 2.0], [1.0, 3.0], [2.0, 2.0], [2.0, 0.0], [2.0, 3.0]], dtype=torch.float64)
    base_units = np.array([0, 0, 1, 2, 2])

    def counts(values, units, seed):
        rng = np.random.default_rng(seed)
        slots = unit_value_slots(values, units, inside=inside, per_unit=per_unit,
                                 uniform=lambda n: torch.from_numpy(rng.uniform(size=n)))
        return torch.stack([torch.stack([(slots[:, j] == v).sum() for v in (1.0, 2.0, 3.0)]) for j in range(2)])

    rows_of_one = list(itertools.product((0.0, 1.0, 2.0, 3.0), repeat=2))
    for size in range(1, 4):
        for rows in itertools.combinations_with_replacement(rows_of_one, size):
            values = torch.cat([base, torch.tensor(rows, dtype=torch.float64)])
            for seed in range(2):  # the choice is random: the bound holds for every draw
                moved = counts(values, np.concatenate([base_units, [3] * size]), seed) - counts(base, base_units,
                                                                                                   seed)
                assert moved.min() >= 0 and moved.max() <= 1
                assert int(moved.sum(dim=1).max()) <= per_unit
    assert histogram_sensitivity(2 * per_unit, adjacency="add-remove").value == pytest.approx(math.sqrt(2 * per_unit))


def test_the_bound_depends_on_no_rows_order():
    """The weights are a function of each unit's own rows: shuffling the table gives the same counts; and a unit's
    named value is chosen at random among its distinct values, in whichever order they come (Monte Carlo: each of
    three values 1/3 of 2 000 draws, within 0.05 (5 standard deviations), forward and backward)."""
    frame, schema = example_table(500)
    frame = _units(frame, units=40)
    codes = unit_codes(frame["person"])
    shuffled = np.random.default_rng(1).permutation(len(frame))
    codes_shuffled = unit_codes(frame["person"].iloc[shuffled])
    weights, weights_shuffled = unit_weights(codes, max_rows=3), unit_weights(codes_shuffled, max_rows=3)
    assert torch.equal(weights[shuffled], weights_shuffled)
    ages = torch.from_numpy(frame["age"].to_numpy().copy()).long()
    assert torch.allclose(torch.bincount(ages, weights=weights), torch.bincount(ages[shuffled],
                                                                                weights=weights_shuffled))
    rng = np.random.default_rng(2)
    for values in ([1.0, 2.0, 3.0], [3.0, 2.0, 1.0]):
        chosen = [float(unit_value_slots(torch.tensor([[v] for v in values] * 2, dtype=torch.float64),
                                         np.zeros(6, dtype=np.int64), inside=[(0.0, 9.0)], per_unit=1,
                                         uniform=lambda n: torch.from_numpy(rng.uniform(size=n)))[0, 0])
                  for _ in range(2000)]
        shares = np.bincount(np.array(chosen, dtype=int), minlength=4)[1:] / 2000
        assert np.allclose(shares, 1 / 3, atol=0.05)


def test_a_class_the_noise_lifted_is_not_drawn_at_its_factor():
    """drawn_classes against scipy's normal law, 20 000 noise draws on three real classes and three empty ones.
    At σ = 200 (ε = 1 on the made-up event table) an empty class's factor × σ is over a quarter of the released
    mass: drawn only where the noise lifts it past 3σ, P(Z > 3), where the 2σ test alone draws each in 1 run in
    44; the third class (700 ± 200) is drawn where it passes 2σ, Φ(1.5) of the time. At σ = 20 the fourth class is
    real and always drawn; the fifth, empty, passes in P(Z > 2) of the runs (its factor × σ is under a quarter of
    the mass), the sixth in P(Z > 3) (over a quarter). Within about 6 standard deviations of the Monte Carlo."""
    from scipy.stats import norm

    rng = torch.Generator().manual_seed(5)
    draws = 20_000
    for noise, counts in ((200.0, [6000.0, 4300.0, 700.0, 0.0, 0.0, 0.0]),
                          (20.0, [6000.0, 4300.0, 700.0, 300.0, 0.0, 0.0])):
        kept = torch.stack([drawn_classes(torch.tensor(counts, dtype=torch.float64)
                                          + noise * torch.randn(6, generator=rng, dtype=torch.float64), noise)
                            for _ in range(draws)]).mean(dim=0)

        def near(share, p):
            return abs(float(share) - p) <= 6 * math.sqrt(p * (1 - p) / draws) + 1e-4

        assert kept[0] == 1 and kept[1] == 1
        if noise == 200.0:
            assert near(kept[2], norm.cdf((700 - 2 * noise) / noise))
            assert all(near(k, norm.sf(3.0)) for k in kept[3:]) and kept[3:].max() < norm.sf(2.0) / 5
        else:
            assert kept[2] == 1 and kept[3] == 1
            assert near(kept[4], norm.sf(2.0)) and near(kept[5], norm.sf(3.0))


def test_samples_follow_the_weighted_law_with_a_warning_when_no_drawn_class_holds_mass():
    """Few units for the noise (txhousing's 23 cities at ε = 1, k = 8, in one draw): the one class holding the
    units' rows failed drawn_classes' tests, and the first class, always kept, held no particle mass, so no pooled
    record had a positive factor and sampling failed. It now warns and returns the pool as drawn (the unit-weighted
    law the release counted). Made here by marking every class but the first as not drawn, with no record in it."""
    syn, _ = _fit(k=4)
    last = len(syn.codec.sizes) - 1
    syn._released_classes = lambda: torch.tensor([1.0] + [0.0] * (ROW_CLASSES - 1), dtype=torch.float64)
    with pytest.warns(UserWarning, match="unit-weighted law"):
        cells = syn._reweighted(lambda k, s: torch.zeros(k, last + 1, dtype=torch.int64).index_fill_(
            1, torch.tensor([last]), 2), 50, 0)  # every pooled record in class 2
    assert cells.shape == (50, last + 1) and (cells[:, last] == 2).all()


# -- the run ----------------------------------------------------------------------------------------------------------
def test_a_unit_run_states_its_unit_and_counts_each_release_at_k():
    syn, frame = _fit(k=4)
    report = syn.privacy_report()
    assert report.privacy_unit == "one person and all of its rows"
    assert report.unit_bound["max_rows_per_unit"] == 4 and "not published" in report.unit_bound["rows_over_the_bound"]
    assert report.statement.endswith("add-remove adjacency of one person and all of its rows")
    assert report.adjacency == "add-remove" and report.mechanism == "gaussian" and report.secure_noise
    assert all(e["contribution"] == 4 for e in report.ledger)
    for event in report.ledger:
        assert event["sensitivity"] == pytest.approx(4 * math.sqrt(event["n_projections"]))
    # what the count of records released estimates: the rows' weights, min(rows, 4) a unit
    mass = frame.groupby("person").size().clip(upper=4).sum()
    assert abs(report.dataset_size - mass) < 6 * report.ledger[-1]["noise_std"]
    samples = syn.sample(300, seed=1)
    assert list(samples.columns) == syn.user_schema.names and "person" not in samples.columns


def test_a_run_without_a_unit_says_its_unit_is_one_row():
    frame, schema = example_table(1000)
    report = TableSynthesizer(schema=schema, epsilon=1.0, delta=1e-7, steps=20).fit(frame).privacy_report()
    assert report.privacy_unit == "one row" and report.unit_bound is None
    assert report.to_json()["privacy_unit"] == "one row"


def test_unit_settings_that_cannot_hold_are_refused_before_any_row_is_read():
    frame, schema = example_table(200)
    base = dict(schema=schema, epsilon=1.0, delta=1e-7)
    for kwargs, words in [({"privacy_unit": "person", "adjacency": "replace-one"}, "adding or removing"),
                          ({"privacy_unit": "person", "count_noise": "discrete-gaussian"}, "discrete Gaussian"),
                          ({"privacy_unit": "person", "privacy_seed": 3}, "CSPRNG"),
                          ({"privacy_unit": "person", "max_rows_per_unit": 0}, "whole number"),
                          ({"privacy_unit": "age"}, "leave it out of the schema"),
                          ({"max_rows_per_unit": 4}, "name its column")]:
        with pytest.raises(ValueError, match=words):
            TableSynthesizer(**base, **kwargs)
    syn = TableSynthesizer(**base, privacy_unit="person")
    with pytest.raises(ValueError, match="no privacy-unit column"):
        syn.fit(frame)
    with pytest.raises(ValueError, match="without a unit") as err:
        TableSynthesizer(**base, privacy_unit="person").fit(frame.assign(person=[None] + ["zz-secret"] * 199))
    assert "zz-secret" not in str(err.value) and "199" not in str(err.value)  # no identifier, no count


def test_no_output_holds_a_unit_identifier(tmp_path, capsys):
    """The command line on a CSV whose identifiers are distinctive strings: no byte of any file the run writes (and
    no line it prints) holds one, nor the column's values in any form."""
    from swflow.cli import main
    from swflow.tables.example import EXAMPLE_SCHEMA

    frame, _ = example_table(1500)
    frame = _units(frame, units=150, prefix="QX")
    private = tmp_path / "private.csv"
    frame.to_csv(private, index=False)
    (tmp_path / "schema.json").write_text(json.dumps(EXAMPLE_SCHEMA))
    out = tmp_path / "run"
    assert main(["generate", "--table", str(private), "--schema", str(tmp_path / "schema.json"), "--epsilon", "1",
                 "--delta", "1e-7", "--privacy-unit", "person", "--max-rows-per-unit", "5", "--steps", "30",
                 "--out", str(out), "--quiet"]) == 0
    printed = capsys.readouterr()
    assert "of one person and all of its rows" in printed.out
    files = [p for p in out.rglob("*") if p.is_file()]
    assert {p.name for p in files} >= {"privacy.json", "model.pt", "samples.csv"}
    for data in [p.read_bytes() for p in files] + [printed.out.encode(), printed.err.encode()]:
        assert not _identifier_in(data)
    assert main(["sample", str(out), "--n", "50", "--out", str(tmp_path / "more")]) == 0


def test_the_help_states_the_default_k_the_library_uses(capsys):
    """--help keeps torch-importing modules unloaded, so it writes the default k as a number: that number must be
    the constant's."""
    from swflow.cli import main
    from swflow.privacy.units import DEFAULT_ROWS_PER_UNIT

    with pytest.raises(SystemExit):
        main(["generate", "--help"])
    usage = " ".join(capsys.readouterr().out.split())
    assert f"(default {DEFAULT_ROWS_PER_UNIT}: swflow.privacy.units.DEFAULT_ROWS_PER_UNIT)" in usage


# -- read-back ---------------------------------------------------------------------------------------------------------
def _edited(tmp_path, syn, edit):
    path = syn.save(tmp_path / "model.pt")
    blob = torch.load(path, weights_only=True)
    edit(blob)
    torch.save(blob, path)
    return path


@pytest.mark.parametrize("forgery", ["unit removed", "unit renamed", "k lowered", "k lowered consistently",
                                     "unit in the report only", "one row claimed"])
def test_a_forged_unit_statement_is_refused(tmp_path, forgery):
    from swflow.privacy import PrivacyReport
    from swflow.privacy.report import with_unit

    syn, _ = _fit(k=4)

    def edit(blob):
        report = PrivacyReport.from_json(blob["report"])
        if forgery == "unit removed":
            blob["unit"] = None
            blob["report"] = with_unit(report, "one row", None).to_json()
        elif forgery == "unit renamed":
            blob["report"]["privacy_unit"] = "one household and all of its rows"
        elif forgery == "k lowered":
            blob["unit"]["max_rows_per_unit"] = 2
            blob["report"]["unit_bound"]["max_rows_per_unit"] = 2
        elif forgery == "k lowered consistently":  # every sensitivity and multiplier restated for k = 2, ε recomputed
            blob["unit"]["max_rows_per_unit"] = 2
            blob["report"]["unit_bound"]["max_rows_per_unit"] = 2
            for event in blob["report"]["ledger"]:
                event.update(contribution=2, sensitivity=event["sensitivity"] / 2,
                             noise_multiplier=event["noise_multiplier"] * 2)
        elif forgery == "unit in the report only":
            blob["unit"] = None
        else:
            blob["report"]["unit_bound"] = None
            blob["report"]["privacy_unit"] = "one row"

    path = _edited(tmp_path, syn, edit)
    with pytest.raises(ClaimMismatch):
        TableSynthesizer.load(path)


def test_a_unit_run_names_repeated_values_only_when_asked():
    """Under a unit each unit names at most one value of a column, so the repeated-values release is off unless
    asked (it named none on the benchmark's unit tables); a row run makes it by default. Asked for under a unit, it
    counts one value a unit (contribution 1, sensitivity √C) and the other releases k each."""
    rng = np.random.default_rng(4)
    frame = pd.DataFrame({"amount": rng.choice([10.0, 25.0, 40.0], 3000) + rng.uniform(0, 1, 3000).round(2) * (
        rng.uniform(size=3000) < 0.3), "kind": rng.choice(["a", "b"], 3000), "person": rng.integers(0, 600, 3000)})
    schema = {"columns": [{"name": "amount", "type": "numeric", "min": 0, "max": 100},
                          {"name": "kind", "type": "categorical", "categories": ["a", "b"]}]}

    def ledger(**settings):
        syn = TableSynthesizer(schema=schema, epsilon=8.0, delta=1e-7, steps=20, **settings)
        return syn, syn.fit(frame if "privacy_unit" in settings else frame.drop(columns="person")).privacy_report().ledger

    assert ledger()[0].repeated_values and len(ledger()[1]) == 3  # a row run: the values, the trees, the pairs
    syn, events = ledger(privacy_unit="person")
    assert not syn.repeated_values and len(events) == 3  # the pairs, the trees, the count of records
    syn, events = ledger(privacy_unit="person", repeated_values=True)
    assert syn.repeated_values and len(events) == 4
    assert [e["contribution"] for e in events] == [4, 1, 4, 4]
    assert events[1]["sensitivity"] == pytest.approx(1.0)  # one column named, one value a unit


def test_the_command_line_asks_for_repeated_values_either_way(tmp_path):
    """--repeated-values / --no-repeated-values reach the run as True / False, and neither as None (the default
    that turns the release on for rows and off under a unit); a config file's true / false does the same."""
    from swflow.cli import build_parser, with_config

    base = ["generate", "--table", "t.csv", "--schema", "s.json", "--epsilon", "1", "--out", "run"]
    flags = [[], ["--repeated-values"], ["--no-repeated-values"]]
    assert [build_parser().parse_args(base + flag).repeated_values for flag in flags] == [None, True, False]
    for value, chosen in (("true", True), ("false", False)):
        (tmp_path / "run.toml").write_text(f"[run]\nrepeated_values = {value}\n")
        argv = [*base, "--config", str(tmp_path / "run.toml")]
        assert build_parser().parse_args(with_config(argv, build_parser().parse_args(argv))).repeated_values is chosen


def test_public_rows_under_a_unit_set_the_cells_and_choose_the_pairs(tmp_path):
    """Public rows under a unit: the cells come from them at no cost (no trees: the ledger holds the count of
    records and the pair tables, each at k), the pairs among the data columns are chosen from them at the unit's
    noise (fewer at a smaller ε), every column keeps its table with its rows' class (which public rows do not
    carry), and their own unit column is dropped unread: no file the run writes holds a public identifier either."""
    frame, schema = example_table(4000)
    frame = _units(frame, units=500)
    public = _units(example_table(3000, seed=7)[0], units=300, seed=3, prefix="PUB")
    runs = {eps: TableSynthesizer(schema=schema, epsilon=eps, delta=1e-7, steps=30, privacy_unit="person",
                                  public=public).fit(frame) for eps in (0.3, 30.0)}
    columns = len(schema.columns)
    for syn in runs.values():
        classes = [(j, columns) for j in range(columns)]
        assert set(classes) <= set(syn.pairs) and all(max(p) < columns for p in set(syn.pairs) - set(classes))
        events = syn.privacy_report().ledger
        assert len(events) == 2 and [e["contribution"] for e in events] == [4, 4]
        assert events[0]["sensitivity"] == pytest.approx(4 * math.sqrt(len(syn.pairs)))  # the pairs, the count
        assert "public rows" in syn.pairs_chosen_by and syn.resolution == "public"
    assert len(runs[0.3].pairs) < len(runs[30.0].pairs)
    path = runs[0.3].save(tmp_path / "model.pt")
    loaded = TableSynthesizer.load(path)
    assert loaded.pairs == runs[0.3].pairs and len(loaded.sample(50, seed=1)) == 50
    assert not _identifier_in(path.read_bytes())


def test_the_command_line_takes_public_rows_beside_a_unit_and_writes_none_of_their_identifiers(tmp_path, capsys):
    """--public-table with --privacy-unit from CSV files: the run states that public rows chose its pairs, and no
    byte it writes or prints holds a private or a public identifier."""
    from swflow.cli import main
    from swflow.tables.example import EXAMPLE_SCHEMA

    _units(example_table(1500)[0], units=150, prefix="QX").to_csv(tmp_path / "private.csv", index=False)
    _units(example_table(800, seed=5)[0], units=90, seed=2, prefix="PUBQ").to_csv(tmp_path / "public.csv", index=False)
    (tmp_path / "schema.json").write_text(json.dumps(EXAMPLE_SCHEMA))
    out = tmp_path / "run"
    assert main(["generate", "--table", str(tmp_path / "private.csv"), "--public-table", str(tmp_path / "public.csv"),
                 "--schema", str(tmp_path / "schema.json"), "--epsilon", "1", "--delta", "1e-7", "--privacy-unit",
                 "person", "--steps", "30", "--out", str(out), "--quiet"]) == 0
    printed = capsys.readouterr()
    report = json.loads((out / "privacy.json").read_text())
    assert "public rows" in json.dumps(report) and "rows' class" in json.dumps(report)
    for data in [p.read_bytes() for p in out.rglob("*") if p.is_file()] + [printed.out.encode(), printed.err.encode()]:
        assert not _identifier_in(data)


def test_a_saved_unit_run_loads_and_samples(tmp_path):
    syn, _ = _fit(k=4)
    loaded = TableSynthesizer.load(syn.save(tmp_path / "model.pt"))
    assert loaded.privacy_report().statement == syn.privacy_report().statement
    assert len(loaded.sample(20, seed=3)) == 20


def test_a_unit_run_on_the_schemas_own_cells_fits_saves_and_loads(tmp_path):
    """resolution='uniform' (cells from the schema alone, no trees) under a unit: the codec counts the unit's class
    column as every release does (it once held the user's schema only and refused the run's own rows), the cells
    are the schema's bins, and the run loads and samples."""
    syn, _ = _fit(k=4, resolution="uniform", numeric_bins=4)
    assert syn.codec.schema.names == syn.schema.names and syn.schema.names[:-1] == syn.user_schema.names
    assert syn.privacy_report().run_config["resolution_columns"] == []
    assert all(size <= 4 for size, c in zip(syn.codec.sizes, syn.user_schema.columns) if c.kind == "numeric")
    loaded = TableSynthesizer.load(syn.save(tmp_path / "model.pt"))
    assert loaded.codec.sizes == syn.codec.sizes
    assert list(loaded.sample(50, seed=2).columns) == syn.user_schema.names


def test_a_table_run_of_an_earlier_release_protects_one_row(tmp_path):
    """Files written before privacy units (no unit in the file or the report) load as what they were: one row;
    their releases must then count each row once (a unit run's report stripped of its unit is refused above)."""
    frame, schema = example_table(800)
    syn = TableSynthesizer(schema=schema, epsilon=1.0, delta=1e-7, steps=20).fit(frame)

    def earlier(blob):
        blob.pop("unit")
        blob["report"].pop("privacy_unit"), blob["report"].pop("unit_bound")
        for event in blob["report"]["ledger"]:
            event.pop("contribution")
    assert TableSynthesizer.load(_edited(tmp_path, syn, earlier)).privacy_report().privacy_unit == "one row"


def test_the_discrete_gaussian_is_never_accounted_for_counts_a_unit_moves_by_more_than_one():
    from swflow.privacy.accountants import accountant_for
    from swflow.privacy.ledger import MechanismEvent

    event = MechanismEvent(noise_multiplier=3.0, noise_std=12.0, sensitivity=4.0, sensitivity_bound="histogram",
                           delta_sensitivity=0.0, sampling="none", sample_size=10, dataset_size=10, n_projections=1,
                           mechanism="discrete-gaussian", contribution=4)
    with pytest.raises(ValueError, match="discrete Gaussian"):
        accountant_for((event,), adjacency="add-remove")


# -- audit ---------------------------------------------------------------------------------------------------------
def test_a_unit_audits_below_its_claim_and_above_it_when_its_rows_are_not_bounded():
    """White-box, add/remove of one unit placed worst case across the value, the tree, the table and the count, at a
    composed eps = 4 (1e6 draws a side): a unit of k rows and one of 2k rows stay below the claim; 2k rows counted
    without the bound break it."""
    from swflow.pipeline.unit_audit import unit_whitebox_audit

    for rows in (4, 8):
        honest = unit_whitebox_audit(4.0, max_rows=4, unit_rows=rows)
        assert 1.0 <= honest["audited_epsilon_lower_bound"] <= 4.0
    unbounded = unit_whitebox_audit(4.0, max_rows=4, unit_rows=8, bounded=False)
    assert unbounded["audited_epsilon_lower_bound"] > 4.0


def test_the_unit_bound_round_trips():
    bound = UnitBound("customer_id", 8)
    assert UnitBound.from_json(bound.to_json()) == bound and bound.words == "one customer_id and all of its rows"


# -- a unit run reads back at every ε (issue 96) -------------------------------------------------------------------------
def _unit_run(epsilon: float, k: int):
    frame, schema = example_table(3000)
    return TableSynthesizer(schema=schema, epsilon=epsilon, delta=1e-7, steps=30, privacy_unit="person",
                            max_rows_per_unit=k).fit(_units(frame, units=400))


@pytest.mark.parametrize("epsilon,k", [(1, 1), (2, 32), (3, 4), (5, 8), (10, 1), (10, 4), (10, 32)])
def test_a_unit_run_reads_back_at_every_epsilon_and_k(tmp_path, epsilon, k):
    """The pair tables weigh a unit's rows by their spread, the count of records by min(1, k / rows): the read-back
    once tested both as one number, and refused every true run at ε = 10 with k of 1 or 4 (chi-square 976 on 123
    degrees of freedom against its bound 212 on this table; 895 of it the totals against the count)."""
    syn = _unit_run(epsilon, k)
    loaded = TableSynthesizer.load(syn.save(tmp_path / "model.pt"))
    assert loaded.privacy_report().epsilon == syn.privacy_report().epsilon
    assert "tested on read-back" in \
        loaded.privacy_report().notes["noise_check"]


@pytest.mark.parametrize("edit", ["one count", "the count of records"])
def test_a_unit_run_at_epsilon_10_still_refuses_an_edited_count(tmp_path, edit):
    """The unit run's test keeps its power: one cell moved by 30 noise stds, or the released count of records
    (and n with it) raised far past the tables' total, is refused."""
    from swflow.privacy.size import public_size

    syn = _unit_run(10, 4)
    sigma = syn.privacy_report().noise_std

    def forge(blob):
        if edit == "one count":
            blob["measurements"]["pair tables"][3] += 30 * sigma
        else:  # and n everywhere the file states it
            blob["measurements"]["count of records"] = float(blob["measurements"]["count of records"]) * 3
            forged = public_size(blob["measurements"]["count of records"])
            blob["report"]["dataset_size"] = blob["report"]["run_config"]["dataset_size"] = forged
            for event in blob["report"]["ledger"]:
                event["dataset_size"] = event["sample_size"] = forged

    words = "disagree with each other" if edit == "one count" else "larger than its pair tables' total"
    with pytest.raises(ClaimMismatch, match=words):
        TableSynthesizer.load(_edited(tmp_path, syn, forge))


def test_verify_passes_a_unit_run_at_epsilon_10(tmp_path, capsys):
    from swflow.cli import main

    frame, schema = example_table(3000)
    _units(frame, units=400).to_csv(tmp_path / "visits.csv", index=False)
    (tmp_path / "schema.json").write_text(json.dumps(schema.to_json()))
    out = tmp_path / "u10"
    assert main(["generate", "--table", str(tmp_path / "visits.csv"), "--schema", str(tmp_path / "schema.json"),
                 "--privacy-unit", "person", "--epsilon", "10", "--delta", "1e-7", "--steps", "30", "--out", str(out),
                 "--quiet"]) == 0
    assert main(["verify", str(out)]) == 0, capsys.readouterr().err


def test_the_command_line_refuses_a_typed_adjacency_or_noise_a_unit_cannot_honour(tmp_path, capsys):
    """Issue 96: `--adjacency replace-one` or `--count-noise discrete-gaussian` with a unit ran add/remove and the
    float Gaussian without a word; now each is refused as Python refuses it, and the run's release text states the
    unit's sensitivity, k x sqrt(K)."""
    from swflow.cli import main

    frame, schema = example_table(600)
    _units(frame, units=100).to_csv(tmp_path / "visits.csv", index=False)
    (tmp_path / "schema.json").write_text(json.dumps(schema.to_json()))
    base = ["generate", "--table", str(tmp_path / "visits.csv"), "--schema", str(tmp_path / "schema.json"),
            "--privacy-unit", "person", "--epsilon", "1", "--delta", "1e-7", "--steps", "20", "--quiet"]
    for flag, value, words in (("--adjacency", "replace-one", "adding or removing"),
                               ("--count-noise", "discrete-gaussian", "discrete Gaussian")):
        capsys.readouterr()
        assert main([*base, flag, value, "--out", str(tmp_path / "refused")]) == 2
        assert words in capsys.readouterr().err
    assert main([*base, "--out", str(tmp_path / "run")]) == 0
    release = json.loads((tmp_path / "run" / "privacy.json").read_text())["release"]
    assert "4 x sqrt(K)" in release and "n stays fixed and public" not in release


def test_an_ignored_column_and_held_out_rows_with_the_unit_column_work_under_a_unit(tmp_path, capsys):
    """Issue 96: a column the proposer marked "ignore" was refused as undeclared under a unit, and evaluate refused
    held-out rows that still hold the unit column, without naming the file."""
    from swflow.cli import main

    frame, schema = example_table(1600)
    frame = _units(frame, units=200).assign(comment=[f"free text {i}" for i in range(1600)])
    frame[:1200].to_csv(tmp_path / "visits.csv", index=False)
    frame[1200:].to_csv(tmp_path / "heldout.csv", index=False)
    data = schema.to_json()
    data["columns"].append({"name": "comment", "type": "ignore"})
    (tmp_path / "schema.json").write_text(json.dumps(data))
    out = tmp_path / "run"
    assert main(["generate", "--table", str(tmp_path / "visits.csv"), "--schema", str(tmp_path / "schema.json"),
                 "--privacy-unit", "person", "--epsilon", "1", "--delta", "1e-7", "--steps", "20", "--out", str(out),
                 "--quiet"]) == 0
    assert main(["evaluate", str(out), "--against", str(tmp_path / "heldout.csv"), "--owner-out",
                 str(tmp_path / "owner")]) == 0
    (tmp_path / "bad.csv").write_text(frame[1200:].assign(extra=1).to_csv(index=False))
    capsys.readouterr()
    assert main(["evaluate", str(out), "--against", str(tmp_path / "bad.csv"), "--owner-out",
                 str(tmp_path / "owner2")]) == 2
    assert "bad.csv" in capsys.readouterr().err


def test_a_unit_run_writes_as_many_records_as_its_release_tells_of():
    """Issue 96: a unit run wrote its weighted count of records by default (917 of 3 000 rows at ε = 10, k = 4),
    where the guide promises as many as the table has. The number of rows is private; the release tells of each
    class of a unit's rows and what a row of it stands for, so the default is that estimate (1 747 here): nearer
    the rows, never above them by more than the noise, and still below them where units hold far more than k rows."""
    syn = _unit_run(10, 4)
    weighted, estimate = syn.privacy_report().dataset_size, syn.estimated_rows()
    assert 1.5 * weighted < estimate < 1.1 * 3000
