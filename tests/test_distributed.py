"""Two gloo processes on CPU against one process: exact smoothing (all-reduced grid) and exact global
ranks equal, sketch mode within its bound."""
from dataclasses import replace
import math

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from swflow.kernels.sliced import quantile, rank_levels
from swflow.methods.flows import build_flow, make_flow
from swflow.methods.plan import resolve_fixed
from swflow.privacy import PrivacySpec
from swflow.pipeline.fitting import fit
from swflow.pipeline.settings import from_keywords
from swflow.simulate.distributed import (GatheredCheckpointer, ProcessGroup, exact_levels, level_error_bound, shard_range,
                                        sketch_levels)
from swflow.simulate.flow import FlowConfig

N_ROWS, N_PARTICLES = 600, 501  # odd: unequal particle shards


def _data():
    g = torch.Generator().manual_seed(0)
    centres = torch.tensor([[0.5, 0.0], [-0.5, 0.2], [0.0, -0.5]])
    return centres[torch.randint(0, 3, (N_ROWS,), generator=g)] + 0.08 * torch.randn(N_ROWS, 2, generator=g)


CONFIG = FlowConfig(steps=15, n_particles=N_PARTICLES, step_size=1.0, diffusion=1e-4, record_every=0,
                    checkpoint_every=0, seed=3)
SAMPLED = replace(CONFIG, smoothing="sampled")  # the rank modes only matter for 004's sampled estimator
SPEC = PrivacySpec(epsilon=20.0, delta=1e-5)


def _worker(rank, world, store_path, out_path, mode, stop_after=None, config=CONFIG):
    dist.init_process_group("gloo", init_method=f"file://{store_path}", rank=rank, world_size=world)
    torch.set_num_threads(1)
    data = _data()
    lo, hi = shard_range(N_ROWS, rank, world)
    settings = from_keywords("dpswflow-r", epsilon=SPEC.epsilon, delta=SPEC.delta, steps=config.steps, n_projections=12,
                             batch_size=200, privacy_seed=7)
    plan = settings.plan(N_ROWS, 2)  # resolved on all the rows; each rank runs on its shard
    group = ProcessGroup(config.n_particles, mode=mode, sketch=64)
    lo, hi = group.shard(N_ROWS)
    checkpoints = GatheredCheckpointer(f"{out_path}.ckpt" if rank == 0 else None)
    if stop_after is not None:  # an interrupted run: checkpoint, then the processes die
        flow = build_flow(data[lo:hi], plan, privacy=SPEC, config=config, privacy_seed=7, callbacks=[checkpoints],
                          communicator=group)
        flow.setup()
        for _ in range(stop_after):
            flow.step_once()
        checkpoints.save(flow)
        dist.destroy_process_group()
        return
    result = fit(settings, data[lo:hi], plan=plan, config=config, callbacks=[checkpoints], communicator=group)
    if rank == 0:
        torch.save({"particles": result.particles, "ledger": result.report.ledger,
                    "epsilon": result.report.epsilon}, out_path)
    dist.destroy_process_group()


def _run(tmp_path, mode, stop_after=None, tag="", config=CONFIG):
    out = tmp_path / f"{mode}.pt"
    mp.spawn(_worker, args=(2, str(tmp_path / f"store-{mode}{tag}"), str(out), mode, stop_after, config),
             nprocs=2, join=True)
    return None if stop_after is not None else torch.load(out, weights_only=True)


def _single(config):
    flow = make_flow("dpswflow-r", _data(), privacy=SPEC, config=config, n_projections=12, batch_size=200,
                     privacy_seed=7, progress=False)
    flow.run()
    return flow


@pytest.fixture(scope="module")
def single():
    return _single(CONFIG)


@pytest.fixture(scope="module")
def single_sampled():
    return _single(SAMPLED)


def test_shard_ranges_cover_everything_once():
    ranges = [shard_range(10, r, 3) for r in range(3)]
    assert ranges == [(0, 4), (4, 7), (7, 10)]


def test_exact_levels_are_global_ranks_and_sketch_levels_stay_within_the_bound():
    g = torch.Generator().manual_seed(0)
    shards = [torch.randn(4, n, generator=g, dtype=torch.float64).sort(dim=1).values for n in (300, 301, 250)]
    n = sum(s.shape[1] for s in shards)
    everything = torch.cat(shards, dim=1)
    for rank, values in enumerate(shards):
        # independent reference: count of all values strictly below, by brute force
        below = (everything[:, None, :] < values[:, :, None]).sum(-1).double()
        torch.testing.assert_close(exact_levels(values, shards, rank, n), (below + 0.5) / n)
        for k in (16, 64):
            sketches = [quantile(s, rank_levels(k, dtype=torch.float64)) for s in shards]
            approx = sketch_levels(values, sketches, [s.shape[1] for s in shards])
            err = (approx - exact_levels(values, shards, rank, n)).abs().max()
            assert err <= level_error_bound(k, 250)


def test_two_processes_equal_one_in_exact_mode(tmp_path, single):
    two = _run(tmp_path, "exact")
    torch.testing.assert_close(two["particles"], single.particles, rtol=0, atol=1e-4)
    assert two["ledger"] == single.target.ledger.state_dict()  # same releases, same accounting
    assert two["epsilon"] == single.target.epsilon_spent()


def test_exact_global_ranks_equal_one_process_with_sampled_smoothing(tmp_path, single_sampled):
    two = _run(tmp_path, "exact", config=SAMPLED)
    torch.testing.assert_close(two["particles"], single_sampled.particles, rtol=0, atol=1e-4)


def test_sketch_mode_stays_within_its_bound(tmp_path, single_sampled):
    single = single_sampled
    two = _run(tmp_path, "sketch", config=SAMPLED)
    gap = (two["particles"] - single.particles).norm(dim=1)
    # levels are off by at most 1/K + 1/n_r per step; the particles move by a fraction of the
    # quantile spread times that, summed over steps
    bound = level_error_bound(64, N_PARTICLES // 2)
    assert bound < 0.02
    assert gap.mean() < CONFIG.steps * bound and gap.mean() > 0
    assert math.isfinite(two["epsilon"]) and two["epsilon"] == single.target.epsilon_spent()


def test_interrupted_two_process_run_resumes_to_the_same_particles(tmp_path, single):
    _run(tmp_path, "exact", stop_after=8, tag="-first")
    saved = torch.load(tmp_path / "exact.pt.ckpt", weights_only=True)  # one file, every rank's state
    assert saved["world_size"] == 2 and [state["step"] for state in saved["ranks"]] == [8, 8]
    resumed = _run(tmp_path, "exact", tag="-second")
    torch.testing.assert_close(resumed["particles"], single.particles, rtol=0, atol=1e-4)
    assert resumed["ledger"] == single.target.ledger.state_dict()  # the spent budget survived the restart


def _hist_worker(rank, world, store_path, out_path, spec, seed_known):
    dist.init_process_group("gloo", init_method=f"file://{store_path}", rank=rank, world_size=world)
    torch.set_num_threads(1)
    data = _data() / 0.8  # inside the unit ball
    group = ProcessGroup(CONFIG.n_particles)
    lo, hi = group.shard(N_ROWS)
    plan = resolve_fixed("dpswflow-hist", steps=CONFIG.steps, n_projections=8, dataset_size=N_ROWS, dim=2,
                         privacy=spec, pool_size=32, bins=16)
    flow = build_flow(data[lo:hi], plan, privacy=spec, config=CONFIG, privacy_seed=7 if seed_known else None,
                      communicator=group)
    flow.run()
    particles = flow.gather_particles()
    torch.save({"particles": particles, "ledger": flow.target.ledger.state_dict(),
                "counts": flow.target.released_counts}, f"{out_path}.rank{rank}")
    dist.destroy_process_group()


HIST_SPEC = PrivacySpec(epsilon=5.0, delta=1e-5, count_noise="gaussian")  # a shared seed: comparable with one process


def test_sharded_discrete_noise_is_drawn_once_and_shared():
    # OpenDP's sampler takes no seed: rank 0 draws the noise and every rank holds the same noisy counts
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        out = f"{tmp}/hist.pt"
        mp.spawn(_hist_worker, args=(2, f"{tmp}/store", out, PrivacySpec(epsilon=5.0, delta=1e-5), False), nprocs=2,
                 join=True)
        ranks = [torch.load(f"{out}.rank{r}", weights_only=True) for r in range(2)]
    assert torch.equal(ranks[0]["counts"], ranks[1]["counts"])
    assert torch.equal(ranks[0]["counts"], ranks[0]["counts"].round())  # integer noise
    assert ranks[0]["ledger"] == ranks[1]["ledger"] and ranks[0]["ledger"][0]["mechanism"] == "discrete-gaussian"


def test_histogram_flow_sharded_equals_one_process(tmp_path):
    out = tmp_path / "hist.pt"
    mp.spawn(_hist_worker, args=(2, str(tmp_path / "store-hist"), str(out), HIST_SPEC, True), nprocs=2, join=True)
    sharded = torch.load(f"{out}.rank0", weights_only=True)
    flow = make_flow("dpswflow-hist", _data() / 0.8, privacy=HIST_SPEC, config=CONFIG, n_projections=8,
                     pool_size=32, bins=16, privacy_seed=7, progress=False)
    flow.run()
    assert sharded["ledger"] == flow.target.ledger.state_dict()  # one release, counted once
    assert torch.allclose(sharded["particles"], flow.particles, atol=1e-4)
