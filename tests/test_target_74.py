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


def _rare_class_tables(seed: int):
    """Exact pair tables of 6 000 made-up records: x uniform on 32 cells, z = x ± 2, and a class y = 1 only where
    x ≥ 29, a third of those rows (about 3 % in all)."""
    import numpy as np

    from swflow.privacy.marginals import pair_counts, split_tables

    rng = np.random.default_rng(seed)
    x = rng.integers(0, 32, 6000)
    z = np.clip(x + rng.integers(-2, 3, 6000), 0, 31)
    y = (rng.random(6000) < np.where(x >= 29, 0.3, 0.0)).astype(np.int64)
    sizes, pairs = [2, 32, 32], [(0, 1), (0, 2), (1, 2)]
    cells = torch.from_numpy(np.stack([y, x, z], axis=1))
    return split_tables(pair_counts(cells, sizes, pairs).double(), sizes, pairs), sizes, pairs


@pytest.mark.parametrize("seed", [0, 1])
def test_a_rare_class_keeps_its_cells_when_the_particles_start_as_records(seed, monkeypatch):
    """Fitted to exact tables, the particles' mass of the rare class where it never occurs (x < 29) is under a tenth
    of its mass. Started from the jitter alone (START_LOGIT = 0: every particle near the simplex's centre), 1 000
    steps leave about a fifth of it there (0.185-0.199 on three draws), which a classifier reads as noise."""
    import swflow.tables.flow as flow

    tables, sizes, pairs = _rare_class_tables(seed)
    shares = {}
    for start in (0.0, flow.START_LOGIT):
        monkeypatch.setattr(flow, "START_LOGIT", start)
        particles = flow.fit_particles(tables, sizes, pairs, dataset_size=6000)
        rare = (particles[0][:, 1:].T @ particles[1]).squeeze(0)  # (32,): the class's mass in each cell of x
        shares[start] = float(rare[:29].sum() / rare.sum())
    assert shares[flow.START_LOGIT] < 0.1 < shares[0.0], shares


def test_pooled_laws_weigh_each_table_s_margin_by_its_other_columns_cells():
    """By hand: a column in two tables, of 2 and 4 other cells, gets (m₁/2 + m₂/4) / (1/2 + 1/4), clipped and
    normalised; a column in no table, None."""
    from swflow.tables.shrinkage import pooled_laws

    first = torch.tensor([[10.0, 20.0], [30.0, -5.0], [0.0, 5.0]])  # column 0 x column 1 (2 cells)
    second = torch.tensor([[1.0, 1.0, 1.0, 1.0], [8.0, 0.0, 0.0, 0.0], [2.0, 2.0, 2.0, 2.0]])  # column 0 x column 2
    laws = pooled_laws([first, second], [3, 2, 4, 5], [(0, 1), (0, 2)])
    pooled = (torch.tensor([30.0, 25.0, 5.0]) / 2 + torch.tensor([4.0, 8.0, 8.0]) / 4) / 0.75
    torch.testing.assert_close(laws[0], pooled / pooled.sum())
    torch.testing.assert_close(laws[1], torch.tensor([40.0, 20.0]) / 60.0)  # -5 counted as it is, then summed
    assert laws[3] is None
