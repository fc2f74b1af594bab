"""docs/architecture.md's promises: a new method is one module plus one MethodSpec, and a new kind of release is
one strategy class plus one entry, and a new data source is one ChunkedRows class, with nothing else edited."""
import importlib
import sys
import textwrap
from dataclasses import dataclass

import numpy as np
import pytest
import torch

from swflow import FlowConfig, make_flow
from swflow.methods.plan import resolve_fixed
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
    from swflow.methods import registry

    # a method that builds the 004 per-step flow with half the directions it is given: its own builder
    module = temporary_module("my_half_flow", """
        from dataclasses import replace

        from swflow.methods.flows import build_central

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
    from swflow.methods import registry
    from swflow.methods import releases

    @dataclass(frozen=True)
    class EveryOtherRow(releases.PerStep):
        """Per-step releases whose batches are at most half the data set."""

        def batch(self, batch_size, dataset_size):
            return min(batch_size or dataset_size, dataset_size // 2)

    kind = EveryOtherRow("every-other", "batches of at most half the rows")
    monkeypatch.setitem(releases.RELEASES, kind.name, kind)
    spec = registry.MethodSpec("half-batches", "flow", "a test method", kind.name, ("steps", 4),
                               "swflow.methods.flows:build_central")
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


def test_a_new_data_source_is_one_chunked_rows_class(temporary_module, tmp_path):
    # rows in a CSV file, read 37 at a time by a class in a module of its own: dpswflow-hist counts them and
    # flows exactly as it does the same rows in memory; a method that needs rows in memory refuses the source
    module = temporary_module("my_csv_rows", """
        import numpy as np
        import torch

        from swflow.privacy.rows import ChunkedRows

        class CsvRows(ChunkedRows):
            def __init__(self, path, chunk_rows=37):
                self.path, self.chunk_rows = path, chunk_rows
                with open(path) as f:
                    self._n = sum(1 for _ in f)
                    f.seek(0)
                    self._d = len(f.readline().split(","))

            @property
            def shape(self):
                return (self._n, self._d)

            def chunks(self):
                for lo in range(0, self._n, self.chunk_rows):
                    block = np.loadtxt(self.path, delimiter=",", skiprows=lo, max_rows=self.chunk_rows, ndmin=2)
                    yield lo, torch.from_numpy(block.astype(np.float32))
    """)
    rows = torch.nn.functional.normalize(torch.randn(300, 3, generator=torch.Generator().manual_seed(4)), dim=1) * 0.9
    np.savetxt(tmp_path / "rows.csv", rows.numpy(), delimiter=",", fmt="%.9g")
    rows = torch.from_numpy(np.loadtxt(tmp_path / "rows.csv", delimiter=",").astype(np.float32))  # as the file holds them
    source = importlib.import_module(module).CsvRows(tmp_path / "rows.csv")
    assert source.shape == (300, 3) and len(source) == 300
    spec = PrivacySpec(epsilon=2.0, delta=1e-5, count_noise="gaussian")
    config = FlowConfig(steps=6, n_particles=80)
    flows = [make_flow("dpswflow-hist", data, privacy=spec, config=config, n_projections=8, pool_size=16, bins=12,
                       privacy_seed=5, progress=False) for data in (rows, source)]
    results = [flow.run() for flow in flows]
    assert torch.equal(flows[0].target.released_counts, flows[1].target.released_counts)
    assert torch.equal(results[0].particles, results[1].particles)
    with pytest.raises(ValueError, match="needs the private rows in memory"):
        make_flow("dpswflow", source, privacy=spec, config=config, n_projections=8, progress=False)


def test_a_new_kind_of_data_is_one_source_and_one_codec(temporary_module, tmp_path, monkeypatch):
    # records are compass bearings in degrees, one per line of a text file (the source); the codec puts each on
    # the unit circle and reads particles back as bearings. Both live in a module of their own, registered by name.
    from swflow import Synthesizer
    from swflow.pipeline.fitting import fit
    from swflow.sources import CODECS, SOURCES, SourceRequest, open_source, register_codec, register_source

    module = temporary_module("my_bearings", """
        import numpy as np
        import torch

        from swflow.core.sources import Records

        def bearings_source(request, codec):
            return Records(np.loadtxt(request.location, ndmin=1), run_config={"bearings": str(request.location)})

        class CircleCodec:
            name, manifold, norm_bound = "circle", "sphere", None

            def encode(self, degrees):
                angle = np.radians(degrees)
                return torch.from_numpy(np.stack([np.cos(angle), np.sin(angle)], axis=1).astype(np.float32))

            def decode(self, rows):
                rows = np.asarray(rows)
                return np.degrees(np.arctan2(rows[:, 1], rows[:, 0])) % 360

            def describe(self):
                return {"codec": "circle"}

        def circle_codec(request):
            return CircleCodec()
    """)
    monkeypatch.setattr("swflow.sources.registry.SOURCES", dict(SOURCES))
    monkeypatch.setattr("swflow.sources.registry.CODECS", dict(CODECS))
    register_source("bearings", f"{module}:bearings_source")
    register_codec("circle", f"{module}:circle_codec")
    bearings = np.random.default_rng(7).normal(90, 20, size=400) % 360
    np.savetxt(tmp_path / "bearings.txt", bearings)
    data = open_source(SourceRequest("bearings", tmp_path / "bearings.txt", "circle"))
    assert data.rows.shape == (400, 2) and data.manifold == "sphere"
    assert torch.allclose(data.rows.norm(dim=1), torch.ones(400))
    assert data.run_config == {"codec": "circle", "bearings": str(tmp_path / "bearings.txt")}
    settings = Synthesizer("dpswflow-hist", epsilon=4.0, delta=1e-5, count_noise="gaussian", steps=30,
                           n_particles=300, manifold="sphere", privacy_seed=3).settings
    result = fit(settings, data.rows, run_config=data.run_config)
    again = fit(settings, data.codec.encode(np.loadtxt(tmp_path / "bearings.txt")))
    assert torch.equal(result.particles, again.particles)  # the path adds the encoding, nothing else
    assert result.report.run_config["bearings"] == str(tmp_path / "bearings.txt")
    decoded = data.codec.decode(result.particles.numpy())
    circular_mean = np.degrees(np.angle(np.exp(1j * np.radians(decoded)).mean())) % 360
    assert abs(circular_mean - 90) < 10  # the private bearings centre on 90 degrees
    with pytest.raises(ValueError, match="unknown source 'compass'"):
        open_source(SourceRequest("compass", tmp_path / "bearings.txt", "circle"))
