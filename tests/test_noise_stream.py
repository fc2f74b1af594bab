"""Issue 76, item 4: private noise from a CSPRNG on every path (swflow/privacy/noise.py).

The private path (every release's noise, every subsample, every unit's value slot) reads one keyed SHAKE-256
stream and never torch's or numpy's generators; the stream's draws have the laws they claim (checked against scipy);
a typed seed reproduces them and a secret key does not.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy import stats

from swflow.pipeline.tables import TableSynthesizer
from swflow.privacy import NoiseSource
from swflow.tables.example import example_table

FRAME = example_table(600, seed=2)  # drawn before any test refuses numpy's generators
FRAME[0]["unit"] = np.arange(600) // 3

#: every generator a private draw could have used instead of the stream
_GENERATORS = [(torch, name) for name in ("rand", "randn", "randint", "randperm", "normal", "bernoulli", "multinomial",
                                          "rand_like", "randn_like")] + \
    [(torch.Tensor, name) for name in ("normal_", "uniform_", "random_", "exponential_", "bernoulli_")] + \
    [(np.random, name) for name in ("default_rng", "rand", "randn", "normal", "uniform", "choice", "permutation")]


@pytest.fixture
def no_library_generators(monkeypatch):
    """Any draw from torch's or numpy's generators fails the test."""
    def refuse(*args, **kwargs):
        raise AssertionError("a private draw read torch's or numpy's generator")

    for owner, name in _GENERATORS:
        monkeypatch.setattr(owner, name, refuse)


def test_every_draw_of_the_stream_avoids_torch_and_numpy_generators(no_library_generators):
    noise = NoiseSource()
    assert noise.gaussian((5, 7), 2.0).shape == (5, 7)
    assert noise.uniform(10).shape == (10,)
    assert noise.directions(4, 3).shape == (4, 3)
    assert len(noise.subset_without_replacement(100, 10)) == 10
    noise.poisson_subset(100, 0.5)


def test_a_table_release_never_reads_a_library_generator(monkeypatch, no_library_generators):
    """The whole private part of a table fit (count of records, repeated values, trees, pair tables, a unit's value
    slots) with the post-processing fit of particles set aside: it draws from the simulator's own generator."""
    monkeypatch.setattr(TableSynthesizer, "_fit_to_release", lambda self, progress=False, warn=False: [])
    frame, schema = FRAME
    for kwargs in ({"count_noise": "gaussian"}, {"adjacency": "add-remove", "count_noise": "gaussian"},
                   {"privacy_unit": "unit", "max_rows_per_unit": 2}):
        data = frame if "privacy_unit" in kwargs else frame.drop(columns="unit")
        syn = TableSynthesizer(schema=schema, epsilon=1.0, delta=1e-7, **kwargs).fit(data)
        assert syn.privacy_report().private


def test_the_flows_releases_never_read_a_library_generator(no_library_generators):
    """A per-step release of a Poisson batch's projections (dpswflow-r, zero-out), and one sliced-histogram release (the
    directions are public and drawn by the caller, here fixed)."""
    from swflow.privacy import PrivacyLedger, PrivacySpec, calibrate
    from swflow.privacy.calibrate import ReleasePlan
    from swflow.privacy.release import PrivateTarget
    from swflow.privacy.targets import histogram_target

    rows = torch.linspace(-1, 1, 300).reshape(100, 3) / 2
    theta = torch.eye(3)[:, :2]
    plan = ReleasePlan(releases=2, dataset_size=100, sample_size=10, n_projections=2, dim=3)
    spec = PrivacySpec(epsilon=2.0, delta=1e-5, adjacency="zero-out")
    target = PrivateTarget(rows, calibrate(spec, plan), noise=NoiseSource(), ledger=PrivacyLedger(), batch_size=10)
    target.release(theta)
    histogram = histogram_target(rows, PrivacySpec(epsilon=1.0, delta=1e-6, count_noise="gaussian"),
                                 ReleasePlan(releases=1, dataset_size=100, sample_size=None, n_projections=2, dim=3,
                                             noise="gaussian"), bins=8)
    histogram.release(theta)
    assert target.ledger.releases == 1 and histogram.ledger.releases == 1


def test_the_stream_s_draws_have_their_laws():
    """Kolmogorov-Smirnov against scipy's N(0, 4) and U(0, 1) on 200 000 draws (false alarm 1e-6 each), and a
    subsample is uniform over the subsets (each index's frequency within 6 binomial standard deviations)."""
    noise = NoiseSource()
    assert stats.kstest(noise.gaussian((200_000,), 2.0, dtype=torch.float64).numpy(), stats.norm(0, 2).cdf).pvalue > 1e-6
    assert stats.kstest(noise.uniform(200_000).numpy(), "uniform").pvalue > 1e-6
    hits = np.zeros(50)
    for _ in range(2000):
        hits[noise.subset_without_replacement(50, 10).numpy()] += 1
    assert np.all(np.abs(hits - 400) < 6 * np.sqrt(2000 * 0.2 * 0.8))


def test_box_muller_s_two_normals_per_pair_are_independent():
    """Each pair of uniforms gives r·cos φ and r·sin φ: the pairs' r² follow χ²(2) and their angles U(0, 2π) (scipy's
    laws, KS false alarm 1e-6), and the two halves are uncorrelated (|ρ| < 5/√h)."""
    z = NoiseSource().gaussian((200_000,), 1.0, dtype=torch.float64).numpy()
    first, second = z[:100_000], z[100_000:]
    assert stats.kstest(first ** 2 + second ** 2, stats.chi2(2).cdf).pvalue > 1e-6
    assert stats.kstest(np.arctan2(second, first) % (2 * np.pi), stats.uniform(0, 2 * np.pi).cdf).pvalue > 1e-6
    assert abs(np.corrcoef(first, second)[0, 1]) < 5 / np.sqrt(100_000)
    assert NoiseSource().gaussian((3, 5), 1.0).shape == (3, 5)  # an odd count drops the last pair's sine


@pytest.mark.parametrize("n, size", [(9, 2), (5, 2), (3, 3)])
def test_every_subset_and_order_is_equally_likely(n, size):
    """Small subsets (drawn index by index) and large ones (the smallest of n uniforms) alike: 30 000 draws, every
    ordered tuple of distinct indices equally likely (chi-square against the uniform law, false alarm 1e-6)."""
    from itertools import permutations

    noise = NoiseSource()
    tuples = {t: i for i, t in enumerate(permutations(range(n), size))}
    seen = np.zeros(len(tuples))
    for _ in range(30_000):
        seen[tuples[tuple(noise.subset_without_replacement(n, size).tolist())]] += 1
    assert stats.chisquare(seen).pvalue > 1e-6
    with pytest.raises(ValueError, match="cannot choose 4 of 3"):
        noise.subset_without_replacement(3, 4)


def test_a_typed_seed_reproduces_the_stream_and_a_secret_key_does_not():
    a, b = NoiseSource(7), NoiseSource(7)
    assert torch.equal(a.gaussian((100,), 1.0), b.gaussian((100,), 1.0))
    assert not torch.equal(NoiseSource().gaussian((100,), 1.0), NoiseSource().gaussian((100,), 1.0))
    assert not torch.equal(NoiseSource(7, secure=True).gaussian((100,), 1.0),
                           NoiseSource(7, secure=True).gaussian((100,), 1.0))


def test_a_checkpoint_holds_the_place_of_a_typed_seed_s_stream_and_no_secret():
    seeded = NoiseSource(3)
    seeded.gaussian((10,), 1.0)
    state = seeded.state_dict()
    resumed = NoiseSource(3)
    resumed.load_state_dict(state)
    assert torch.equal(resumed.gaussian((10,), 1.0), seeded.gaussian((10,), 1.0))
    secret = NoiseSource()
    secret.gaussian((10,), 1.0)
    assert secret.state_dict()["calls"] is None and secret._key not in repr(secret.state_dict()).encode()
