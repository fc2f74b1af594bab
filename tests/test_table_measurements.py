"""Issue 95: a table run's releases as named measurements, read by name at fit, save, load, verify and the report.

The expected names and sizes below are counted from the schema and the settings here (the trees' levels from
resolution.tree_of, the pairs from the run's own list), not taken from the plan under test.
"""
from __future__ import annotations

import copy

import pytest
import torch

from swflow.pipeline.table_measurements import (MEASUREMENTS, name_releases, named_ledger, plan, released,
                                                without_names)
from swflow.pipeline.tables import TableSynthesizer
from swflow.privacy import PrivacyReport
from swflow.privacy.verify import ClaimMismatch


@pytest.fixture(scope="module")
def runs(saved_table_runs):
    """{adjacency: (the fitted Synthesizer, the blob of its saved model.pt)}: values, trees, tables[, the count]."""
    return saved_table_runs


@pytest.mark.parametrize("adjacency", ["replace-one", "add-remove"])
def test_every_release_is_named_and_counts_what_its_name_says(runs, adjacency):
    from swflow.tables.resolution import tree_of

    syn, _ = runs[adjacency]
    ledger = syn.privacy_report().ledger
    expected = ["pair tables", "repeated values", "one-way trees"] + ["count of records"] * (adjacency == "add-remove")
    assert [e["measurement"] for e in ledger] == expected
    by_name = {e["measurement"]: e for e in ledger}
    assert by_name["pair tables"]["n_projections"] == len(syn.pairs)
    levels = sum(tree_of(syn.schema.columns[j]).levels for j in syn._released_columns)
    assert by_name["one-way trees"]["n_projections"] == levels
    if adjacency == "add-remove":
        assert by_name["count of records"]["n_projections"] == 1
        assert by_name["count of records"]["sensitivity"] == 1.0  # one record, counted once
    notes = syn.privacy_report().notes
    assert notes["measurements"].startswith(f"pair tables: the two-way tables of {len(syn.pairs)} column pairs")
    at = [notes["noise_check"].find(f"{name}: ") for name in expected]
    assert at[0] == 0 and all(a < b for a, b in zip(at, at[1:])), at  # each release's read-back, in order


@pytest.mark.parametrize("adjacency", ["replace-one", "add-remove"])
def test_a_saved_run_reads_its_releases_back_by_name(runs, adjacency):
    syn, blob = runs[adjacency]
    loaded = TableSynthesizer.load("saved", blob=copy.deepcopy(blob))
    assert loaded.privacy_report().ledger == syn.privacy_report().ledger
    assert loaded.privacy_report().notes["measurements"] == syn.privacy_report().notes["measurements"]
    assert torch.equal(loaded._released_levels, syn._released_levels)


def test_a_file_of_an_earlier_swflow_gets_its_names_from_its_shape(runs):
    syn, blob = runs["add-remove"]
    old = copy.deepcopy(blob)
    old["report"]["ledger"] = without_names(old["report"]["ledger"])
    loaded = TableSynthesizer.load("old", blob=old)
    assert [e["measurement"] for e in loaded.privacy_report().ledger] == [
        e["measurement"] for e in syn.privacy_report().ledger]


@pytest.mark.parametrize("edit", ["swap names", "rename", "drop a name", "reorder"])
def test_a_ledger_whose_names_are_edited_is_refused(runs, edit):
    _, blob = runs["add-remove"]
    forged = copy.deepcopy(blob)
    ledger = forged["report"]["ledger"]
    if edit == "swap names":  # the trees' σ read as the values' and back
        ledger[1]["measurement"], ledger[2]["measurement"] = ledger[2]["measurement"], ledger[1]["measurement"]
    elif edit == "rename":
        ledger[3]["measurement"] = "pair tables"
    elif edit == "drop a name":
        del ledger[2]["measurement"]
    else:
        ledger[1], ledger[2] = ledger[2], ledger[1]
    with pytest.raises(ClaimMismatch):
        TableSynthesizer.load("forged", blob=forged)


def test_released_finds_one_event_by_name_or_refuses(runs):
    syn, _ = runs["replace-one"]
    report = syn.privacy_report()
    assert released(report, "one-way trees", "here")["n_projections"] == report.ledger[2]["n_projections"]
    with pytest.raises(ClaimMismatch, match="0 releases of the count of records"):
        released(report, "count of records", "here")


def test_a_fit_whose_ledger_is_not_its_plan_is_never_named(runs):
    from dataclasses import replace

    syn, _ = runs["replace-one"]
    report = syn.privacy_report()
    planned = plan(syn, report.dataset_size)
    assert [m.name for m in planned] == [n for n in MEASUREMENTS
                                         if n not in ("target's tables", "count of records", "choice of pairs")]
    unnamed = replace(report, ledger=without_names(report.ledger))
    assert name_releases(unnamed, planned).ledger == report.ledger
    doubled = copy.deepcopy(unnamed.ledger)
    doubled[0]["noise_std"] *= 2
    with pytest.raises(RuntimeError, match="released other than it planned"):
        name_releases(replace(report, ledger=doubled), planned)
    with pytest.raises(RuntimeError, match="holds 2 releases"):
        name_releases(replace(report, ledger=unnamed.ledger[:2]), planned)


def test_model_pt_keeps_each_release_s_numbers_under_its_name(runs):
    syn, blob = runs["add-remove"]
    assert sorted(blob["measurements"]) == sorted(e["measurement"] for e in blob["report"]["ledger"])
    assert torch.equal(torch.as_tensor(blob["measurements"]["pair tables"]), syn._counts)
    assert torch.equal(torch.as_tensor(blob["measurements"]["one-way trees"]), syn._released_levels)
    assert blob["measurements"]["count of records"] == syn._size
    assert not {"noisy_counts", "size", "selection"} & set(blob) and "levels" not in blob["resolution"]


def test_a_file_with_an_earlier_swflow_s_keys_loads_as_the_same_run(runs):
    """model.pt as swflow wrote it before its releases were named: each release's numbers under a key of its own."""
    syn, blob = runs["add-remove"]
    old = copy.deepcopy(blob)
    numbers = old.pop("measurements")
    old.update(noisy_counts=numbers["pair tables"], size=numbers["count of records"], selection=None)
    old["resolution"].update(levels=numbers["one-way trees"], repeated_values=numbers["repeated values"])
    old["report"]["ledger"] = without_names(old["report"]["ledger"])
    loaded = TableSynthesizer.load("old", blob=old)
    assert loaded.privacy_report().ledger == syn.privacy_report().ledger
    assert loaded.codec.sizes == syn.codec.sizes and loaded._atoms.keys() == syn._atoms.keys()


def test_a_ledger_and_numbers_that_name_different_releases_are_refused(runs):
    _, blob = runs["replace-one"]
    report = PrivacyReport.from_json(blob["report"])
    numbers = dict(blob["measurements"])
    assert named_ledger(report, numbers, "here").ledger == report.ledger
    short = PrivacyReport.from_json({**blob["report"], "ledger": without_names(blob["report"]["ledger"])[:2]})
    with pytest.raises(ClaimMismatch, match="its released numbers are those of"):
        named_ledger(short, numbers, "here")
    del numbers["one-way trees"]
    with pytest.raises(ClaimMismatch, match="the file was edited"):
        named_ledger(report, numbers, "here")


def test_a_run_folder_of_an_earlier_swflow_still_verifies(tmp_path, capsys, paid_example):
    """privacy.json and model.pt as an earlier swflow wrote them (no names, no measurements note) verify, and their
    report is named on load; a model.pt whose names were edited does not."""
    import json

    from swflow.cli import main

    frame, schema = paid_example(800)
    frame.to_csv(tmp_path / "private.csv", index=False)
    (tmp_path / "schema.json").write_text(json.dumps(schema))
    run = tmp_path / "run"
    assert main(["generate", "--table", str(tmp_path / "private.csv"), "--schema", str(tmp_path / "schema.json"),
                 "--epsilon", "1", "--delta", "1e-9", "--steps", "20", "--quiet", "--out", str(run)]) == 0
    claim = json.loads((run / "privacy.json").read_text())
    names = [e["measurement"] for e in claim["ledger"]]
    assert names[0] == "pair tables" and "measurements" in claim
    blob = torch.load(run / "model.pt", weights_only=True)
    for report in (claim, blob["report"]):
        report["ledger"] = without_names(report["ledger"])
        del report["measurements"]
    (run / "privacy.json").write_text(json.dumps(claim))
    torch.save(blob, run / "model.pt")
    assert main(["verify", str(run), "--no-samples", "--quiet"]) == 0
    assert [e["measurement"] for e in TableSynthesizer.load(run / "model.pt").privacy_report().ledger] == names
    blob["report"]["ledger"][0]["measurement"] = "one-way trees"
    torch.save(blob, run / "model.pt")
    capsys.readouterr()
    assert main(["verify", str(run), "--no-samples", "--quiet"]) != 0
    assert "the file was edited" in capsys.readouterr().err
