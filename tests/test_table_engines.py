"""Tables counted where they live (swflow/tables/engines.py, cell_sql.py): DuckDB's release is pandas', count for
count, for the same rows, schema, settings and privacy seed; its refusals are pandas', word for word."""
import json
import warnings

import numpy as np
import pandas as pd
import pytest
import torch

from swflow.pipeline.tables import TableSynthesizer
from swflow.tables.cell_sql import ColumnSQL, count_at_or_below, thresholds
from swflow.tables.cells import FineGrid
from swflow.tables.example import example_table
from swflow.tables.schema import Schema

duckdb = pytest.importorskip("duckdb")

RICH = Schema.from_json({"columns": [
    {"name": "amount", "type": "numeric", "min": 0, "max": 200000, "scale": "log", "decimals": 2, "missing": True},
    {"name": "rate", "type": "numeric", "min": 0, "max": 10, "decimals": 3},
    {"name": "day", "type": "date", "min": "2019-01-01", "max": "2023-12-31", "missing": True},
    {"name": "hour", "type": "datetime", "min": "2021-01-01T00:00", "max": "2022-01-01T00:00", "unit": "hour"},
    {"name": "kind", "type": "categorical", "categories": ["a", "b", "c", None]},
    {"name": "score", "type": "numeric", "min": -5, "max": 5},
    {"name": "code", "type": "categorical", "categories": [1, 2, 3]}]})


def rich_table(n: int = 3000, seed: int = 3) -> pd.DataFrame:
    """Made-up rows with what a real table has: a log-scale amount with a pile and missing values, piles inside a
    real column's bounds (named by the repeated-values release), values outside the bounds (clipped), dates with
    missing ones, hourly times, a category with missing values, numeric categories."""
    rng = np.random.default_rng(seed)
    amount = np.clip(np.round(rng.lognormal(5, 2, n), 2), 0, 2e5)
    amount[rng.uniform(size=n) < 0.2] = 1000.0
    amount[rng.uniform(size=n) < 0.05] = np.nan
    rate = np.round(rng.uniform(0, 10, n), 3)
    rate[rng.uniform(size=n) < 0.2], rate[:30] = 5.0, 12.5
    score = rng.normal(0, 1, n)
    score[rng.uniform(size=n) < 0.2] = 1.25
    day = pd.Series(pd.Timestamp("2020-01-01") + pd.to_timedelta(rng.integers(0, 900, n), unit="D"))
    day = day.astype("datetime64[us]").where(rng.uniform(size=n) >= 0.1)
    hour = pd.Series(pd.Timestamp("2021-03-01") + pd.to_timedelta(rng.integers(0, 10**7, n), unit="s"))
    return pd.DataFrame({"amount": amount, "rate": rate, "day": day, "hour": hour.astype("datetime64[us]"),
                         "kind": rng.choice(["a", "b", "c", None], n, p=[.5, .3, .15, .05]), "score": score,
                         "code": rng.choice([1, 2, 3], n)})


def fitted(table, schema, engine, **settings):
    syn = TableSynthesizer(schema=schema, epsilon=3.0, privacy_seed=7, count_noise="gaussian", steps=20,
                           n_particles=200, **settings)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a small table's little-to-learn warning: the same on every engine
        return syn.fit(table, engine=engine)


def assert_same_release(a, b):
    assert b.engine != a.engine or a is b
    assert torch.equal(a._counts, b._counts)
    assert (a._released_levels is None) == (b._released_levels is None)
    if a._released_levels is not None:
        assert torch.equal(a._released_levels, b._released_levels)
    assert a._atoms.keys() == b._atoms.keys() and all(np.array_equal(a._atoms[j], b._atoms[j]) for j in a._atoms)
    assert json.dumps(a.privacy_report().to_json()) == json.dumps(b.privacy_report().to_json())
    pd.testing.assert_frame_equal(a.sample(300, seed=2), b.sample(300, seed=2))


def test_thresholds_give_the_codecs_cells_at_every_float():
    """The SQL cell is first + the thresholds at or below the value: equal to the codec's index on random values,
    on every threshold and on the float just below it, for log, decimal, signed, integer and datetime columns."""
    rng = np.random.default_rng(0)
    for column in RICH.columns:
        if column.kind != "numeric":
            continue
        grid = FineGrid(column, (5.0,) if column.name == "rate" else ())  # an atom's one-value-wide cell too
        low, high = ColumnSQL(column, "number").clip_bounds
        first, steps = thresholds(lambda x: grid.index(pd.Series(x)), low, high)
        x = np.concatenate([rng.uniform(low, high, 20000), steps, np.nextafter(steps, -np.inf), [low, high]])
        x = np.clip(x, low, high)
        assert np.array_equal(first + np.searchsorted(steps, x, side="right"), grid.index(pd.Series(x)))


def test_sql_cells_count_like_searchsorted():
    """count_at_or_below run by DuckDB: numpy's searchsorted on the same floats, at and between the edges."""
    rng = np.random.default_rng(1)
    edges = np.sort(rng.normal(size=300))
    x = np.concatenate([rng.normal(size=5000), edges, np.nextafter(edges, -np.inf)])
    con = duckdb.connect()
    con.register("v", pd.DataFrame({"x": x}))
    got = con.execute(f"SELECT {count_at_or_below('x', edges)} AS c FROM v").fetchnumpy()["c"]
    assert np.array_equal(got, np.searchsorted(edges, x, side="right"))


def test_duckdb_release_is_pandas_on_the_example(tmp_path):
    frame, schema = example_table(2000, seed=1)
    frame.to_parquet(tmp_path / "t.parquet", index=False)
    frame.to_csv(tmp_path / "t.csv", index=False)
    reference = fitted(frame, schema, None)
    assert reference.engine == "pandas"
    for path in ("t.parquet", "t.csv"):
        assert_same_release(reference, fitted(str(tmp_path / path), schema, "duckdb"))
    relation = duckdb.connect().sql(f"SELECT * FROM read_parquet('{tmp_path / 't.parquet'}')")
    assert_same_release(reference, fitted(relation, schema, None))  # a relation: DuckDB by default


def test_duckdb_release_is_pandas_on_dates_logs_piles_and_a_glob(tmp_path):
    frame = rich_table()
    for i, part in enumerate(np.array_split(np.arange(len(frame)), 3)):
        frame.iloc[part].to_parquet(tmp_path / f"part-{i}.parquet", index=False)
    frame.to_csv(tmp_path / "all.csv", index=False)
    reference = fitted(frame, RICH, "pandas", clip=True)
    assert set(reference._atoms) and any(len(a) for a in reference._atoms.values())  # piles named
    glob_run = fitted(str(tmp_path / "part-*.parquet"), RICH, None, clip=True)
    assert glob_run.engine == "duckdb"  # a glob: DuckDB by default
    assert_same_release(reference, glob_run)
    assert_same_release(reference, fitted(str(tmp_path / "all.csv"), RICH, "duckdb", clip=True))
    apart = fitted(frame, RICH, "pandas", clip=True, target="kind")  # 6 of 21 tables: the target's apart
    assert [e["measurement"] for e in apart.privacy_report().ledger][:2] == ["pair tables", "target's tables"]
    assert_same_release(apart, fitted(str(tmp_path / "all.csv"), RICH, "duckdb", clip=True, target="kind"))
    public = rich_table(800, seed=9)  # public rows set the cells and the pairs: the private counts still agree
    assert_same_release(fitted(frame, RICH, "pandas", clip=True, public=public),
                        fitted(str(tmp_path / "part-*.parquet"), RICH, "duckdb", clip=True, public=public))


BAD = {"outside": lambda f: f.assign(age=f.age.where(f.index != 7, 300)),
       "category": lambda f: f.assign(sector=f.sector.where(f.index != 9, "army")),
       "missing": lambda f: f.assign(hours=f.hours.astype(float).where(f.index != 3, np.nan)),
       "fraction": lambda f: f.assign(hours=f.hours.astype(float).where(f.index != 3, 2.5)),
       "text": lambda f: f.assign(hours=f.hours.astype(str).where(f.index != 3, "12,000")),
       "lacks": lambda f: f.drop(columns=["sector"]),
       "extra": lambda f: f.assign(nhs="x")}


@pytest.mark.parametrize("case", sorted(BAD))
def test_refusals_are_pandas_word_for_word(tmp_path, case):
    frame, schema = example_table(300, seed=1)
    bad = BAD[case](frame)
    for path in (tmp_path / "bad.parquet", tmp_path / "bad.csv"):
        bad.to_parquet(path, index=False) if path.suffix == ".parquet" else bad.to_csv(path, index=False)
        words = []
        for engine in ("pandas", "duckdb"):
            with pytest.raises(ValueError) as err:
                fitted(str(path), schema, engine)
            words.append(str(err.value))
        assert words[0] == words[1]
        message = words[1].replace(str(path), "FILE")  # pytest's folder name may hold any number
        assert "army" not in message and "12,000" not in message and "300" not in message.split("]")[-1]


def test_what_an_engine_does_not_count_is_refused(tmp_path):
    frame, schema = example_table(200, seed=1)
    frame.assign(person=np.arange(len(frame)) // 2).to_parquet(tmp_path / "t.parquet", index=False)
    frame.to_csv(tmp_path / "u.csv", index=False)
    with pytest.raises(ValueError, match="under a privacy unit, use engine='spark' or 'pandas'"):
        TableSynthesizer(schema=schema, epsilon=1.0, privacy_unit="person").fit(str(tmp_path / "t.parquet"),
                                                                                engine="duckdb")
    with pytest.raises(ValueError, match="engine='duckdb'"):
        TableSynthesizer(schema=schema, epsilon=1.0).fit(str(tmp_path / "*.parquet"), engine="pandas")
    with pytest.raises(FileNotFoundError, match="no table file matches"):
        TableSynthesizer(schema=schema, epsilon=1.0).fit(str(tmp_path / "none-*.parquet"))
    with pytest.raises(ValueError, match="all of one kind"):
        TableSynthesizer(schema=schema, epsilon=1.0).fit(str(tmp_path / "*.*"))
    with pytest.raises(ValueError, match="engine is one of"):
        TableSynthesizer(schema=schema, epsilon=1.0).fit(frame, engine="polars")


def test_cli_glob_run_is_the_pandas_run(tmp_path, capsys):
    from swflow.cli import main

    frame, schema = example_table(1500, seed=4)
    (tmp_path / "schema.json").write_text(json.dumps(schema.to_json()))
    frame.iloc[:700].to_parquet(tmp_path / "a.parquet", index=False)
    frame.iloc[700:].to_parquet(tmp_path / "b.parquet", index=False)
    frame.to_parquet(tmp_path / "all.parquet", index=False)
    common = ["generate", "--schema", str(tmp_path / "schema.json"), "--epsilon", "1", "--privacy-seed", "3",
              "--count-noise", "gaussian", "--steps", "30", "--quiet"]
    assert main([*common, "--table", str(tmp_path / "*.parquet").replace("*", "[ab]"), "--out",
                 str(tmp_path / "glob")]) == 0
    assert "counted by duckdb" in capsys.readouterr().out
    assert main([*common, "--table", str(tmp_path / "all.parquet"), "--engine", "pandas", "--out",
                 str(tmp_path / "one")]) == 0
    claims = [json.loads((tmp_path / run / "privacy.json").read_text()) for run in ("glob", "one")]
    for claim in claims:
        claim.pop("samples", None)
    assert claims[0] == claims[1]
    assert main(["verify", str(tmp_path / "glob")]) == 0


@pytest.fixture(scope="module")
def spark():
    """A local[2] Spark session (Java and pyspark come with `make env` and `make java`; CI fails without them)."""
    import os
    import shutil
    import sys

    if os.environ.get("CI") != "true":
        pytest.importorskip("pyspark")
        if shutil.which("java") is None:
            pytest.skip("Spark needs Java (make java)")
    from pyspark.sql import SparkSession

    session = (SparkSession.builder.master("local[2]").appName("swflow-tests").config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false").getOrCreate())
    session.sparkContext.pythonExec = sys.executable  # the workers run this Python, where swflow is
    yield session
    session.stop()


def test_spark_release_is_pandas(tmp_path, spark):
    """A Spark DataFrame, CSV files read by Spark, and the rich table's glob: pandas' release, bit for bit."""
    frame, schema = example_table(2000, seed=1)
    frame.to_parquet(tmp_path / "t.parquet", index=False)
    frame.to_csv(tmp_path / "t.csv", index=False)
    reference = fitted(frame, schema, None)
    from_frame = fitted(spark.read.parquet(str(tmp_path / "t.parquet")), schema, None)
    assert from_frame.engine == "spark"  # a Spark DataFrame: Spark by default
    assert_same_release(reference, from_frame)
    assert_same_release(reference, fitted(str(tmp_path / "t.csv"), schema, "spark"))
    rich = rich_table()
    for i, part in enumerate(np.array_split(np.arange(len(rich)), 2)):
        rich.iloc[part].to_parquet(tmp_path / f"part-{i}.parquet", index=False)
    assert_same_release(fitted(rich, RICH, "pandas", clip=True, target="kind"),  # the target's tables apart
                        fitted(str(tmp_path / "part-*.parquet"), RICH, "spark", clip=True, target="kind"))


def test_files_a_uri_names_are_read_by_spark(tmp_path, spark, capsys):
    """A URI (hdfs://, s3a://; file:// here) goes to Spark by default, which reads it and its glob itself: pandas'
    release, from Python and from `swflow generate`; another engine is refused with what to pass."""
    from swflow.cli import main

    frame, schema = example_table(1500, seed=5)
    for i, part in enumerate(np.array_split(np.arange(len(frame)), 2)):
        frame.iloc[part].to_parquet(tmp_path / f"part-{i}.parquet", index=False)
    uri = f"file://{tmp_path}/part-*.parquet"
    from_uri = fitted(uri, schema, None)
    assert from_uri.engine == "spark"
    assert_same_release(fitted(frame, schema, "pandas"), from_uri)
    with pytest.raises(ValueError, match="read by Spark: engine='spark'"):
        fitted(uri, schema, "duckdb")
    (tmp_path / "schema.json").write_text(json.dumps(schema.to_json()))
    assert main(["generate", "--table", uri, "--schema", str(tmp_path / "schema.json"), "--epsilon", "1", "--steps",
                 "20", "--quiet", "--out", str(tmp_path / "run")]) == 0
    assert "counted by spark" in capsys.readouterr().out and (tmp_path / "run" / "samples.parquet").exists()


@pytest.mark.parametrize("case", ["outside", "category", "text"])
def test_spark_refusals_are_pandas_word_for_word(tmp_path, spark, case):
    frame, schema = example_table(300, seed=1)
    path = tmp_path / "bad.parquet"
    BAD[case](frame).to_parquet(path, index=False)
    words = []
    for table, engine in ((str(path), "pandas"), (spark.read.parquet(str(path)), "spark")):
        with pytest.raises(ValueError) as err:
            fitted(table, schema, engine)
        words.append(str(err.value).split(": ", 1)[1])  # after the source's name
    assert words[0] == words[1]


def test_tab_and_semicolon_text_tables_read_by_their_header(tmp_path):
    """.tsv (tabs) and .txt (';', read from the header) give the DataFrame's release on pandas and DuckDB."""
    from swflow.tables.files import delimiter_of, read_table

    frame, schema = example_table(800, seed=6)
    frame.to_csv(tmp_path / "t.tsv", sep="\t", index=False)
    frame.to_csv(tmp_path / "t.txt", sep=";", index=False)
    assert delimiter_of(tmp_path / "t.tsv") == "\t" and delimiter_of(tmp_path / "t.txt") == ";"
    assert list(read_table(tmp_path / "t.txt").columns) == list(frame.columns)
    reference = fitted(frame, schema, None)
    for name in ("t.tsv", "t.txt"):
        assert torch.equal(fitted(str(tmp_path / name), schema, "pandas")._counts, reference._counts)
        assert_same_release(reference, fitted(str(tmp_path / name), schema, "duckdb"))


def test_utc_marked_times_are_read_as_utc_on_every_engine(tmp_path):
    """"Z" and +00:00 are UTC (issue 96, 7): pandas and DuckDB read them as the same instants; another zone is
    refused, in the same words."""
    from swflow.tables.schema import Schema

    schema = Schema.from_json({"columns": [
        {"name": "at", "type": "datetime", "min": "1960-01-01T00:00", "max": "2030-01-01T00:00", "unit": "hour"},
        {"name": "kind", "type": "categorical", "categories": ["a", "b"]}]})
    rng = np.random.default_rng(0)
    stamps = pd.Timestamp("1965-01-01") + pd.to_timedelta(rng.integers(0, 5 * 10**8, 600), unit="s")
    text = [s.isoformat() + ("Z" if i % 2 else "+00:00") for i, s in enumerate(stamps)]
    frame = pd.DataFrame({"at": text, "kind": rng.choice(["a", "b"], 600)})
    frame.to_csv(tmp_path / "z.csv", index=False)
    reference = fitted(str(tmp_path / "z.csv"), schema, "pandas")
    assert_same_release(reference, fitted(str(tmp_path / "z.csv"), schema, "duckdb"))
    frame.assign(at=[t.replace("Z", "+02:00") for t in text]).to_csv(tmp_path / "paris.csv", index=False)
    words = []
    for engine in ("pandas", "duckdb"):
        with pytest.raises(ValueError, match="other than UTC") as err:
            fitted(str(tmp_path / "paris.csv"), schema, engine)
        words.append(str(err.value))
    assert words[0] == words[1]


def test_proposer_reads_utc_marked_times_as_datetimes():
    from swflow.tables.schema import Schema

    public = pd.DataFrame({"at": ["1969-01-01T00:00:00Z", "1970-06-01T12:00:00Z", "2001-02-03T04:00:00+00:00"],
                           "kind": ["a", "b", "a"]})
    column = Schema.propose(public).columns[0]
    assert (column.kind, column.temporal, column.unit) == ("numeric", "datetime", "hour")


def test_times_of_day_on_every_engine(tmp_path):
    """A time-of-day column (issue 96, 7): proposed from HH:MM text, counted in minutes since midnight, sampled as
    times; the same release from a CSV file's text and a Parquet file's time values, on pandas and DuckDB."""
    import datetime as dt

    from swflow.tables.schema import Schema

    rng = np.random.default_rng(1)
    minutes = np.clip(rng.normal(13 * 60, 150, 1200), 0, 1439).astype(int)
    frame = pd.DataFrame({"opened": [f"{m // 60}:{m % 60:02d}" for m in minutes],
                          "kind": np.where(minutes < 12 * 60, "morning", "later")})
    schema = Schema.propose(frame)
    column = schema.columns[schema.names.index("opened")]
    assert (column.temporal, column.unit, column.low, column.high) == ("time", "minute", 0.0, 1439.0)
    frame.to_csv(tmp_path / "t.csv", index=False)
    frame.assign(opened=[dt.time(m // 60, m % 60) for m in minutes]).to_parquet(tmp_path / "t.parquet", index=False)
    reference = fitted(frame, schema, "pandas")
    for name in ("t.csv", "t.parquet"):
        assert torch.equal(fitted(str(tmp_path / name), schema, "pandas")._counts, reference._counts)
        assert_same_release(reference, fitted(str(tmp_path / name), schema, "duckdb"))
    drawn = reference.sample(200, seed=3)["opened"]
    assert all(isinstance(t, dt.time) and t.second == 0 for t in drawn)  # whole minutes
    with pytest.raises(ValueError, match="not times of day"):
        fitted(frame.assign(opened="25:00"), schema, "pandas")


def test_samples_as_a_spark_dataframe_are_the_samples_file_s_records(tmp_path, spark):
    """``sample(n, spark=)`` (issue 95, 3): a Spark DataFrame, one partition a chunk, holding the records ``swflow
    sample`` writes for the same seed (table_samples.write_samples, chunk by chunk), in its order; dates as Spark
    dates, times as naive timestamps, missing values as nulls, numeric categories as numbers, times of day as text."""
    import datetime as dt

    from swflow.pipeline.table_samples import write_samples
    from swflow.pipeline.spark_samples import sample_dataframe, spark_schema

    schema = Schema.from_json({"columns": [*RICH.to_json()["columns"],
                                           {"name": "opened", "type": "time", "min": "00:00", "max": "23:59",
                                            "unit": "minute"}]})
    frame = rich_table(1500).assign(opened=[dt.time(h % 24, 15) for h in range(1500)])
    syn = fitted(frame, schema, "pandas", clip=True)
    assert spark_schema(schema) == ("`amount` double, `rate` double, `day` date, `hour` timestamp_ntz, `kind` string, "
                                    "`score` double, `code` bigint, `opened` string")
    drawn = sample_dataframe(syn, 2500, spark=spark, seed=4, chunk=1000)
    assert drawn.rdd.getNumPartitions() == 3
    got = drawn.toPandas()
    write_samples(syn, tmp_path / "s.parquet", 2500, seed=4, chunk=1000)
    expected = pd.read_parquet(tmp_path / "s.parquet")
    assert list(got.columns) == schema.names and len(got) == 2500
    for name in ("amount", "rate", "score", "code"):
        np.testing.assert_array_equal(got[name].to_numpy(float), expected[name].to_numpy(float))
    def plain(values):
        return [None if pd.isna(v) else v for v in values]

    assert plain(got["kind"]) == plain(expected["kind"])
    assert plain(got["day"]) == [None if pd.isna(d) else pd.Timestamp(d).date() for d in expected["day"]]
    assert (got["hour"] == expected["hour"]).all() and got["amount"].isna().any() and got["day"].isna().any()
    assert got["opened"].tolist() == [t.isoformat() for t in expected["opened"]]
    one = syn.sample(300, seed=2, spark=spark).toPandas()  # one chunk: sample(300, seed=2) itself
    np.testing.assert_array_equal(one["score"].to_numpy(), syn.sample(300, seed=2)["score"].to_numpy())
    with pytest.raises(ValueError, match="condition"):
        syn.sample(10, spark=spark, conditions={"kind": "zz"})


def _unit_frame(n: int = 1200, seed: int = 2):
    frame, schema = example_table(n, seed=seed)
    rng = np.random.default_rng(seed)
    frame["person"] = rng.integers(0, n // 4, n)  # about 4 rows a person, some with 10 or more
    frame.loc[frame.index[:40], "person"] = 9999  # one person with 40 rows: far over any bound
    return frame, schema


def test_spark_weights_a_privacy_unit_s_rows_as_pandas_does(spark):
    """Under a privacy unit Spark gathers each unit's rows in a partition and weights them there (issue 95): the
    count of records' mass, the pair tables' spread weights (with each row's class of its unit's rows) and the fine
    trees' weights are those that privacy.units gives on the whole table in one process, to float rounding."""
    import torch

    from swflow.pipeline.tables import TableSynthesizer
    from swflow.privacy.marginals import pair_counts
    from swflow.privacy.units import (ROWS_COLUMN, UnitBound, row_class_labels, row_classes, spread_weights,
                                      tree_weights, unit_codes, unit_weights)
    from swflow.tables.codec import TableCodec
    from swflow.tables.resolution import tree_of
    from swflow.tables.spark import SparkTable

    frame, schema = _unit_frame()
    unit = UnitBound("person", 4)
    table = SparkTable(spark.createDataFrame(frame.astype({"education": object})), schema, unit=unit)
    codes = unit_codes(frame["person"])
    count_weights = unit_weights(codes, max_rows=4).numpy()
    assert table.unit_mass() == pytest.approx(float(np.minimum(np.bincount(codes), 4).sum()), rel=1e-12)
    released = TableSynthesizer(schema=schema, epsilon=1.0, privacy_unit="person").schema  # with the class column
    codec = TableCodec(released, numeric_bins=8)
    classes = np.array(row_class_labels(4), dtype=object)[row_classes(count_weights)]
    cells = codec.cell_index(schema.check(frame.drop(columns="person")).assign(**{ROWS_COLUMN: classes}))
    pairs = [(i, j) for i in range(len(codec.sizes)) for j in range(i + 1, len(codec.sizes))]
    weights = spread_weights(codes, cells, pairs, max_rows=4, constant=len(codec.sizes) - 1)
    expected = pair_counts(torch.from_numpy(cells), codec.sizes, pairs, weights).numpy()
    np.testing.assert_allclose(table.pair_counts(codec, pairs), expected, rtol=1e-12, atol=1e-9)
    numbers = [j for j, c in enumerate(released.columns) if c.kind == "numeric"]
    trees = [tree_of(released.columns[j]) for j in numbers]
    leaves = tree_weights(codes, torch.from_numpy(cells)[:, numbers], trees, max_rows=4).numpy()
    for j, counts in zip(numbers, table.fine_counts(codec, numbers, trees=trees)):
        np.testing.assert_allclose(counts, np.bincount(cells[:, j], weights=leaves, minlength=codec.sizes[j]),
                                   rtol=1e-12, atol=1e-9)
    assert 0 < float(weights.min()) and float(weights.max()) <= 1 and float(weights[:40].max()) < 0.2


def test_a_spark_run_under_a_privacy_unit_claims_what_the_pandas_run_claims(tmp_path, spark, capsys):
    """Issue 95's bar: a Spark DataFrame under a privacy unit gives pandas' privacy.json claim (ε, δ, the unit, the
    accountant, the multiplier, k·√K); only the released size (noisy: its noise is the OS's) differs. From the
    command too, and the run verifies. A table without the unit column, rows without a unit, DuckDB under a unit
    and the repeated values under a unit on an engine are refused."""
    from swflow.cli import main
    from swflow.pipeline.tables import TableSynthesizer
    from swflow.privacy.units import UNITLESS_ROWS

    frame, schema = _unit_frame()
    sdf = spark.createDataFrame(frame.astype({"education": object}))
    claims = []
    for table in (frame, sdf):
        syn = TableSynthesizer(schema=schema, epsilon=3.0, privacy_unit="person", steps=20, n_particles=200)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            claims.append(syn.fit(table).privacy_report().to_json())
        assert syn.engine == ("pandas" if table is frame else "spark") and len(syn.sample(50)) == 50
    noisy = ("dataset_size", "ledger", "run_config")
    assert {k: v for k, v in claims[0].items() if k not in noisy} == {k: v for k, v in claims[1].items()
                                                                     if k not in noisy}
    assert claims[1]["privacy_unit"] == "one person and all of its rows" and claims[1]["sensitivity"] == pytest.approx(
        4 * np.sqrt(len(claims[1]["run_config"]["pairs"])))
    for pandas_event, spark_event in zip(claims[0]["ledger"], claims[1]["ledger"]):
        assert {k: v for k, v in pandas_event.items() if k not in ("dataset_size", "sample_size")} == \
            {k: v for k, v in spark_event.items() if k not in ("dataset_size", "sample_size")}
    frame.to_parquet(tmp_path / "visits.parquet", index=False)
    (tmp_path / "schema.json").write_text(json.dumps(schema.to_json()))
    assert main(["generate", "--table", f"file://{tmp_path}/visits.parquet", "--schema", str(tmp_path / "schema.json"),
                 "--privacy-unit", "person", "--epsilon", "3", "--steps", "20", "--quiet", "--out",
                 str(tmp_path / "run")]) == 0
    assert "counted by spark" in capsys.readouterr().out
    written = json.loads((tmp_path / "run" / "privacy.json").read_text())
    assert written["epsilon"] == pytest.approx(claims[0]["epsilon"], rel=1e-9)  # the command's own cells and pairs
    assert written["privacy_unit"] == claims[0]["privacy_unit"]
    assert main(["verify", str(tmp_path / "run")]) == 0
    settings = dict(schema=schema, epsilon=3.0, privacy_unit="person", steps=20, n_particles=200)
    with pytest.raises(ValueError, match="no privacy-unit column 'person'"):
        TableSynthesizer(**settings).fit(sdf.drop("person"))
    with pytest.raises(ValueError, match="rows without a unit") as err:
        TableSynthesizer(**settings).fit(spark.createDataFrame(
            frame.astype({"education": object, "person": object}).assign(person=lambda f: f.person.where(
                f.index != 7, None))))
    assert str(err.value) == UNITLESS_ROWS
    with pytest.raises(ValueError, match="DuckDB counts record-level runs"):
        TableSynthesizer(**settings).fit(str(tmp_path / "visits.parquet"), engine="duckdb")
    with pytest.raises(ValueError, match="repeated_values off"):
        TableSynthesizer(**settings, repeated_values=True).fit(sdf)


def test_spark_makes_a_wide_table_s_private_choice_as_pandas_does(spark):
    """Issue 94: the candidates of a wide table's private choice of pairs are counted by Spark where the rows live;
    for the same privacy seed the run chooses pandas' pairs and releases its counts."""
    rng = np.random.default_rng(0)
    first = rng.integers(0, 2, (1000, 17))
    values = np.concatenate([first, np.where(rng.random((1000, 17)) < 0.05, 1 - first, first)], 1)
    frame = pd.DataFrame({f"c{j}": np.where(values[:, j] == 1, "b", "a") for j in range(34)})
    schema = Schema.from_json({"columns": [{"name": f"c{j}", "type": "categorical", "categories": ["a", "b"]}
                                           for j in range(34)]})
    settings = dict(schema=schema, epsilon=10.0, delta=1e-9, steps=5, count_noise="gaussian", privacy_seed=3)
    reference = TableSynthesizer(**settings).fit(frame)
    on_spark = TableSynthesizer(**settings).fit(spark.createDataFrame(frame))
    assert reference.pairs_chosen_by.startswith("a private choice") and on_spark.pairs == reference.pairs
    assert torch.equal(on_spark._counts, reference._counts)
