"""docs/architecture.md's promises: a new method is one module plus one MethodSpec, and a new kind of release is
one strategy class plus one entry, with nothing else edited."""
import sys
import textwrap
from dataclasses import dataclass

import pytest
import torch

from swflow import FlowConfig, make_flow
from swflow.pipeline import resolve_fixed
from swflow.privacy import PrivacySpec


@pytest.fixture
def temporary_module(tmp_path, monkeypatch):
    def write(name: str, source: str):
        (tmp_path / f"{name}.py").write_text(textwrap.dedent(source))
        monkeypatch.syspath_prepend(str(tmp_path))
        sys.modules.pop(name, None)
        return name
    return write


def test_a_new_flow_method_is_one_module_and_one_spec(temporary_module, monkeypatch):
    from swflow import registry

    # a method that builds the 004 per-step flow with half the directions it is given: its own builder
    module = temporary_module("my_half_flow", """
        from dataclasses import replace

        from swflow.methods import build_central

        def build(data, plan, **kwargs):
            return build_central(data, replace(plan, n_projections=max(1, plan.n_projections // 2)), **kwargs)
    """)
    spec = registry.MethodSpec("my-half-flow", "flow", "a test method", "per-step", ("steps", 5), module)
    monkeypatch.setitem(registry.METHODS, spec.name, spec)
    rows = torch.nn.functional.normalize(torch.randn(200, 3, generator=torch.Generator().manual_seed(0)), dim=1)
    flow = make_flow("my-half-flow", rows, privacy=PrivacySpec(epsilon=5.0, delta=1e-4), n_projections=8,
                     batch_size=50, privacy_seed=1, progress=False,
                     config=FlowConfig(steps=5, n_particles=40, manifold="sphere"))
    result = flow.run()
    assert result.particles.shape == (40, 3) and torch.isfinite(result.particles).all()
    ledger = flow.target.ledger
    assert ledger.releases == 5  # one accounted release per step, as the per-step strategy plans
    assert flow.strategy.n_projections == 4  # the module's own rule reached the simulator


def test_a_new_kind_of_release_is_one_strategy(monkeypatch):
    from swflow import registry, releases

    @dataclass(frozen=True)
    class EveryOtherRow(releases.PerStep):
        """Per-step releases whose batches are at most half the data set."""

        def batch(self, batch_size, dataset_size):
            return min(batch_size or dataset_size, dataset_size // 2)

    kind = EveryOtherRow("every-other", "batches of at most half the rows")
    monkeypatch.setitem(releases.RELEASES, kind.name, kind)
    spec = registry.MethodSpec("half-batches", "flow", "a test method", kind.name, ("steps", 4),
                               "swflow.methods:build_central")
    monkeypatch.setitem(registry.METHODS, spec.name, spec)
    assert spec.release is kind and spec.batch(None, 100) == 50
    plan = resolve_fixed("half-batches", steps=4, n_projections=6, dataset_size=100, dim=3,
                         privacy=PrivacySpec(epsilon=5.0, delta=1e-4))
    assert (plan.batch_size, plan.release.releases, plan.release.sample_size) == (50, 4, 50)
    rows = torch.nn.functional.normalize(torch.randn(100, 3, generator=torch.Generator().manual_seed(1)), dim=1)
    flow = make_flow("half-batches", rows, privacy=PrivacySpec(epsilon=5.0, delta=1e-4), n_projections=6,
                     privacy_seed=2, progress=False, config=FlowConfig(steps=4, n_particles=30, manifold="sphere"))
    flow.run()
    assert flow.target.ledger.releases == 4
