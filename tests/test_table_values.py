"""The repeated-values release (swflow.privacy.values): partition selection of the values a sliced column repeats,
the atoms it gives the fine grid (swflow.tables.cells), and the runs that use them (``repeated_values``, the
default)."""
import math
import warnings

import numpy as np
import pandas as pd
import pytest
import torch

V = 6.907755278982137  # log(1000): a derived value that records repeat exactly, inside a slice
SCHEMA = {"columns": [{"name": "x", "type": "numeric", "min": 0, "max": 12},
                      {"name": "g", "type": "categorical", "categories": ["a", "b", "c"]}]}


def _frame(n: int, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    x = np.where(rng.random(n) < 0.4, V, rng.uniform(0, 12, n))
    g = np.where(x == V, "a", np.array(["a", "b", "c"])[rng.integers(0, 3, n)])
    return pd.DataFrame({"x": x, "g": g})


def _discrete_gaussian_tail(t: int, sigma: float) -> float:
    """P(Z ≥ t) of the discrete Gaussian on the integers, by summing its mass (an independent reference)."""
    k = np.arange(-int(60 * sigma) - 60, int(60 * sigma) + 61)
    mass = np.exp(-k.astype(float) ** 2 / (2 * sigma ** 2))
    return float(mass[k >= t].sum() / mass.sum())


def test_the_threshold_meets_its_delta_against_scipy_and_the_exact_discrete_tail():
    from scipy.stats import norm

    from swflow.privacy.values import PRE_THRESHOLD, selection_delta, selection_threshold

    k = PRE_THRESHOLD  # a candidate on one side only is held by k records there
    tau = selection_threshold(noise_std=7.5, columns=3, delta=1e-8, mechanism="gaussian")
    assert math.isclose(3 * norm.sf((tau - k) / 7.5), 1e-8, rel_tol=1e-9)  # the float Gaussian: exact
    for sigma in (0.8, 3.7, 25.0):
        tau = selection_threshold(noise_std=sigma, columns=4, delta=1e-6, mechanism="discrete-gaussian")
        assert tau == int(tau)
        exact = 4 * _discrete_gaussian_tail(int(tau) - k, sigma)
        assert exact <= 1e-6  # what a value only one record holds costs is within the charged delta
        assert exact <= selection_delta(tau, noise_std=sigma, columns=4, mechanism="discrete-gaussian")  # a bound
        assert selection_delta(tau - 1, noise_std=sigma, columns=4, mechanism="discrete-gaussian") > 1e-6  # lowest
    with pytest.raises(ValueError, match="noise_std > 0"):
        selection_threshold(noise_std=0.0, columns=1, delta=1e-6, mechanism="gaussian")


def _values_target(values: np.ndarray, *, multiplier: float, delta: float, seed: int, calibration=None):
    from swflow.privacy import NoiseSource, PrivacyLedger, PrivacySpec, ReleasePlan, calibrate
    from swflow.privacy.values import ValuesTarget

    columns = values.shape[1]
    if calibration is None:
        spec = PrivacySpec(noise_multiplier=multiplier, delta=1e-3, count_noise="gaussian")
        calibration = calibrate(spec, ReleasePlan(releases=1, dataset_size=len(values), sample_size=None,
                                                  n_projections=columns, dim=columns, noise="gaussian"))
    return ValuesTarget(torch.tensor(values, dtype=torch.float64), calibration, noise=NoiseSource(seed),
                        ledger=PrivacyLedger(), inside=[(0.0, 100.0)] * columns, delta=delta), calibration


def test_a_value_the_changed_record_makes_a_candidate_is_named_no_more_often_than_its_delta():
    """Monte Carlo, 3 000 draws of the float Gaussian at a large delta (0.05 over two columns): the values that the
    changed record makes candidates (held by two records with it, by one without it: one a column) are named with
    probability at most 0.05, as the threshold promises; a value held by one record is never counted; a value fifty
    records share is always named, with its noisy count."""
    rng = np.random.default_rng(0)
    rows = np.column_stack([np.r_[np.full(50, 7.0), rng.uniform(10, 90, 30)],
                            np.r_[np.full(50, 3.0), rng.uniform(10, 90, 30)]])
    rows[-2:] = [55.5, 66.6]  # the changed record, the last, and one other hold these values
    named_alone, calibration = 0, None
    for draw in range(3000):
        target, calibration = _values_target(rows, multiplier=1.0, delta=0.05, seed=draw, calibration=calibration)
        released = target.release_values()
        named_alone += any(float(v) in (55.5, 66.6) for values, _ in released for v in values)
        assert 7.0 in released[0][0].tolist() and 3.0 in released[1][0].tolist()
        assert {0.0, 100.0} <= set(released[0][0].tolist())  # the bounds, whatever their counts
        assert len(released[0][0]) <= 4  # the thirty values one record holds each are no candidates
    rate, spread = named_alone / 3000, 3 * math.sqrt(0.05 * 0.95 / 3000)
    assert 0.03 < rate < 0.05 + spread  # near its bound (1 − (1 − 0.025)² ≈ 0.049), never above it
    event = target.ledger.events[0]
    assert event.delta_sensitivity == 0.05 and event.n_projections == 2
    assert math.isclose(event.sensitivity, 2.0)  # sqrt(2C): two values a column move by one


def test_the_candidates_counts_move_by_at_most_the_histogram_sensitivity():
    """Brute force over every replacement of one record of a small table: over the values that are candidates (held
    by PRE_THRESHOLD records or more) on both sides, the counts move by at most sqrt(2C) in L2; each side has at most
    C candidates the other lacks, each held there by exactly PRE_THRESHOLD records (what the threshold's delta
    covers)."""
    from swflow.privacy.histogram import histogram_sensitivity
    from swflow.privacy.values import PRE_THRESHOLD

    def candidates(rows):
        return [{v: c for v, c in zip(*np.unique(rows[:, j], return_counts=True)) if c >= PRE_THRESHOLD}
                for j in range(rows.shape[1])]

    rows = np.array([[1.0, 2.0], [1.0, 3.0], [2.0, 3.0], [4.0, 2.0], [1.0, 5.0], [2.0, 2.0]])
    worst, alone, held = 0.0, 0, set()
    for i in range(len(rows)):
        for new in [(a, b) for a in (1.0, 2.0, 4.0, 9.0) for b in (2.0, 3.0, 5.0, 8.0)]:
            other = rows.copy()
            other[i] = new
            moved = 0.0
            for before, after in zip(candidates(rows), candidates(other)):
                moved += sum((before[v] - after[v]) ** 2 for v in set(before) & set(after))
                alone = max(alone, len(set(before) - set(after)), len(set(after) - set(before)))
                held |= {before[v] for v in set(before) - set(after)} | {after[v] for v in set(after) - set(before)}
            worst = max(worst, math.sqrt(moved))
    assert worst <= histogram_sensitivity(2, adjacency="replace-one").value + 1e-12
    assert math.isclose(worst, 2.0) and alone == 1 and held == {PRE_THRESHOLD}  # tight, and only at k


def test_the_bounds_are_counted_whatever_they_hold_and_the_counts_still_move_by_the_sensitivity():
    """Brute force over every replacement of one record of a small table whose records sit on the bounds (1 and 9)
    too, and miss values (NaN): the release's exact counts (ValuesTarget without noise) hold both bounds of every
    column on both sides, a bound no record holds at 0 and a missing value never; over the values counted on both
    sides they move by at most sqrt(2C) in L2; a value counted on one side only is strictly inside, held by
    PRE_THRESHOLD records there (what the threshold's delta covers). A missing value is written as the run writes
    it (absent_value: just below the lower bound)."""
    from swflow.privacy import PrivacyLedger
    from swflow.privacy.histogram import histogram_sensitivity
    from swflow.privacy.values import PRE_THRESHOLD, ValuesTarget, absent_value

    def counted(rows):
        written = torch.tensor(np.nan_to_num(rows, nan=absent_value(1.0)), dtype=torch.float64)
        target = ValuesTarget(written, None, noise=None, ledger=PrivacyLedger(), inside=[(1.0, 9.0)] * 2, delta=1e-3)
        return [dict(zip(v.tolist(), c.tolist())) for v, c in target.release_values()]

    nan = float("nan")
    rows = np.array([[1.0, 3.0], [1.0, nan], [3.0, 3.0], [5.0, 9.0], [3.0, 5.0], [nan, 5.0], [3.0, 3.0],
                     [5.0, 5.0]])
    assert counted(rows) == [{1.0: 2.0, 3.0: 3.0, 5.0: 2.0, 9.0: 0.0}, {1.0: 0.0, 3.0: 3.0, 5.0: 3.0, 9.0: 1.0}]
    worst, held = 0.0, set()
    for i in range(len(rows)):
        for new in [(a, b) for a in (1.0, 3.0, 5.0, 9.0, nan) for b in (1.0, 3.0, 7.0, 9.0, nan)]:
            other = rows.copy()
            other[i] = new
            moved = 0.0
            for before, after in zip(counted(rows), counted(other)):
                assert {1.0, 9.0} <= set(before) & set(after)
                moved += sum((before[v] - after[v]) ** 2 for v in set(before) & set(after))
                alone = [before[v] for v in set(before) - set(after)] + [after[v] for v in set(after) - set(before)]
                held |= set(alone)
            worst = max(worst, math.sqrt(moved))
    assert worst <= histogram_sensitivity(2, adjacency="replace-one").value + 1e-12
    assert math.isclose(worst, 2.0) and held == {PRE_THRESHOLD}
    tenths = ValuesTarget(torch.tensor([[0.1], [0.1], [0.5], [0.7]], dtype=torch.float64), None, noise=None,
                          ledger=PrivacyLedger(), inside=[(0.1, 0.9)], delta=1e-3).release_values()
    assert [(v.tolist(), c.tolist()) for v, c in tenths] == [([0.1, 0.9], [2.0, 0.0])]  # the bounds as written


def test_a_bound_that_holds_a_cell_s_share_is_a_pile_of_its_own():
    """resolution.bound_piles: a bound whose released count exceeds total / cells is a pile at that count; one below
    it, a value inside, or a release without the bounds (an earlier file) is none; two bounds claiming more than
    every record share them in proportion."""
    from swflow.tables.cells import FineGrid
    from swflow.tables.resolution import bound_piles
    from swflow.tables.schema import Schema

    column = Schema.from_json({"columns": [{"name": "h", "type": "numeric", "min": 0, "max": 5000,
                                            "integer": True, "missing": True}]}).columns[0]
    grid = FineGrid(column)
    assert grid.sliced and grid.ends == (0.0, 5000.0)
    assert bound_piles(grid, [0.0, 37.0, 5000.0], [170.0, 99.0, 3.0], 6, 600) == {0: 170.0}
    assert bound_piles(grid, [0.0, 37.0], [99.0, 500.0], 6, 600) == {}
    assert bound_piles(grid, [0.0, 5000.0], [600.0, 300.0], 6, 600) == {0: 400.0, grid.values - 1: 200.0}


def test_a_pile_taken_out_of_the_trees_takes_its_spread_mass_with_it():
    """fine_weights with a pile's count (from another release, independent noise): on exact levels the weights are
    the exact counts; on noisy levels (Monte Carlo, 40 draws, σ = 40 on every node and on the pile's count) of a
    column with 160 records at its low bound and 200 spread over a quarter of the range, the tree alone spreads
    the pile over its neighbours, and scaling the others after setting the pile's weight keeps that spread mass
    there (60 records of 200, by the mean), where the pile taken out of the levels leaves what the noise on the
    empty nodes itself puts there (23; under half of the scaled weights' in this Monte Carlo)."""
    from swflow.privacy.oneway import Tree
    from swflow.tables.resolution import fine_weights

    tree = Tree.for_cells(256, flat=False)
    leaves = torch.zeros(256, dtype=torch.float64)
    leaves[0], leaves[128:192] = 160.0, 200.0 / 64

    def levels(noise):
        return [tree.node_sums(leaves, level) + noise(tree.nodes(level)) for level in range(1, tree.levels + 1)]

    exact = fine_weights(levels(lambda k: 0.0), tree, total=360.0, piles={0: 160.0})
    assert np.allclose(exact, leaves.numpy())
    rng = torch.Generator().manual_seed(0)
    spread = {"tree": [], "scaled": [], "taken out": []}
    for _ in range(40):
        noisy = levels(lambda k: 40.0 * torch.randn(k, generator=rng, dtype=torch.float64))
        count = 160.0 + 40.0 * float(torch.randn(1, generator=rng))
        plain = fine_weights(noisy, tree, total=360.0, noise_std=40.0)
        scaled = plain * (360.0 - count) / (360.0 - plain[0])
        out = fine_weights(noisy, tree, total=360.0, noise_std=40.0, piles={0: count})
        assert out[0] == count and out.sum() == pytest.approx(360.0)
        for name, w in (("tree", plain), ("scaled", scaled), ("taken out", out)):
            spread[name].append(float(w[1:64].sum()))  # the pile's quarter, but the pile: truly empty
    means = {name: float(np.mean(v)) for name, v in spread.items()}
    assert means["tree"] > 60 and means["scaled"] > 40 and means["taken out"] < means["scaled"] / 2, means


def test_a_pile_on_a_bound_survives_few_records_at_eps_1():
    """psid1976's pattern (issue 94): 400 records, 39 % of them at 0 of a sliced column (0 hours of 0 … 5 000),
    the others spread over it, and a class that the pile decides. At ε = 1 the trees' noise spread the pile over
    its neighbours (0 hours shared its cell with 79 to 293 fine cells; its share in the samples 0.04–0.07, before
    the bounds were counted); the bound's count in the repeated-values release makes it a cell of its own, and the
    samples hold it within 0.15 of the records' share (0.41–0.47), in each of three noise draws."""
    from swflow.pipeline.tables import TableSynthesizer

    rng = np.random.default_rng(4)
    n = 400
    works = rng.random(n) > 0.45
    hours = np.where(works, rng.integers(200, 3000, n), 0)
    frame = pd.DataFrame({"works": np.where(works, "yes", "no"), "hours": hours,
                          "age": rng.integers(20, 60, n), "rate": rng.uniform(0, 100, n).round(2)})
    schema = {"columns": [{"name": "works", "type": "categorical", "categories": ["no", "yes"]},
                          {"name": "hours", "type": "numeric", "min": 0, "max": 5000, "integer": True},
                          {"name": "age", "type": "numeric", "min": 0, "max": 100, "integer": True},
                          {"name": "rate", "type": "numeric", "min": 0, "max": 100, "decimals": 2}]}
    for seed in range(3):
        syn = TableSynthesizer(schema=schema, epsilon=1.0, delta=1e-9, privacy_seed=seed, count_noise="gaussian",
                               steps=300)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # few records at eps 1: the little-to-learn warning
            syn.fit(frame)
        assert list(syn.codec.cells[1].starts[:2]) == [0, 1]  # 0 hours: a cell of one fine cell
        share = float((syn.sample(4000, seed=seed)["hours"] == 0).mean())
        assert abs(share - (~works).mean()) < 0.15, (seed, share)


def test_an_atom_is_a_cell_one_value_wide_that_decodes_as_itself():
    from swflow.tables.cells import FineGrid
    from swflow.tables.schema import Schema

    column = Schema.from_json(SCHEMA).columns[0]
    plain, grid = FineGrid(column), FineGrid(column, (3.3021, V, 9.0))
    assert grid.size == plain.size + 2 + 2 + 1  # 9.0 sits on a slice's edge already: one cell more
    probe = pd.Series([V, float(np.float32(V)), V - 0.002, V + 0.002, 3.3021, 9.0, 8.99, 0.0, 12.0])
    cells = grid.index(probe)
    assert cells[0] == cells[1] and len(set(cells[[0, 2, 3]])) == 3  # the float32 reading joins it, neighbours not
    drawn = grid.draw(cells, np.random.default_rng(0))
    assert drawn[0] == V and drawn[4] == 3.3021 and drawn[5] == 9.0 and 8.9 < drawn[6] < 9.0
    assert (grid.prior[cells[[0, 4, 5]]] == 0).all() and grid.prior[cells[6]] == 1  # a uniform draw never hits one
    for bad in [(12.0,), (V, 3.3021), (float("nan"),)]:
        with pytest.raises(ValueError, match="atoms"):
            FineGrid(column, bad)
    whole = Schema.from_json({"columns": [{"name": "k", "type": "numeric", "min": 0, "max": 99,
                                           "integer": True}]}).columns[0]
    with pytest.raises(ValueError, match="no atoms"):
        FineGrid(whole, (4.0,))


@pytest.mark.parametrize("adjacency", ["replace-one", "add-remove"])
def test_named_values_come_back_exactly_and_the_claim_survives_a_reload(tmp_path, adjacency):
    from swflow.pipeline.tables import TableSynthesizer

    frame = _frame(4000)
    syn = TableSynthesizer(schema=SCHEMA, epsilon=2.0, delta=1e-7, steps=100, repeated_values=True,
                           adjacency=adjacency).fit(frame)
    assert V in syn._atoms[0]
    samples = syn.sample(4000, seed=1)
    assert abs((samples.x == V).mean() - (frame.x == V).mean()) < 0.05
    assert (samples.g[samples.x == V] == "a").mean() > 0.8  # its association comes with it
    report = syn.privacy_report()
    values_event = report.ledger[1]
    assert values_event["delta_sensitivity"] == pytest.approx(1e-8) and values_event["n_projections"] == 1
    assert report.delta == pytest.approx(1e-7, rel=1e-9) and report.epsilon <= 2.0 * (1 + 1e-9)
    assert report.run_config["repeated_values_columns"] == ["x"]
    plain = TableSynthesizer(schema=SCHEMA, epsilon=2.0, delta=1e-7, steps=100, adjacency=adjacency,
                             repeated_values=False).fit(frame)
    assert (plain.sample(4000, seed=1).x == V).mean() == 0  # without the release, a value inside a slice is lost
    loaded = TableSynthesizer.load(syn.save(tmp_path / "table.pt"))
    assert loaded._atoms == syn._atoms and loaded.repeated_values
    assert loaded.sample(200, seed=3).equals(syn.sample(200, seed=3))


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    from swflow.pipeline.tables import TableSynthesizer

    syn = TableSynthesizer(schema=SCHEMA, epsilon=2.0, delta=1e-7, steps=20)  # named by default
    return syn.fit(_frame(3000)).save(tmp_path_factory.mktemp("values") / "table.pt")


def _named_count_lowered(blob):
    values, counts = blob["measurements"]["repeated values"][0]
    inside = (values > 0) & (values < 12)  # a bound's count may be anything: public
    blob["measurements"]["repeated values"][0] = [values, torch.where(inside, 1.0, counts)]  # below the threshold


def _value_outside_bounds(blob):
    values, counts = blob["measurements"]["repeated values"][0]
    blob["measurements"]["repeated values"][0] = [torch.cat([values, torch.tensor([12.5])]),
                                                  torch.cat([counts, counts[:1]])]


def _release_dropped(blob):
    del blob["measurements"]["repeated values"]


def _delta_understated(blob):
    blob["report"]["ledger"][1]["delta_sensitivity"] = 1e-30


@pytest.mark.parametrize("forgery", [_named_count_lowered, _value_outside_bounds, _release_dropped,
                                     _delta_understated])
def test_a_forged_repeated_values_release_is_refused(saved, tmp_path, forgery):
    from swflow.pipeline.tables import TableSynthesizer
    from swflow.privacy.verify import ClaimMismatch

    blob = torch.load(saved, weights_only=True)
    forgery(blob)
    torch.save(blob, tmp_path / "forged.pt")
    with pytest.raises(ClaimMismatch):
        TableSynthesizer.load(tmp_path / "forged.pt")


def test_the_command_line_names_repeated_values_and_samples_the_run(tmp_path):
    import json

    from swflow.cli import main
    from swflow.tables.schema import Schema

    _frame(2000).to_csv(tmp_path / "private.csv", index=False)
    Schema.from_json(SCHEMA).write(tmp_path / "schema.json")
    runs = {flag: tmp_path / f"run{len(flag)}" for flag in ((), ("--no-repeated-values",))}
    for flag, run in runs.items():
        assert main(["generate", "--table", str(tmp_path / "private.csv"), "--schema", str(tmp_path / "schema.json"),
                     "--epsilon", "3", "--delta", "1e-7", "--steps", "20", "--quiet", *flag, "--out", str(run)]) == 0
        assert main(["sample", str(run), "--n", "20", "--out", str(run.with_name(run.name + "-more"))]) == 0
    named, plain = (json.loads((run / "privacy.json").read_text()) for run in runs.values())
    assert named["run_config"]["repeated_values_columns"] == ["x"] and len(named["ledger"]) == 3
    assert plain["run_config"]["repeated_values_columns"] == [] and len(plain["ledger"]) == 2
    assert (pd.read_csv(runs[()] / "samples.csv").x == V).mean() > 0.2
    assert (pd.read_csv(runs[("--no-repeated-values",)] / "samples.csv").x == V).mean() == 0


def _sharded_worker(rank, world, store, out, rows):
    import torch.distributed as dist

    from swflow.privacy.values import ShardedValuesTarget

    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world)
    lo, hi = len(rows) * rank // world, len(rows) * (rank + 1) // world
    target, _ = _values_target(rows, multiplier=1.0, delta=1e-3, seed=5)
    sharded = ShardedValuesTarget(torch.tensor(rows[lo:hi], dtype=torch.float64), target._calibration,
                                  noise=target._noise, ledger=target.ledger, inside=target.inside, delta=1e-3,
                                  dataset_size=len(rows))
    torch.save(sharded.release_values(), f"{out}.rank{rank}")
    dist.destroy_process_group()


def test_two_processes_name_the_values_one_process_names(tmp_path):
    """torchrun: each rank counts its shard, the counts are summed over ranks and rank 0's noise is shared, so the
    release is the one a single process makes on every record (the same seeded float noise)."""
    import torch.multiprocessing as mp

    rng = np.random.default_rng(3)
    rows = np.column_stack([rng.choice([7.0, 8.5, 20.0, 33.3], 300), rng.uniform(10, 90, 300).round(0)])
    out = tmp_path / "values"
    mp.spawn(_sharded_worker, args=(2, str(tmp_path / "store"), str(out), rows), nprocs=2, join=True)
    ranks = [torch.load(f"{out}.rank{r}", weights_only=True) for r in range(2)]
    single = _values_target(rows, multiplier=1.0, delta=1e-3, seed=5)[0].release_values()
    for a, b, c in zip(ranks[0], ranks[1], single):
        assert torch.equal(a[0], c[0]) and torch.equal(b[0], c[0]) and torch.allclose(a[1], c[1])
        assert torch.equal(a[1], b[1])
    assert len(single[0][0]) == 4 + 2  # the four values and the two bounds
    assert 2 < len(single[1][0]) < len(np.unique(rows[:, 1])) + 2  # rare values unnamed
