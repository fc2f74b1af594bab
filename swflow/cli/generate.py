"""`swflow generate`: a method on a dataset's private split or on private vectors, into a run directory."""
from __future__ import annotations

import argparse
import os
import time
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from ..methods.registry import method, sharded_methods
from ._common import (DATASETS, RunFailed, UsageError, _as_flags, flow_config_args, privacy_args, run_plan, settings,
                      shape_args, staged)
from .autoencoder import write_gif


@dataclass(frozen=True)
class Request:
    """What `swflow generate` is asked besides the run's settings: where the run goes and how it reports.
    Built once from the flags, beside the settings; nothing reads the flags after these two exist."""

    out: str
    inputs: tuple  # the private files (--data, --images): an output folder may not hold them
    overwrite: bool = False
    resume: bool = False
    quiet: bool = False
    conditional: bool = False
    labels_public: bool = False
    label_set: tuple[int, ...] = ()  # the public label set of a --conditional run
    decoder: str = "autoencoder"
    shard_mode: str = "exact"

    @classmethod
    def of(cls, args) -> "Request":
        return cls(out=args.out, inputs=(args.data, args.images), overwrite=args.overwrite, resume=args.resume,
                   quiet=args.quiet, conditional=args.conditional, labels_public=args.labels_public,
                   label_set=_label_set(args) if args.conditional else (), decoder=args.decoder,
                   shard_mode=args.shard_mode)


def cmd_generate(args) -> int:
    from ..io.resources import check_device, check_run

    if args.table is not None:
        from .tables import cmd_generate_table

        return cmd_generate_table(args)
    if args.schema is not None:
        raise UsageError("--schema belongs to a --table run")
    check_device(args.device)
    if sum(x is not None for x in (args.data, args.dataset, args.images)) != 1:
        raise UsageError("give exactly one of --dataset NAME (private split, encoded by its autoencoder), "
                         "--images PRIVATE (your private images, encoded by --checkpoint), --data FILE "
                         "(.npy/.npz/.h5 rows in the flow's space) or --table PRIVATE --schema SCHEMA.json")
    if args.population is not None and args.dataset is None:
        raise UsageError("--population draws from a dataset's private split: give --dataset")
    if args.decoder == "nearest-public" and args.data is not None:
        raise UsageError("--decoder nearest-public picks public images by their codes: it needs --dataset or "
                         "--images (rows of --data have no public images)")
    if args.labels_public and not args.conditional:
        raise UsageError("--labels-public applies to --conditional runs only")
    if args.conditional and method(args.method).kind != "flow":
        raise UsageError(f"--conditional runs one flow per class; {args.method} is not a flow method")
    if args.conditional and args.dataset is None:
        raise UsageError("--conditional needs --dataset (its labels split the private rows into classes)")
    decode, labels, source, norm_bound, private_images = None, None, {"data": str(args.data)}, None, None
    manifold = "sphere"  # codes of an autoencoder lie on the unit sphere
    if args.dataset is not None:
        from autoencoders.encoded import encoded_split

        encoded = encoded_split(args.dataset, "private", root=args.data_root, checkpoint=args.checkpoint,
                                population=args.population)
        data, labels, decode, meta = encoded.latents, encoded.labels, encoded.decode, encoded.meta
        private_images = encoded.images
        source = {"dataset": args.dataset, "autoencoder": meta["name"], "autoencoder_sha256": meta["weights_sha256"]}
        if args.checkpoint and Path(args.checkpoint).suffix == ".pt":  # found by path by later commands
            source["autoencoder_path"] = str(Path(args.checkpoint).resolve())
        if encoded.population is not None:
            source["population"] = encoded.population
    elif args.images is not None:
        data, decode, meta, source, private_images = _encode_own_images(args)
    else:
        manifold, norm_bound = _manifold_from_domain(args)
        data = _private_rows(args)
    if args.decoder == "nearest-public":
        from autoencoders.nearest import nearest_public_decoder
        from autoencoders.encoded import run_autoencoder

        decode = nearest_public_decoder(run_autoencoder(source)[0], meta, root=args.data_root)
        source["decoder"] = "nearest-public"
    request = Request.of(args)
    run = settings(args, manifold=manifold, norm_bound=norm_bound)
    plan = run_plan(run, data.shape[0], data.shape[1])
    if not run.flow.record_every:  # the command's default: about 50 trajectory frames over the run
        run = replace(run, flow=replace(run.flow, record_every=max(1, plan.steps // 50)))
    # from here on: the settings, the plan and the request; the flags are not read again
    image_values = 0 if decode is None else int(np.prod(meta["image_shape"]))
    try:
        check_run(spec=method(run.method), settings=run, plan=plan, dim=data.shape[1], image_values=image_values,
                  out=request.out, streamed_chunk=getattr(data, "chunk_rows", None))
    except ValueError as err:
        raise UsageError(_as_flags(str(err))) from None
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:  # started by torchrun: rank 0 owns the run folder
        if run.adapt.adapt_decoder:
            raise UsageError("--adapt-decoder runs on one process (DP-SGD through Opacus): run it without torchrun")
        return _generate_distributed(request, data, run, plan, decode, source)
    if run.adapt.adapt_decoder:
        if private_images is None or request.decoder != "autoencoder" or request.conditional:
            raise UsageError("--adapt-decoder fine-tunes an autoencoder's sampling decoder on the private images: it "
                             "needs --dataset or --images, the default --decoder, and no --conditional")
        with staged(request.out, overwrite=request.overwrite, resume=request.resume, inputs=request.inputs) as out:
            return _generate_adapted(out, request, data, private_images, run, plan, meta, source)
    with staged(request.out, overwrite=request.overwrite, resume=request.resume, inputs=request.inputs) as out:
        return _generate_into(out, request, data, labels, run, plan, decode, source)


def _generate_adapted(out: Path, request: Request, data, images, run, plan, meta: dict, source: dict) -> int:
    """--adapt-decoder: the histogram flow and a DP-SGD adaptation of the decoder, one budget."""
    from autoencoders.encoded import run_autoencoder
    from ..pipeline.run import run_adapted_flow_to_dir
    from ..simulate.threads import step_threads

    t0 = time.perf_counter()
    model, meta = run_autoencoder(source)
    config = run.flow_config(plan)
    report = run_adapted_flow_to_dir(run, data, images, out, plan=plan, config=config, model=model, meta=meta,
                                     run_config=source, progress=not request.quiet,
                                     threads=step_threads(config.n_particles, plan.n_projections))
    print(f"{report.statement}\nwrote {request.out}/ (privacy.json with both releases, the adapted decoder decoder.pt, "
          f"samples.h5, trajectory.h5, samples.png) in {time.perf_counter() - t0:.1f} s")
    return 0


def _encode_own_images(args):
    """--images PRIVATE: encode them with --checkpoint's encoder (trained on public images only). The
    images are read at the checkpoint's size and channels; nothing about them is recorded but the path."""
    import torch

    from autoencoders import load_autoencoder

    from ..io.images import load_images
    from ..io.splits import refuse_public

    if args.checkpoint is None:
        raise UsageError("--images needs --checkpoint NAME or PATH.pt: the autoencoder trained on your public images "
                         "(`swflow train-ae --images PUBLIC --name NAME`)")
    model, meta = load_autoencoder(args.checkpoint)
    channels, size = meta["image_shape"][0], meta["image_shape"][-1]
    images = load_images(args.images, size=size, channels=channels)
    refuse_public(images, meta, where=str(args.images))  # as Synthesizer.fit does, for any checkpoint
    if args.manifold not in (None, "sphere"):
        raise UsageError("the autoencoder's codes lie on the unit sphere: --images runs use --manifold sphere")
    print(f"{args.images}: {len(images)} private images, encoded by {meta['name']} ({meta['architecture']}, "
          f"latent {meta['latent']}, trained on {meta.get('source', {}).get('path', meta['dataset'])})")
    where = Path(args.checkpoint)
    source = {"images": str(args.images), "autoencoder": meta["name"], "autoencoder_sha256": meta["weights_sha256"]}
    if where.suffix == ".pt":  # a user's checkpoint outside the shipped ones: later commands find it by path
        source["autoencoder_path"] = str(where.resolve())
    if meta.get("source") is not None:
        source["public_images"] = meta["source"]
    return torch.from_numpy(model.encode_images(images)), model.decode_images, meta, source, images


def _private_rows(args):
    """--data FILE: the rows in memory, or, for dpswflow-hist and an HDF5 file, on disk (read in chunks when they
    are counted: the private data may be larger than memory)."""
    import torch

    from ..io.arrays import h5_dataset_name, load_array

    if method(args.method).release.of_counts and Path(args.data).suffix.lower() in (".h5", ".hdf5"):
        from ..privacy.rows import StreamedRows

        return StreamedRows(args.data, dataset=h5_dataset_name(args.data))
    return torch.from_numpy(load_array(args.data))


def _manifold_from_domain(args) -> tuple[str, float | None]:
    """--data: the manifold the file declares (swflow encode writes 'sphere'), else the one the user states (a typed
    --manifold wins either way), and the bound R the file declares on its rows' norms (None: it declares none, and
    R = 1). The rows' norms are private, so neither is ever guessed from them."""
    from ..io.arrays import declared_domain

    domain = declared_domain(args.data)
    if args.manifold is None and domain is not None:
        print(f"{args.data} declares its rows on the {domain['domain']} (R = {domain['norm_bound']:g}"
              + (f", encoded by {domain['autoencoder']}" if "autoencoder" in domain else "") + f"): --manifold "
              f"{domain['domain']}")
    elif args.manifold is None and method(args.method).kind == "flow":
        raise UsageError(f"{args.data} does not say where its rows live: pass --manifold sphere (rows on the unit "
                         "sphere, such as autoencoder latents) or --manifold ball (rows anywhere in the ball of "
                         "radius R). Files from `swflow encode` declare it themselves")
    return ("ball" if domain is None else domain["domain"]), (None if domain is None else domain["norm_bound"])


def _generate_into(out: Path, request: Request, data, labels, run, plan, decode, source: dict) -> int:
    from ..pipeline.run import run_flow_to_dir, run_generator_to_dir
    from ..simulate.threads import step_threads

    t0 = time.perf_counter()
    if method(run.method).kind == "generator":
        report = run_generator_to_dir(run, data, out, plan=plan, decoder=decode, progress=not request.quiet,
                                      checkpoint_every=run.flow.checkpoint_every,
                                      run_config={**source, "steps": plan.steps, "batch_size": plan.rows_per_step,
                                                  **run.option_values()})
        print(f"{report.statement}\nwrote {request.out}/ (privacy.json, samples.h5, samples.png) "
              f"in {time.perf_counter() - t0:.1f} s")
        return 0
    config = run.flow_config(plan)
    threads = step_threads(config.n_particles, plan.n_projections)
    if request.conditional:
        from ..pipeline.conditional import run_conditional_to_dir
        report = run_conditional_to_dir(run, data, labels, out, classes=request.label_set, plan=plan, config=config,
                                        labels_public=request.labels_public, decoder=decode, run_config=source,
                                        progress=not request.quiet, threads=threads)
        print(f"{report.statement}\n  {report.notes.get('labels_note', '')}\n"
              f"wrote {request.out}/ (privacy.json, samples.h5 with labels, samples.png; one flow per class in "
              f"classes/) in {time.perf_counter() - t0:.1f} s")
        return 0
    report = run_flow_to_dir(run, data, out, plan=plan, config=config, decoder=decode, run_config=source,
                             progress=not request.quiet, threads=threads).report
    if decode is not None:
        write_gif(out, decode)
    print(f"{report.statement}\nwrote {request.out}/ (privacy.json, samples.h5, trajectory.h5, samples.png) "
          f"in {time.perf_counter() - t0:.1f} s")
    return 0


def _label_set(args) -> tuple[int, ...]:
    """The public label set of a --dataset run: the population's declared classes, or the dataset's schema."""
    from ..io.data import LABEL_SETS
    from ..io.populations import proportions

    if args.population is not None:
        return tuple(sorted(proportions(args.population)))
    if args.dataset not in LABEL_SETS:
        raise UsageError(f"{args.dataset} has no labels: --conditional needs a labelled dataset "
                         f"({', '.join(sorted(LABEL_SETS))})")
    return LABEL_SETS[args.dataset]


def _generate_distributed(request: Request, data, run, plan, decode, source) -> int:
    """`torchrun --nproc-per-node N swflow generate ...`: particles and private rows sharded over the
    ranks (gloo on CPU, NCCL on CUDA), exact global ranks. Rank 0 owns the run folder: it alone checks
    it, takes its lock, writes the one checkpoint (every rank's state, gathered) and the outputs; the
    other ranks write nothing there. A refusal (an occupied --out, a run to resume) reaches every rank."""
    from datetime import timedelta

    import torch
    import torch.distributed as dist

    from ..io.outdir import RunDir
    from ..pipeline.fitting import fit
    from ..pipeline.run import write_outputs
    from ..simulate.distributed import GatheredCheckpointer, ProcessGroup

    t0 = time.perf_counter()
    if not method(run.method).sharded:
        raise UsageError(f"under torchrun only {', '.join(sharded_methods())} are sharded, not {run.method}")
    if request.conditional:
        raise UsageError("--conditional runs one flow per class in one process; run it without torchrun")
    if run.privacy.secure_noise:
        raise UsageError("under torchrun the ranks must draw the same batches from one shared privacy seed, "
                         "so --secure-noise is not available; leave --privacy-seed unset for a fresh secret seed")
    backend = "nccl" if run.flow.device.startswith("cuda") else "gloo"
    if backend == "nccl":  # object collectives under NCCL run on each rank's own GPU
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    dist.init_process_group(backend, timeout=timedelta(minutes=10))
    rank, world = dist.get_rank(), dist.get_world_size()
    run_dir, out, refusal = None, None, None
    if rank == 0:
        try:
            run_dir = RunDir(request.out, overwrite=request.overwrite, resume=request.resume, inputs=request.inputs)
            out = run_dir.open()
        except ValueError as err:
            refusal = str(err)
    news = [refusal]
    dist.broadcast_object_list(news, src=0)
    refusal = news[0]
    if refusal is not None:
        dist.destroy_process_group()
        raise UsageError(refusal)
    try:
        # the plan is resolved on all the rows; each rank gets its shard, and the ranks share one privacy
        # seed (ProcessGroup.shared_privacy_seed: the typed one, or one rank 0 draws from the OS)
        config = replace(run.flow_config(plan), record_every=0)
        group = ProcessGroup(config.n_particles, mode=request.shard_mode)
        lo, hi = group.shard(data.shape[0])
        result = fit(run, data[lo:hi], plan=plan, config=config, communicator=group, progress=not request.quiet,
                     callbacks=[GatheredCheckpointer(None if out is None else out / "checkpoint.pt")],
                     run_config={**source, "world_size": world, "shard_mode": request.shard_mode})
        if rank == 0:
            report = result.report
            write_outputs(out, result.particles.cpu().numpy(), report, decode)
            (out / "checkpoint.pt").unlink(missing_ok=True)
        dist.barrier()  # every rank is done before rank 0 swaps the folder in
    except BaseException as err:
        if run_dir is not None:
            run_dir.abandon()  # kept for --resume when it holds a checkpoint
        if isinstance(err, RuntimeError) and not isinstance(err, RunFailed):  # a peer died or timed out
            raise RunFailed(f"rank {rank}: the distributed run failed ({err}); rank 0 checkpointed every "
                            "--checkpoint-every steps: rerun the same torchrun command with --resume") from err
        raise
    if rank == 0:
        run_dir.commit()
        print(f"{report.statement}\nwrote {request.out}/ on {world} ranks in {time.perf_counter() - t0:.1f} s")
    dist.destroy_process_group()
    return 0


def register(sub) -> None:
    """Add this module's commands to the `swflow` parser."""
    p = sub.add_parser(
        "generate", help="run a flow on a dataset's private split or on private vectors",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Run a flow on private data and write privacy.json, samples.h5, trajectory.h5 and "
        "samples.png\n(plus flow.gif when an autoencoder decodes the particles).\n\n"
        "  --dataset NAME  the private half of NAME's training set, encoded by checkpoints/NAME.pt\n"
        "  --images DIR    your private images (a folder, or an .npy/.npz/.h5 image array), encoded by\n"
        "                  --checkpoint, an autoencoder trained on your public images (swflow train-ae --images)\n"
        "  --data FILE     rows of a .npy/.npz/.h5 file, already in the flow's space; rows must lie\n"
        "                  in the unit ball (the sensitivity bound needs it) unless --clip\n"
        "  --table FILE    a private table (.csv/.parquet) with --schema SCHEMA.json: writes samples.csv\n\n"
        "examples:\n"
        "  swflow generate --config fashion-mnist-dpswflow --out runs/fm     (a shipped config, or a path)\n"
        "  swflow generate --dataset digits --method dpswflow-r --epsilon 5 --epochs 10 --batch-size 100 --out runs/d\n"
        "  swflow generate --data rows.npy --clip --method dpswflow --epsilon 8 --steps 500 \\\n"
        "      --n-projections 25 --pool-size 31 --out runs/x\n"
        "  swflow generate --table private.csv --schema schema.json --method dpswflow-hist --epsilon 1 \\\n"
        "      --delta 1e-9 --out runs/t\n\n"
        "Give --epsilon to calibrate the noise, or --noise-multiplier to see the epsilon it buys.")
    p.add_argument("--dataset", choices=DATASETS,
                   help="run on the private split of a dataset, in the latent space of its autoencoder")
    p.add_argument("--data-root", help="directory holding the dataset's files (see `swflow train-ae --help`)")
    p.add_argument("--checkpoint", help="autoencoder name in checkpoints/ or path to a .pt (default: the dataset's)")
    p.add_argument("--data", help=".npy/.npz/.h5 file, rows = private records in the flow's space")
    p.add_argument("--images", metavar="PRIVATE", help="your private images (folder or image array), encoded by "
                   "--checkpoint; samples are decoded by it")
    from ..io.populations import POPULATIONS

    p.add_argument("--population", choices=sorted(POPULATIONS),
                   help="with --dataset: the private data is a declared sub-population of the private split "
                   "(skewed: all classes, 32%% down to 1%%; footwear: Fashion-MNIST classes 5, 7, 9; classes-579: "
                   "classes 5, 7, 9 of any dataset), scored "
                   "against the same population of the test part; the autoencoder keeps the broad public split")
    p.add_argument("--decoder", choices=("autoencoder", "nearest-public"), default="autoencoder",
                   help="how particles become images. autoencoder: its sampling decoder (new images); "
                   "nearest-public: the public image (the dataset's public split, or the collection --checkpoint "
                   "was trained on) whose code is nearest each particle: public images chosen by the private "
                   "flow, post-processing at no privacy cost")
    p.add_argument("--config", help="TOML file with [run] [privacy] [shape] [flow] tables, or the name of a shipped "
                   "config (the papers' settings: celeba-dpswflow[-r], fashion-mnist-dpswflow[-r][-eps5|-paper-noise], "
                   "mnist-dpswflow[-r][-eps5|-paper-noise]); command-line flags override it")
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument("--clip", action="store_true", help="clip rows to the unit ball instead of refusing them")
    p.add_argument("--conditional", action="store_true",
                   help="one flow per class of --dataset (labelled samples). Labels are private: with dpswflow-hist "
                   "every class of the dataset's label set gets a histogram with the same noise, which covers a "
                   "record changing class, and class sizes are never published")
    p.add_argument("--labels-public", action="store_true",
                   help="with --conditional: treat the labels and exact class counts as public (neighbours differ in "
                   "one record's features within its class; parallel composition over classes); any flow method")
    p.add_argument("--overwrite", action="store_true")
    p.add_argument("--resume", action="store_true")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    from .tables import add_table_args

    add_table_args(p)
    shape_args(p, with_data_shape=False)
    privacy_args(p)
    flow_config_args(p)
    from ..core.config import AdaptSettings
    from ..pipeline.options import add_options

    add_options(p.add_argument_group("DP adaptation of the decoder (dpswflow-hist with --dataset or --images)"),
                AdaptSettings)
    p.set_defaults(func=cmd_generate)
