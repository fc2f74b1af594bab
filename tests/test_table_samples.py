"""A table run's samples written a chunk at a time (swflow/pipeline/table_samples.py): the file holds each chunk's
own draw, read back with the schema's dtypes; `verify` makes a chunked file again byte for byte, and refuses an
edited one."""
import json

import pandas as pd
import pytest

from swflow.pipeline import table_samples
from swflow.pipeline.table_samples import chunk_seed, write_samples
from swflow.pipeline.tables import TableSynthesizer
from swflow.tables.example import example_table
from swflow.tables.files import read_table


@pytest.fixture(scope="module")
def fitted():
    frame, schema = example_table(800, seed=2)
    return TableSynthesizer(schema=schema, epsilon=2.0, steps=30, n_particles=300).fit(frame), schema


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_chunks_are_their_own_draws(tmp_path, fitted, suffix):
    syn, schema = fitted
    path = write_samples(syn, tmp_path / f"s{suffix}", 700, seed=5, chunk=300)
    got = read_table(path, schema=schema)
    assert len(got) == 700
    parts = [syn.sample(size, seed=chunk_seed(5, i)) for i, size in enumerate((300, 300, 100))]
    expected = pd.concat(parts, ignore_index=True)
    if suffix == ".csv":  # read back as the file reads, the same way as the expected frame written at once
        expected.to_csv(tmp_path / "e.csv", index=False)
        expected = read_table(tmp_path / "e.csv", schema=schema)
    pd.testing.assert_frame_equal(got, expected, check_dtype=suffix == ".parquet")
    one = write_samples(syn, tmp_path / f"one{suffix}", 300, seed=5, chunk=300)  # one chunk: one draw, as before
    pd.testing.assert_frame_equal(read_table(one, schema=schema), read_table(path, schema=schema).iloc[:300])


def test_verify_makes_a_chunked_file_again(tmp_path, monkeypatch):
    from swflow.cli import main

    monkeypatch.setattr(table_samples, "SAMPLE_CHUNK", 400)
    frame, schema = example_table(600, seed=3)
    frame.to_csv(tmp_path / "t.csv", index=False)
    (tmp_path / "s.json").write_text(json.dumps(schema.to_json()))
    assert main(["generate", "--table", str(tmp_path / "t.csv"), "--schema", str(tmp_path / "s.json"), "--epsilon",
                 "1", "--steps", "20", "--n-samples", "1000", "--quiet", "--out", str(tmp_path / "run")]) == 0
    samples = tmp_path / "run" / "samples.csv"
    assert len(pd.read_csv(samples)) == 1000 and not list((tmp_path / "run").glob("drawing*"))
    assert main(["verify", str(tmp_path / "run")]) == 0
    lines = samples.read_text().splitlines()
    lines[700] = lines[701]  # a record of the second chunk replaced
    samples.write_text("\n".join(lines) + "\n")
    assert main(["verify", str(tmp_path / "run")]) != 0
