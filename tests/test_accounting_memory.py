"""The accountant at any budget a user may ask for stays within a small memory (issue 76): at δ = 1e-15, the size
that group privacy asks of a person with 32 rows, dp-accounting's default composition cut 1e-15 of tail mass into
the loss's infinite part, every ε read inf, and the calibration grew the noise (and the discrete Gaussian's support)
until the kernel killed the process at 23.5 GB."""
import math
import tracemalloc

import pytest

from swflow.pipeline.tables import TableSynthesizer
from swflow.privacy.mechanisms import analytic_gaussian_epsilon, discrete_gaussians_epsilon
from swflow.tables import example_table


def test_a_table_run_at_a_tiny_delta_calibrates_within_a_few_hundred_megabytes():
    """35 000 rows at ε = 0.3, δ = 1e-15, the discrete Gaussian, add/remove (four releases composed): the Python
    allocations of the whole fit (numpy's, where the accountant's arrays live) peak below 400 MB, and the claim
    meets the target."""
    frame, schema = example_table(35_000)
    tracemalloc.start()
    try:
        syn = TableSynthesizer(schema=schema, epsilon=0.3, delta=1e-15, adjacency="add-remove", steps=20).fit(frame)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 400e6
    report = syn.privacy_report()
    assert 0.29 <= report.epsilon <= 0.3 and report.delta <= 1e-15


def test_the_discrete_account_at_a_tiny_delta_is_finite_and_near_the_gaussians():
    releases = ((163.08, 1), (77.46, 1), (47.14, 9), (30.86, 15))  # a run's four releases at δ = 1.7e-15
    composed = sum(z ** -2 for z, _ in releases) ** -0.5
    exact = analytic_gaussian_epsilon(noise_multiplier=composed, delta=1.7e-15)
    assert discrete_gaussians_epsilon(releases, delta=1.7e-15) == pytest.approx(exact, rel=0.01)


def test_a_noise_scale_too_wide_for_the_discrete_account_takes_the_renyi_bound():
    """σ beyond DISCRETE_PLD_MAX_SCALE (a million counts moved at z = 2 000): ε from the Rényi bound (dp-accounting
    RDP), finite and at least the exact Gaussian's (the bound is valid, looser at so small an ε), with no array of
    the noise's support built."""
    from swflow.privacy.mechanisms import DISCRETE_PLD_MAX_SCALE

    z, moved = 2000.0, 10 ** 6
    assert z * math.sqrt(moved) > DISCRETE_PLD_MAX_SCALE
    tracemalloc.start()
    try:
        epsilon = discrete_gaussians_epsilon(((z, moved),), delta=1e-9)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    exact = analytic_gaussian_epsilon(noise_multiplier=z, delta=1e-9)
    assert exact <= epsilon < 0.05 and peak < 50e6
