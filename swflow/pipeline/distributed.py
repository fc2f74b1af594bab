"""`torchrun --nproc-per-node N swflow generate ...`: one run with its particles and private rows sharded over the
ranks (gloo on CPU, NCCL on CUDA), exact global ranks. Rank 0 owns the run folder: it alone checks it, takes its
lock, writes the one checkpoint (every rank's state, gathered) and the outputs; the other ranks write nothing
there. A refusal (an occupied folder, a run to resume) reaches every rank."""
from __future__ import annotations

import os
from dataclasses import replace

from ..core.errors import RunFailed
from ..core.sources import PrivateData
from ..methods.registry import method, sharded_methods

__all__ = ["generate_distributed", "open_group", "rank_share"]


def generate_distributed(run, request, data: PrivateData, plan):
    """Every rank's part of :func:`swflow.pipeline.generate.generate` under torchrun: (the report, the number of
    ranks) on rank 0, None on the others."""
    import torch.distributed as dist

    _check(run, request)
    run_dir, out = open_group(run.flow.device, request)
    rank, world = dist.get_rank(), dist.get_world_size()
    try:
        report = _fit_shard(run, request, data, plan, out, rank, world)
        dist.barrier()  # every rank is done before rank 0 swaps the folder in
    except BaseException as err:
        if run_dir is not None:
            run_dir.abandon()  # kept for --resume when it holds a checkpoint
        if isinstance(err, RuntimeError) and not isinstance(err, RunFailed):  # a peer died or timed out
            raise RunFailed(f"rank {rank}: the distributed run failed ({err}); rank 0 checkpointed every "
                            "--checkpoint-every steps: rerun the same torchrun command with --resume") from err
        raise
    result = None
    if rank == 0:
        run_dir.commit()
        result = report, world
    dist.destroy_process_group()
    return result


def _check(run, request) -> None:
    if not method(run.method).sharded:
        raise ValueError(f"under torchrun only {', '.join(sharded_methods())} are sharded, not {run.method}")
    if request.conditional:
        raise ValueError("--conditional runs one flow per class in one process; run it without torchrun")
    if run.privacy.secure_noise:
        raise ValueError("under torchrun the ranks must draw the same batches from one shared privacy seed, "
                         "so --secure-noise is not available; leave --privacy-seed unset for a fresh secret seed")


def open_group(device: str, request, *, resumable: bool = True):
    """Join the process group (NCCL on ``device`` cuda, else gloo); rank 0 opens the run folder ``request.out``
    and every rank learns whether it was refused. (RunDir, its staging folder) on rank 0, (None, None) elsewhere."""
    from datetime import timedelta

    import torch
    import torch.distributed as dist

    from ..io.outdir import RunDir

    backend = "nccl" if device.startswith("cuda") else "gloo"
    if backend == "nccl":  # object collectives under NCCL run on each rank's own GPU
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    dist.init_process_group(backend, timeout=timedelta(minutes=10))
    run_dir, out, refusal = None, None, None
    if dist.get_rank() == 0:
        try:
            run_dir = RunDir(request.out, overwrite=request.overwrite, resume=request.resume, inputs=request.inputs,
                             resumable=resumable)
            out = run_dir.open()
        except ValueError as err:
            refusal = str(err)
    news = [refusal]
    dist.broadcast_object_list(news, src=0)
    if news[0] is not None:
        dist.destroy_process_group()
        raise ValueError(news[0])
    return run_dir, out


def _fit_shard(run, request, data: PrivateData, plan, out, rank: int, world: int):
    """The plan is resolved on all the rows; each rank fits its shard, and the ranks share one privacy seed
    (ProcessGroup.shared_privacy_seed: the typed one, or one rank 0 draws from the OS)."""
    from ..simulate.distributed import GatheredCheckpointer, ProcessGroup
    from .fitting import fit
    from .run import write_outputs

    config = replace(run.flow_config(plan), record_every=0)
    group = ProcessGroup(config.n_particles, mode=request.shard_mode)
    lo, hi = group.shard(data.rows.shape[0])
    result = fit(run, data.rows[lo:hi], plan=plan, config=config, communicator=group, progress=not request.quiet,
                 callbacks=[GatheredCheckpointer(None if out is None else out / "checkpoint.pt")],
                 run_config={**data.run_config, "world_size": world, "shard_mode": request.shard_mode})
    if rank == 0:
        write_outputs(out, result.particles.cpu().numpy(), result.report, data.codec.decode)
        (out / "checkpoint.pt").unlink(missing_ok=True)
    return result.report


def rank_share(n: int) -> tuple[int, int, int]:
    """This rank's contiguous share lo:hi of ``n`` records, and the number of ranks."""
    import torch.distributed as dist

    if not dist.is_initialized():
        raise ValueError("sharded=True runs under torchrun: initialize torch.distributed first")
    rank, world = dist.get_rank(), dist.get_world_size()
    return n * rank // world, n * (rank + 1) // world, world
