"""A library call never moves the caller's global random stream (it seeds its own networks inside)."""
import numpy as np
import torch

from swflow.baselines import ClippedGradientConfig, GeneratorConfig, make_dpsgd_sw_gen, make_dpswgen
from swflow.metrics import downstream_accuracy
from swflow.privacy import PrivacySpec


def _rows(n: int) -> torch.Tensor:
    return torch.nn.functional.normalize(torch.randn(n, 3, generator=torch.Generator().manual_seed(0)), dim=1)


def test_seeded_networks_leave_the_global_generator_where_it_was():
    torch.manual_seed(123)
    expected_next = torch.rand(5)  # what the user's stream yields next, untouched
    torch.manual_seed(123)
    spec = PrivacySpec(epsilon=10.0, delta=1e-5)
    make_dpswgen(_rows(200), privacy=spec, config=GeneratorConfig(steps=2), n_projections=4, batch_size=50,
                 privacy_seed=0).fit(progress=False)
    make_dpsgd_sw_gen(_rows(200), privacy=spec, config=ClippedGradientConfig(steps=2), n_projections=4,
                      batch_size=50, privacy_seed=0).fit(progress=False)
    images = np.random.default_rng(0).random((40, 1, 8, 8), dtype=np.float32)
    downstream_accuracy(images, np.arange(40) % 2, images[:10], np.arange(10) % 2, epochs=1)
    assert torch.equal(torch.rand(5), expected_next)


def test_the_seeded_networks_do_not_depend_on_the_callers_stream():
    spec = PrivacySpec(epsilon=10.0, delta=1e-5)
    draws = []
    for user_seed in (1, 2):
        torch.manual_seed(user_seed)
        model = make_dpswgen(_rows(200), privacy=spec, config=GeneratorConfig(steps=1), n_projections=4,
                             batch_size=50, privacy_seed=0)
        draws.append(model.sample(8, seed=3))
    assert torch.equal(*draws)
