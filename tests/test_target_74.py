"""Issue 74, items 2 and 3: a target the owner names keeps its tables as released (swflow/pipeline/tables.py).

Measured first (experiments/tables_diagnostics.py shrinkage): a rare class's links are kept by the exact tables and
erased by the James-Stein shrinkage of the noisy ones; with the target's tables fitted as released the classifier
gets them back while the other tables are still shrunk.
"""
from __future__ import annotations

import pytest
import torch

from swflow.pipeline.tables import TableSynthesizer
from swflow.tables.example import example_table


def _fitted_tables(monkeypatch, **settings):
    """(the tables the particles were fitted to, the released ones, the pairs) of one fit."""
    import swflow.pipeline.tables as tables_module
    from swflow.privacy.marginals import split_tables

    seen = {}
    original = tables_module.fit_particles

    def watched(targets, sizes, pairs, **kwargs):
        seen["fitted"] = [t.clone() for t in targets]
        return original(targets, sizes, pairs, **kwargs)

    monkeypatch.setattr(tables_module, "fit_particles", watched)
    frame, schema = example_table(1500, seed=2)
    syn = TableSynthesizer(schema=schema, epsilon=1.0, delta=1e-7, count_noise="gaussian", steps=5, privacy_seed=1,
                           **settings).fit(frame)
    released = split_tables(syn._counts, syn.codec.sizes, syn.pairs)
    return seen["fitted"], released, syn


def test_the_target_s_tables_are_fitted_as_released_and_the_others_shrunk(monkeypatch):
    fitted, released, syn = _fitted_tables(monkeypatch, target="income")
    income = syn.schema.names.index("income")
    for table, raw, pair in zip(fitted, released, syn.pairs):
        if income in pair:
            assert torch.equal(table, raw.to(table.dtype))
    assert any(not torch.allclose(t, r.to(t.dtype)) for t, r, p in zip(fitted, released, syn.pairs) if income not in p)
    fitted, released, _ = _fitted_tables(monkeypatch)
    assert any(not torch.allclose(t, r.to(t.dtype)) for t, r, p in zip(fitted, released, syn.pairs) if income in p)


def test_a_target_is_saved_with_the_run_and_an_unknown_one_is_refused(tmp_path):
    frame, schema = example_table(800, seed=3)
    syn = TableSynthesizer(schema=schema, epsilon=1.0, delta=1e-7, steps=5, target="income").fit(frame)
    loaded = TableSynthesizer.load(syn.save(tmp_path / "model.pt"))
    assert loaded.flow.target == "income"
    assert loaded.sample(30, seed=1).equals(syn.sample(30, seed=1))
    with pytest.raises(ValueError, match="target names a column"):
        TableSynthesizer(schema=schema, epsilon=1.0, delta=1e-7, target="salary")
