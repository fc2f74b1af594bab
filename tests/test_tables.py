"""The table schema and codec (issue 51): declared, never read from private rows; every decoded row valid."""
import json

import numpy as np
import pandas as pd
import pytest

from swflow.tables import Schema, SchemaError, TableCodec

SCHEMA = {"columns": [{"name": "age", "type": "numeric", "min": 17, "max": 90, "integer": True},
                      {"name": "hours", "type": "numeric", "min": 1, "max": 12, "integer": True},
                      {"name": "income", "type": "numeric", "min": 0.0, "max": 1000.0},
                      {"name": "sex", "type": "categorical", "categories": ["Female", "Male"]},
                      {"name": "job", "type": "categorical", "categories": ["a", "b", "c", None]}]}


def _table(n=500, seed=0):
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"age": rng.integers(17, 91, n), "hours": rng.integers(1, 13, n),
                         "income": rng.uniform(0, 1000, n), "sex": rng.choice(["Female", "Male"], n),
                         "job": rng.choice(np.array(["a", "b", "c", None], dtype=object), n)})


def test_records_become_unit_rows_and_come_back_as_the_same_cells():
    schema = Schema.from_json(SCHEMA)
    codec = TableCodec(schema)
    table = _table()
    rows = codec.encode(table)
    assert rows.shape == (500, 16 + 12 + 16 + 2 + 4) and np.allclose(np.linalg.norm(rows, axis=1), 1.0)
    back = codec.decode(rows)
    assert list(back.columns) == schema.names
    # categories and whole-number columns with few values come back exactly; binned numbers stay in their bin
    assert (back["sex"] == table["sex"]).all() and (back["hours"] == table["hours"]).all()
    assert all((pd.isna(a) and pd.isna(b)) or a == b for a, b in zip(back["job"], table["job"]))
    assert np.array_equal(codec.cell_index(schema.check(back)), codec.cell_index(schema.check(table)))


def test_any_vector_decodes_to_a_valid_record():
    schema = Schema.from_json(SCHEMA)
    codec = TableCodec(schema)
    noise = np.random.default_rng(1).normal(size=(2000, codec.dim)) * 5
    back = codec.decode(noise)
    assert len(schema.check(back)) == 2000  # raises on any invalid value
    assert back["age"].dtype == np.int64 and back["age"].between(17, 90).all()
    assert back["income"].between(0, 1000).all() and back["hours"].between(1, 12).all()


def test_schema_errors_name_the_column_and_the_rule_without_a_count_a_position_or_a_value():
    """Issue 59: an error about private rows gave their count (a statistic without noise); now it names the
    column and the rule only."""
    schema = Schema.from_json(SCHEMA)
    table = _table()
    table.loc[[3, 9], "age"] = 150
    with pytest.raises(SchemaError, match=r"column 'age': some rows lie outside \[17, 90\]") as err:
        schema.check(table)
    assert not any(str(k) in str(err.value).replace("[17, 90]", "") for k in (150, 2, 3, 9))
    assert schema.check(table, clip=True)["age"].max() == 90
    for bad in ("X", None):  # a value outside the categories, and a missing one: the same message, no count
        table = _table()
        table.loc[5, "sex"] = bad
        with pytest.raises(SchemaError, match=r"'sex': some rows hold values outside its declared categories") as err:
            schema.check(table)
        assert not any(ch.isdigit() for ch in str(err.value))
    with pytest.raises(SchemaError, match="lacks the schema's columns"):
        schema.check(_table().drop(columns="job"))
    for bad in ({"columns": []}, {"columns": [{"name": "x", "type": "numeric", "min": 2, "max": 1}]},
                {"columns": [{"name": "x", "type": "text"}]}, {"columns": [{"name": "x", "type": "numeric"}]},
                {"columns": [{"name": "x", "type": "categorical", "categories": ["a", "a"]}]}, []):
        with pytest.raises(SchemaError):
            Schema.from_json(bad)


def test_schema_json_and_table_files_round_trip(tmp_path):
    schema = Schema.from_json(SCHEMA)
    assert Schema.read(schema.write(tmp_path / "s.json")) == schema
    assert json.loads((tmp_path / "s.json").read_text()) == SCHEMA
    table = schema.check(_table())
    for suffix in ("csv", "parquet"):
        path = tmp_path / f"t.{suffix}"
        (table.to_csv(path, index=False) if suffix == "csv" else table.to_parquet(path, index=False))
        read = pd.read_csv(path, keep_default_na=True) if suffix == "csv" else pd.read_parquet(path)
        again = schema.check(read)
        assert again["age"].tolist() == table["age"].tolist()
        assert all((pd.isna(a) and pd.isna(b)) or a == b for a, b in zip(again["job"], table["job"]))


def test_a_proposed_schema_reads_public_rows_only_and_covers_them():
    public = _table(seed=3)
    schema = Schema.propose(public)
    kinds = {c.name: c.kind for c in schema.columns}
    assert kinds == {"age": "numeric", "hours": "categorical", "income": "numeric", "sex": "categorical",
                     "job": "categorical"}
    assert None in schema.columns[4].categories
    assert len(schema.check(public)) == len(public)


# -- the release: exact without noise, the stated error with it, sensitivity sqrt(2K) ---------------------------------
def _target(frame, schema, pairs, epsilon=None, seed=0, count_noise="gaussian"):
    import torch

    from swflow.privacy import NoiseSource, PrivacyLedger, PrivacySpec, ReleasePlan, calibrate
    from swflow.privacy.marginals import MarginalTarget

    codec = TableCodec(schema)
    rows = torch.from_numpy(codec.encode(frame))
    cal = None if epsilon is None else calibrate(
        PrivacySpec(epsilon=epsilon, delta=1e-6, count_noise=count_noise),
        ReleasePlan(releases=1, dataset_size=len(rows), sample_size=None, n_projections=len(pairs), dim=codec.dim,
                    noise=count_noise))
    return MarginalTarget(rows, cal, noise=NoiseSource(seed), ledger=PrivacyLedger(), blocks=codec.blocks(),
                          pairs=pairs), codec


def test_a_two_column_table_gives_back_its_known_marginal_and_stays_within_the_stated_noise():
    schema = Schema.from_json({"columns": [SCHEMA["columns"][3], SCHEMA["columns"][4]]})
    frame = _table(3000)[["sex", "job"]]
    exact = pd.crosstab(frame["sex"], frame["job"].fillna("<none>"))  # the reference: pandas, not our counting
    expected = np.array([[exact.loc[s, j] if j in exact.columns else 0 for j in ("a", "b", "c", "<none>")]
                         for s in ("Female", "Male")])
    target, _ = _target(frame, schema, [(0, 1)])
    (table,) = target.release_tables()
    assert np.array_equal(table.numpy(), expected)
    # with noise: 400 independent releases of the 8 cells; the error's spread is the stated std (within 10%)
    errors = []
    for seed in range(400):
        noisy_target, _ = _target(frame, schema, [(0, 1)], epsilon=1.0, seed=seed)
        errors.append(noisy_target.release_tables()[0].numpy() - expected)
    errors = np.stack(errors)
    sigma = noisy_target.count_noise_std()
    assert sigma == pytest.approx(noisy_target.calibration.noise_multiplier * np.sqrt(2))
    assert abs(errors.mean()) < 4 * sigma / np.sqrt(errors.size)
    assert errors.std() == pytest.approx(sigma, rel=0.1)


def test_replacing_one_record_moves_the_tables_by_at_most_sqrt_2k():
    import itertools

    import torch

    from swflow.privacy.marginals import pair_counts

    schema = Schema.from_json(SCHEMA)
    codec = TableCodec(schema)
    sizes = [b - a for a, b in codec.blocks()]
    pairs = list(itertools.combinations(range(5), 2))
    base = torch.from_numpy(codec.cell_index(schema.check(_table(50))))
    largest = 0.0
    rng = np.random.default_rng(0)
    for _ in range(300):  # replace record 0 by any record of the domain
        other = base.clone()
        other[0] = torch.tensor([rng.integers(0, k) for k in sizes])
        diff = (pair_counts(other, sizes, pairs) - pair_counts(base, sizes, pairs)).double()
        largest = max(largest, float(diff.norm()))
    assert largest == pytest.approx(np.sqrt(2 * len(pairs)))  # reached: a record differing in every column


def test_the_particles_reach_the_tables_without_noise():
    from swflow.tables import example_table
    from swflow.pipeline.tables import TableSynthesizer

    frame, schema = example_table(4000)
    syn = TableSynthesizer(schema=schema, epsilon=float("inf"), steps=600, resolution="uniform").fit(frame)
    assert not syn.privacy_report().private
    samples = syn.sample(20000, seed=1)
    codec = syn.codec
    real, fake = (codec.cell_index(schema.check(f)) for f in (frame, samples))
    for i, j in syn.pairs:  # every two-way marginal within TV 0.05 (sampling error of 4 000 rows is about 0.02)
        size = (len(codec.cells[i]), len(codec.cells[j]))
        def table(cells):
            return np.bincount(np.ravel_multi_index((cells[:, i], cells[:, j]), size),
                               minlength=size[0] * size[1]) / len(cells)
        assert 0.5 * np.abs(table(real) - table(fake)).sum() < 0.05


# -- the command line: CSV and Parquet in, the same format out; forgeries refused ------------------------------------
@pytest.mark.parametrize("suffix", ["csv", "parquet"])
def test_a_small_table_runs_end_to_end(tmp_path, suffix, capsys):
    from swflow.cli import main
    from swflow.tables import example_table

    frame, schema = example_table(1500)
    private = tmp_path / f"private.{suffix}"
    frame.to_csv(private, index=False) if suffix == "csv" else frame.to_parquet(private, index=False)
    schema.write(tmp_path / "schema.json")
    run = tmp_path / "run"
    assert main(["generate", "--table", str(private), "--schema", str(tmp_path / "schema.json"), "--method",
                 "dpswflow-hist", "--epsilon", "1", "--delta", "1e-6", "--steps", "200", "--quiet",
                 "--out", str(run)]) == 0
    samples = pd.read_csv(run / "samples.csv") if suffix == "csv" else pd.read_parquet(run / "samples.parquet")
    assert list(samples.columns) == schema.names and len(samples) == 1500
    assert len(schema.check(samples)) == 1500  # every synthetic row valid
    report = json.loads((run / "privacy.json").read_text())
    assert report["epsilon"] <= 1.0 and report["n_projections"] == 10 and report["sensitivity"] == pytest.approx(
        np.sqrt(20))
    assert "two-way tables" in report["release"]
    assert main(["sample", str(run), "--n", "30", "--out", str(tmp_path / "more")]) == 0
    more = tmp_path / "more" / f"samples.{suffix}"
    assert len(pd.read_csv(more) if suffix == "csv" else pd.read_parquet(more)) == 30
    # no private row is printed, and a private value outside the schema is refused by its column's rule only
    frame.loc[[1, 2, 3], "age"] = 95
    frame.to_csv(tmp_path / "bad.csv", index=False)
    capsys.readouterr()
    assert main(["generate", "--table", str(tmp_path / "bad.csv"), "--schema", str(tmp_path / "schema.json"),
                 "--method", "dpswflow-hist", "--epsilon", "1", "--out", str(tmp_path / "bad")]) == 2
    err = capsys.readouterr().err.replace(str(tmp_path), "")  # pytest's folder name may hold any number
    assert "column 'age': some rows lie outside [18, 80]" in err and "95" not in err and "3 row" not in err


def test_a_table_run_claiming_more_noise_or_another_size_is_refused(tmp_path):
    import torch

    from swflow.privacy import MechanismEvent, epsilon_from_events, statement
    from swflow.privacy.verify import ClaimMismatch
    from swflow.tables import example_table
    from swflow.pipeline.tables import TableSynthesizer

    frame, schema = example_table(1500)
    path = TableSynthesizer(schema=schema, epsilon=1.0, delta=1e-6, steps=50).fit(frame).save(tmp_path / "t.pt")
    TableSynthesizer.load(path)  # untouched: accepted
    for forgery in ("noise x10", "size x10"):
        blob = torch.load(path, weights_only=True)
        report = blob["report"]
        for e in report["ledger"]:
            if forgery == "noise x10":
                e["noise_multiplier"] *= 10
                e["noise_std"] *= 10
            else:
                e["dataset_size"] *= 10
                e["sample_size"] *= 10
        main_event = report["ledger"][0]
        report.update(noise_multiplier=main_event["noise_multiplier"], noise_std=main_event["noise_std"],
                      dataset_size=main_event["dataset_size"])
        report["run_config"]["dataset_size"] = main_event["dataset_size"]
        events = tuple(MechanismEvent(**e) for e in report["ledger"])
        report["epsilon"] = epsilon_from_events(events, delta=report["delta_accountant"], adjacency="replace-one")
        report["target_epsilon"] = blob["privacy"]["epsilon"] = report["epsilon"]
        report["statement"] = statement(report["epsilon"], report["delta"], report["accountant"], report["adjacency"])
        torch.save(blob, tmp_path / "forged.pt")
        with pytest.raises(ClaimMismatch, match="chi-square"):
            TableSynthesizer.load(tmp_path / "forged.pt")


def test_a_claim_the_read_back_cannot_test_is_said_to_be_untested(tmp_path):
    """One table (two columns): only its total can be tested, so σ × 100 with ε recomputed passes the χ² (issue 59).
    The loaded report says so, whatever the file's own notes claim; three columns, all pairs, are tested."""
    import torch

    from swflow.privacy import MechanismEvent, epsilon_from_events, statement
    from swflow.pipeline.tables import TableSynthesizer

    rng = np.random.default_rng(0)
    two = {"columns": SCHEMA["columns"][3:]}
    frame = pd.DataFrame({"sex": rng.choice(["Female", "Male"], 3000), "job": rng.choice(["a", "b", "c"], 3000)})
    path = TableSynthesizer(schema=two, epsilon=1.0, delta=1e-6, steps=50, count_noise="gaussian").fit(frame).save(
        tmp_path / "t.pt")
    blob = torch.load(path, weights_only=True)
    report = blob["report"]
    for e in report["ledger"]:
        e["noise_multiplier"] *= 100
        e["noise_std"] *= 100
    report.update(noise_multiplier=report["ledger"][0]["noise_multiplier"], noise_std=report["ledger"][0]["noise_std"])
    report["epsilon"] = epsilon_from_events(tuple(MechanismEvent(**e) for e in report["ledger"]),
                                            delta=report["delta_accountant"], adjacency="replace-one")
    report["target_epsilon"] = blob["privacy"]["epsilon"] = report["epsilon"]
    report["statement"] = statement(report["epsilon"], report["delta"], report["accountant"], report["adjacency"])
    report["noise_check"] = "tested on read-back"
    torch.save(blob, tmp_path / "forged.pt")
    loaded = TableSynthesizer.load(tmp_path / "forged.pt")
    assert report["epsilon"] < 0.02
    assert loaded.privacy_report().notes["noise_check"].startswith("pair tables: UNTESTED")
    three = TableSynthesizer(schema=SCHEMA, epsilon=1.0, delta=1e-6, steps=20).fit(_table(2000))
    assert three.privacy_report().notes["noise_check"].startswith("pair tables: tested on read-back")


def test_the_synthesizer_takes_a_schema_and_a_frame():
    from swflow import Synthesizer
    from swflow.tables import example_table

    frame, schema = example_table(800)
    syn = Synthesizer("dpswflow-hist", epsilon=1.0, delta=1e-6, schema=schema, steps=50).fit(frame)
    out = syn.sample(100, seed=3)
    assert list(out.columns) == schema.names and out["age"].dtype == np.int64
    assert out.equals(syn.sample(100, seed=3))  # seeded sampling is reproducible
    with pytest.raises(ValueError, match="not 'dpswflow-r'"):
        Synthesizer("dpswflow-r", epsilon=1.0, schema=schema)


@pytest.mark.parametrize("count_noise", ["gaussian", pytest.param("discrete-gaussian", marks=pytest.mark.slow)])
@pytest.mark.parametrize("eps", [1.0, 2.0])
def test_the_table_release_audits_below_its_claim_and_above_it_with_half_the_noise(eps, count_noise):
    """White-box audit of the real MarginalTarget (worst-case pair, 4 x 10^6 draws a side): the lower bound stays at or
    below the claim, reaches half of it, and exceeds it when the same code draws half the noise."""
    from swflow.pipeline.audits import table_whitebox_audit

    trials = 4_000_000  # at 10^6 the bound of one draw sits near half the claim at eps = 1 (0.496, seed 0)
    honest = table_whitebox_audit(eps, count_noise=count_noise, trials=trials)["audited_epsilon_lower_bound"]
    assert 0.5 * eps <= honest <= eps
    halved = table_whitebox_audit(eps, count_noise=count_noise, halve_noise=True, trials=trials)
    assert halved["audited_epsilon_lower_bound"] > eps


def test_the_owners_report_is_written_apart_and_says_it_is_not_private(tmp_path, capsys):
    from swflow.cli import main
    from swflow.tables import example_table
    from swflow.tables.metrics import marginal_tvd

    frame, schema = example_table(1500)
    frame.to_csv(tmp_path / "private.csv", index=False)
    example_table(1500, seed=7)[0].to_csv(tmp_path / "held.csv", index=False)
    schema.write(tmp_path / "schema.json")
    run = tmp_path / "run"
    assert main(["generate", "--table", str(tmp_path / "private.csv"), "--schema", str(tmp_path / "schema.json"),
                 "--method", "dpswflow-hist", "--epsilon", "2", "--delta", "1e-6", "--steps", "100", "--quiet",
                 "--out", str(run)]) == 0
    released = sorted(p.name for p in run.iterdir())
    assert main(["evaluate", str(run)]) == 2
    assert "--against" in capsys.readouterr().err
    assert main(["evaluate", str(run), "--against", str(tmp_path / "held.csv"), "--target", "income", "--private",
                 str(tmp_path / "private.csv")]) == 0
    assert sorted(p.name for p in run.iterdir()) == released  # issue 59: nothing added to what a user publishes
    owner = tmp_path / "run.owner"  # beside the run
    assert main(["evaluate", str(run), "--against", str(tmp_path / "held.csv"), "--owner-out", str(run / "o")]) == 2
    assert "outside the run folder" in capsys.readouterr().err
    assert sorted(p.name for p in owner.iterdir()) == ["OWNER_ONLY.txt", "associations.png", "marginals.png",
                                                       "metrics.json"]
    metrics = json.loads((owner / "metrics.json").read_text(), parse_constant=lambda c: pytest.fail(f"not JSON: {c}"))
    assert "OWNER ONLY" in metrics["owner_only"] and 0 <= metrics["accuracy"] <= 1
    ledger = json.loads((run / "privacy.json").read_text())["ledger"]  # issue 95: each release by its name
    assert [r["measurement"] for r in metrics["releases"]] == [e["measurement"] for e in ledger]
    assert metrics["releases"][0]["measurement"] == "pair tables" and "one-way trees" in [e["measurement"] for e in ledger]
    assert [r["noise_std"] for r in metrics["releases"]] == [e["noise_std"] for e in ledger]
    closest = metrics["closest_records"]  # a release at eps 2 copies no more private rows than held-out rows match
    assert closest["synthetic_identical_to_a_private_row"] <= closest["held_out_identical_to_a_private_row"] + 0.1
    # the TVD is the same function of the two files (checked against a recount by pandas)
    synthetic = pd.read_csv(run / "samples.csv")
    held = pd.read_csv(tmp_path / "held.csv")
    assert metrics["tvd_2way"] == pytest.approx(marginal_tvd(schema, schema.check(synthetic),
                                                             schema.check(held))["tvd_2way"])
    def binned(frame, column):  # numbers at the held-out deciles, categories as they are (missing included)
        if column in ("age", "hours"):
            edges = np.unique(np.quantile(held[column], np.linspace(0.1, 0.9, 9)))
            return pd.Series(np.searchsorted(edges, frame[column], side="right"))
        return frame[column].fillna("<missing>")

    one_way = [0.5 * (binned(synthetic, c).value_counts(normalize=True)
                      .sub(binned(held, c).value_counts(normalize=True), fill_value=0).abs().sum())
               for c in schema.names]
    assert metrics["tvd_1way"] == pytest.approx(np.mean(one_way))
    assert metrics["tvd_1way_by_column"] == pytest.approx(dict(zip(schema.names, one_way)), abs=1e-6)
    worst = [entry["tvd"] for entry in metrics["tvd_2way_worst_pairs"]]
    assert len(worst) == 10 and worst == sorted(worst, reverse=True)  # 10 pairs of 5 columns, largest first
    assert np.mean(worst) == pytest.approx(metrics["tvd_2way"], abs=1e-6)  # every pair: their mean is the mean


def test_a_wide_tables_marginals_show_the_columns_that_differ_most(tmp_path):
    from PIL import Image

    from swflow.tables.report import MAX_PANELS, _marginals_picture, _scores, _worst_columns
    from swflow.tables.metrics import decile_edges
    from swflow.tables.schema import Schema

    rng = np.random.default_rng(0)
    schema = Schema.from_json({"columns": [{"name": f"x{j}", "type": "numeric", "min": 0, "max": 1}
                                           for j in range(30)]})
    held = pd.DataFrame(rng.uniform(size=(500, 30)), columns=schema.names)
    synthetic = held.copy()
    synthetic[["x3", "x17"]] = rng.uniform(size=(500, 2)) ** 4  # two columns far off
    scores = _scores(schema, schema.check(synthetic), schema.check(held))
    assert set(scores["tvd_1way_by_column"]) == set(schema.names)
    assert {tuple(p["columns"]) for p in scores["tvd_2way_worst_pairs"][:2]} <= {
        (f"x{i}", f"x{j}") for i in range(30) for j in range(i + 1, 30) if {3, 17} & {i, j}}
    shown = _worst_columns(scores["tvd_1way_by_column"])
    assert len(shown) == MAX_PANELS and {"x3", "x17"} <= set(shown)
    _marginals_picture(schema, synthetic, held, decile_edges(schema, held), tmp_path / "m.png", shown=shown)
    width, height = Image.open(tmp_path / "m.png").size
    assert height <= 100 * (2.6 * MAX_PANELS / 4 + 0.6) + 1  # 6 rows of panels, not 8


def test_a_file_is_counted_chunk_by_chunk_as_it_would_be_in_memory(tmp_path):
    import itertools

    import torch

    from swflow.privacy import PrivacyLedger
    from swflow.privacy.marginals import MarginalTarget
    from swflow.privacy.noise import NoiseSource
    from swflow.tables import example_table
    from swflow.tables.files import TableRows

    frame, schema = example_table(1234)
    frame.to_csv(tmp_path / "t.csv", index=False)
    frame.to_parquet(tmp_path / "t.parquet", index=False)
    codec = TableCodec(schema)
    pairs = list(itertools.combinations(range(5), 2))

    def counts(data):
        target = MarginalTarget(data, None, noise=NoiseSource(0), ledger=PrivacyLedger(), blocks=codec.blocks(),
                                pairs=pairs)
        return torch.cat([t.flatten() for t in target.release_tables()])

    in_memory = counts(torch.from_numpy(codec.encode(frame)))
    for name in ("t.csv", "t.parquet"):
        rows = TableRows(tmp_path / name, codec, chunk_rows=100)
        assert rows.shape == (1234, codec.dim) and [o for o, _ in rows.chunks()][:3] == [0, 100, 200]
        assert torch.equal(counts(rows), in_memory)


def test_a_frame_is_held_as_its_cells_and_counted_chunk_by_chunk_with_its_weights():
    """A frame's records reach the release as cells (n, C), never as one-hot rows (n, D): the weighted tables,
    counted over chunks of 7 records, are pandas' weighted crosstab of the frame's cells; the source holds
    n × C numbers, and its one-hot chunks are the codec's rows."""
    import torch

    from swflow.privacy import PrivacyLedger
    from swflow.privacy.marginals import MarginalTarget
    from swflow.privacy.noise import NoiseSource
    from swflow.tables import example_table
    from swflow.tables.source import FrameCells, TableSource

    frame, schema = example_table(301)
    codec = TableCodec(schema)
    source = TableSource(codec).encode(frame)
    assert isinstance(source, FrameCells) and source.shape == (301, codec.dim)
    assert source.cells.numel() == 301 * len(schema.names)
    source.chunk_rows = 7
    assert torch.equal(torch.cat([rows for _, rows in source.chunks()]), torch.from_numpy(codec.encode(frame)))
    weights = torch.from_numpy(np.random.default_rng(3).uniform(0.1, 1.0, 301))
    pairs = [(0, 2), (1, 4)]
    target = MarginalTarget(source, None, noise=NoiseSource(0), ledger=PrivacyLedger(), blocks=codec.blocks(),
                            pairs=pairs).weighted(weights, 1)
    tables = target.release_tables()
    cells = pd.DataFrame(codec.cell_index(schema.check(frame)))
    for (i, j), table in zip(pairs, tables):
        expected = pd.crosstab(cells[i], cells[j], values=weights.numpy(), aggfunc="sum").fillna(0)
        expected = expected.reindex(index=range(codec.sizes[i]), columns=range(codec.sizes[j]), fill_value=0)
        np.testing.assert_allclose(table.numpy(), expected.to_numpy(), rtol=1e-12, atol=1e-12)


def test_records_draw_their_cells_from_their_own_particles_chunk_by_chunk():
    """Sampling draws a chunk of records at a time (memory chunk × cells): each record still follows its own
    particle (particle 1 never gives cell 0) at the particle's probabilities (tolerance 0.015: over 4 standard
    deviations of a share over 20 000 draws)."""
    import torch

    from swflow.tables.flow import _draw_cells

    probabilities = torch.tensor([[0.7, 0.2, 0.1], [0.0, 0.5, 0.5]])
    owner = torch.arange(40_000) % 2
    cells = _draw_cells(probabilities, owner, torch.Generator().manual_seed(0), chunk=999)
    assert cells.shape == (40_000,) and not bool((cells[owner == 1] == 0).any())
    for particle in (0, 1):
        share = torch.bincount(cells[owner == particle], minlength=3) / 20_000
        assert torch.allclose(share, probabilities[particle], atol=0.015)


def test_a_release_whose_noise_swamps_what_it_counts_says_so():
    """40 rows at ε = 1 hold little beyond the schema (each count's noise std is larger than half the rows): the run
    warns that its samples may be no closer to the data than uniform records. 3 000 rows at ε = 10 say nothing.
    Replace-one, so n is public and the rule (records < 2 σ) reads no noise: each side is certain."""
    import warnings

    from swflow.pipeline.tables import LITTLE_TO_LEARN_STDS, TableSynthesizer
    from swflow.tables import example_table

    frame, schema = example_table(3000)
    with pytest.warns(UserWarning, match="holds little beyond the schema") as caught:
        few = TableSynthesizer(schema=schema, epsilon=1.0, delta=1e-7, steps=10).fit(frame.iloc[:40])
    report = few.privacy_report()
    assert report.dataset_size == 40 < LITTLE_TO_LEARN_STDS * report.noise_std
    said = next(str(w.message) for w in caught if "holds little" in str(w.message))
    assert f"std {report.noise_std:,.0f}" in said and "about 40 records" in said
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        many = TableSynthesizer(schema=schema, epsilon=10.0, delta=1e-7, steps=10).fit(frame)
    assert many.privacy_report().dataset_size > LITTLE_TO_LEARN_STDS * many.privacy_report().noise_std
    assert not [w for w in caught if "holds little" in str(w.message)]


def test_closest_records_against_a_brute_force_count():
    """closest_records (the owner's --private): every share and median recounted by plain loops over the coded
    rows; a sample that copies the private rows is all identical, held-out rows far less."""
    from swflow.tables import example_table
    from swflow.tables.metrics import closest_records, decile_edges, discretize

    private, schema = example_table(300, seed=1)
    held = example_table(300, seed=2)[0]
    synthetic = pd.concat([private.iloc[:100], example_table(200, seed=3)[0]], ignore_index=True)
    got = closest_records(schema, schema.check(synthetic), schema.check(private), schema.check(held))["closest_records"]
    edges = decile_edges(schema, schema.check(held))
    s, p, h = (discretize(schema, schema.check(f), edges) for f in (synthetic, private, held))
    nearest = lambda a, b: np.array([min(int((x != y).sum()) for y in b) for x in a])  # noqa: E731
    to_private, to_held, held_to_private = nearest(s, p), nearest(s, h), nearest(h, p)
    assert got["synthetic_identical_to_a_private_row"] == pytest.approx(np.mean(to_private == 0))
    assert got["held_out_identical_to_a_private_row"] == pytest.approx(np.mean(held_to_private == 0))
    assert got["synthetic_median_distance_to_private"] == np.median(to_private)
    assert got["synthetic_closer_to_private_than_to_held_out"] == pytest.approx(np.mean(to_private < to_held))
    assert got["synthetic_identical_to_a_private_row"] >= 100 / 300  # the copied third at least
    copies = closest_records(schema, schema.check(private), schema.check(private), schema.check(held))
    assert copies["closest_records"]["synthetic_identical_to_a_private_row"] == 1.0
