"""The autoencoder side of the command line: private latents of a dataset, decoders of runs,
`swflow demo`, `swflow encode` and `swflow train-ae`."""
from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

from ..core.config import PrivacySpec
from ._common import DATASETS, UsageError
from ..io.outdir import staged


AE_DEFAULTS = {"digits": ("digits8", 8), "fashion-mnist": ("liutkus32", 8), "mnist": ("liutkus32", 8),
               "celeba": ("dcgan64", 48)}


MAX_GIF_FRAMES = 50


def write_gif(out: Path, decode) -> None:
    from ..evaluate.animate import animate_trajectory

    animate_trajectory(out / "trajectory.h5", out / "flow.gif", decode=decode, frames=MAX_GIF_FRAMES)


def run_decoder(run_config: dict, run_dir: Path):
    """The decoder a run used: its autoencoder's, its own adapted one (decoder.pt in the run; both sha256 checked)
    or the nearest public image; None for --data runs."""
    if "autoencoder" not in run_config:
        return None
    from autoencoders.nearest import nearest_public_decoder
    from autoencoders.encoded import run_autoencoder

    if run_config.get("decoder") == "adapted":
        from autoencoders import load_autoencoder

        return load_autoencoder(Path(run_dir) / "decoder.pt",
                                expected_sha256=run_config["decoder_sha256"])[0].decode_images
    model, meta = run_autoencoder(run_config)
    if run_config.get("decoder") == "nearest-public":
        return nearest_public_decoder(model, meta)
    return model.decode_images


def cmd_demo(args) -> int:
    t0 = time.perf_counter()
    with staged(args.out, overwrite=args.overwrite, resume=args.resume) as out:
        _demo_into(out, args)
    print(f"wrote {args.out}/: privacy_cost.png, samples.png, flow.gif, samples.h5, trajectory.h5, privacy.json, "
          f"split_manifest.json  ({time.perf_counter() - t0:.1f} s)")
    return 0


def _demo_into(out: Path, args) -> None:
    from ..io.data import write_manifest
    from autoencoders.encoded import encoded_split
    from ..pipeline.run import run_flow_to_dir
    from ..pipeline.settings import from_keywords

    private, _, decode, split, meta = tuple(encoded_split("digits", "private"))[:5]
    write_manifest(split, out / "split_manifest.json", dataset="digits")
    print(f"digits: autoencoder {meta['name']} ({meta['architecture']}, latent {meta['latent']}) was trained on "
          f"the {len(split.public)} public rows; the {len(split.private)} private rows are the flow's target")
    # Few full-batch releases beat many small ones at this data size; these settings were chosen
    # by comparing particles with the *public* latents, so they cost no private data.
    settings = from_keywords("dpswflow-r", epsilon=args.epsilon, delta=args.delta, n_projections=64,
                             batch_size=len(private),  # a full batch
                             steps=args.steps, step_size=1.0, n_particles=args.n_particles, manifold="sphere",
                             record_every=1, checkpoint_every=1, seed=args.seed)  # privacy noise: a fresh OS seed
    result = run_flow_to_dir(settings, private, out, decoder=decode,
                             run_config={"dataset": "digits", "autoencoder": meta["name"],
                                         "autoencoder_sha256": meta["weights_sha256"]})
    report = result.report
    write_gif(out, decode)
    _privacy_cost_picture(out / "privacy_cost.png", result.particles, split, decode, settings, args.epsilon)
    print(report.statement)
    print(f"  noise multiplier {report.noise_multiplier:.3f}, {report.steps} releases of all "
          f"{report.dataset_size} private rows on 64 directions")


def _privacy_cost_picture(path: Path, particles, split, decode, settings, epsilon: float,
                          show: int = 40) -> None:
    """Panels on one grid: real digits of the PUBLIC split (private rows never reach an output), the
    same digits through the autoencoder (the decoder's floor), the flow without noise (eps = inf) fitted on the
    PUBLIC split's codes (a noiseless fit on the private rows would be an unaccounted release), and the private
    run's particles."""
    import math
    from dataclasses import replace

    from ..evaluate.animate import save_panels
    from ..io.data import load_dataset
    from ..pipeline.fitting import fit
    from ..privacy import PrivacySpec

    import torch

    from autoencoders import load_autoencoder

    public_images = load_dataset("digits")[0][split.public]
    model, _ = load_autoencoder("digits")
    with torch.no_grad():
        public_codes = torch.as_tensor(model.encode_images(public_images))
        reconstructed = model.decode_images(public_codes[:show].numpy())
    free = fit(replace(settings, method="swf", privacy=PrivacySpec(epsilon=math.inf),
                       flow=replace(settings.flow, record_every=0, checkpoint_every=0)), public_codes).particles
    save_panels([("real digits (public split)", public_images[:show]),
                 ("the same through the autoencoder", reconstructed),
                 ("flow without privacy on the public split", decode(free[:show].numpy())),
                 (f"flow at eps = {epsilon:g}", decode(particles[:show].cpu().numpy()))], path, ncol=8)


def cmd_encode(args) -> int:
    import h5py

    out = Path(args.out)
    if out.exists() and not args.overwrite:
        raise UsageError(f"{out} exists: pass --overwrite to replace it, or choose another --out")
    from autoencoders.encoded import encoded_split

    encoded = encoded_split(args.dataset, args.split, root=args.data_root, checkpoint=args.checkpoint)
    latents, meta = encoded.latents, encoded.meta
    tmp = out.with_name(f".{out.name}.tmp")
    with h5py.File(tmp, "w") as f:
        f.create_dataset("data", data=latents.numpy(), compression="gzip")
        f.attrs["dataset"], f.attrs["split"], f.attrs["autoencoder"] = args.dataset, args.split, meta["name"]
        f.attrs["autoencoder_sha256"] = meta["weights_sha256"]
        # a public declaration of where the rows live (every shipped encoder maps onto the unit sphere),
        # read by `generate --data` to pick the sphere manifold
        f.attrs["domain"], f.attrs["norm_bound"] = "sphere", 1.0
        if args.split == "private":
            f.attrs["warning"] = "PRIVATE: these rows are the private records; never publish this file"
    os.replace(tmp, out)  # a finished file or none
    print(f"wrote {len(latents)} {args.split} latents (d={latents.shape[1]}) to {args.out}"
          + ("  -- PRIVATE DATA: keep this file confidential" if args.split == "private" else ""))
    return 0


def _check_name(name: str) -> None:
    """A checkpoint name is a plain file name in --out-dir: letters, digits, '.', '_' and '-', not starting with
    '.' (no folders, no way out of --out-dir)."""
    import re

    if not re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9._-]*", name) or len(name) > 100:
        raise UsageError(f"--name {name!r} is not a plain checkpoint name: use letters, digits, '.', '_' and '-' "
                         "(no '/' and no leading '.'); choose the folder with --out-dir")


def cmd_train_ae(args) -> int:
    import numpy as np

    from autoencoders import TrainConfig, train_autoencoder

    from ..io.data import load_dataset, split_indices

    if (args.dataset is None) == (args.images is None):
        raise UsageError("give exactly one of --dataset NAME (its public half) or --images PUBLIC (your own public "
                         "images: a folder or an .npy/.npz/.h5 array, all of them public)")
    out_dir = Path(args.out_dir or ".")
    if args.name is not None:
        _check_name(args.name)
    finished = out_dir / f"{args.name or args.dataset}.pt"
    if finished.exists() and not args.overwrite:  # runs made with it check its sha256: replacing it breaks them
        raise UsageError(f"{finished} exists: a finished checkpoint is replaced only with --overwrite (runs made "
                         "with it will then refuse the new weights); or choose another --name")
    if args.images is not None:
        return _train_on_images(args, out_dir)
    images, labels = load_dataset(args.dataset, root=args.data_root)
    try:
        test, test_labels = load_dataset(args.dataset, part="test", root=args.data_root)
    except (ValueError, FileNotFoundError):
        test = test_labels = None
    arch, latent = AE_DEFAULTS[args.dataset]
    config = TrainConfig(architecture=args.architecture or arch,
                         latent=latent if args.latent is None else args.latent, epochs=args.epochs,
                         batch_size=args.batch_size, patience=args.patience, seed=args.seed)
    split = split_indices(len(images), public_fraction=args.public_fraction, seed=args.split_seed)
    excluded = tuple(args.exclude_classes or ())
    rows = split.public[~np.isin(labels[split.public], excluded)] if excluded else None
    if test is not None and excluded:
        test = test[~np.isin(test_labels, excluded)]
    meta = train_autoencoder(args.name or args.dataset, images, split, dataset=args.dataset, config=config,
                             test_images=test, out_dir=out_dir, rows=rows, excluded_classes=excluded)
    _print_checkpoint(meta)
    return 0


IMAGE_ARCHITECTURES = {8: "digits8", 32: "liutkus32", 64: "dcgan64"}


def _train_on_images(args, out_dir: Path) -> int:
    """A user's public images: the pixel-loss autoencoder (its encoder maps onto the unit sphere), then,
    unless --decoder-steps 0, the sampling decoder of `train-decoder` on the same images."""
    import numpy as np

    from autoencoders import TrainConfig, load_autoencoder, train_autoencoder
    from autoencoders.adversarial import AdversarialConfig, train_adversarial_decoder

    from ..io.data import Split
    from ..io.images import image_source, load_images, write_public_hashes

    if args.name is None:
        raise UsageError("--images needs --name NAME for the new checkpoint")
    if args.decoder_steps < 0:
        raise UsageError(f"--decoder-steps must be >= 0, got {args.decoder_steps}")
    if args.size not in IMAGE_ARCHITECTURES:
        raise UsageError(f"--size must be one of {sorted(IMAGE_ARCHITECTURES)} (the autoencoders' resolutions)")
    images = load_images(args.images, size=args.size, channels=args.channels)
    if len(images) < 20:
        raise UsageError(f"{args.images} holds {len(images)} images; an autoencoder needs at least 20 public images")
    out_dir.mkdir(parents=True, exist_ok=True)
    # the public images' fingerprints go beside the checkpoints: `generate --images` refuses any of them as private
    source = {**image_source(args.images, images), "image_hashes": write_public_hashes(images, out_dir / f"{args.name}.pt")}
    print(f"{args.images}: {len(images)} public images, {images.shape[1]} channel(s), resized to "
          f"{args.size}x{args.size}")
    # every image given is public: the "split" is all of them, and the source's hash says which they were
    split = Split(np.arange(len(images)), np.zeros(0, dtype=np.int64), seed=0)
    config = TrainConfig(architecture=args.architecture or IMAGE_ARCHITECTURES[args.size],
                         latent=8 if args.latent is None else args.latent,
                         epochs=args.epochs, batch_size=args.batch_size, patience=args.patience, seed=args.seed)
    pixel_name = args.name if args.decoder_steps == 0 else f"{args.name}-mse"
    meta = _finished_first_stage(out_dir / f"{pixel_name}.pt", config, source, overwrite=args.overwrite)
    if meta is None:
        meta = train_autoencoder(pixel_name, images, split, dataset="images", config=config, out_dir=out_dir,
                                 source=source)
    if args.decoder_steps > 0:
        base, base_meta = load_autoencoder(out_dir / f"{pixel_name}.pt")
        adversarial = AdversarialConfig(steps=args.decoder_steps, seed=args.seed)
        meta = train_adversarial_decoder(args.name, base, base_meta, images, split, config=adversarial,
                                         out_dir=out_dir)
    _print_checkpoint(meta)
    print(f"next: swflow generate --images PRIVATE --checkpoint {out_dir / (args.name + '.pt')} --method "
          "dpswflow-hist --epsilon 1 --out runs/mine")
    return 0


def _finished_first_stage(path: Path, config, source: dict, *, overwrite: bool) -> dict | None:
    """The pixel-loss stage's checkpoint when an earlier run of the same command finished it (same images, same
    settings): reused, so a run killed in the decoder stage resumes there; None when it must be trained."""
    from dataclasses import asdict

    from autoencoders import load_autoencoder

    if not path.exists() or overwrite:
        return None
    _, meta = load_autoencoder(path)
    same = meta.get("train_config") == asdict(config) and (meta.get("source") or {}).get("sha256") == source["sha256"]
    if not same:
        raise UsageError(f"{path} exists from another training (other images or settings): pass --overwrite to "
                         "replace it, or choose another --name")
    print(f"{path}: the pixel-loss stage is finished (same images and settings); going on with the decoder")
    return meta


def _print_checkpoint(meta: dict) -> None:
    print(json.dumps({k: meta[k] for k in ("name", "architecture", "latent", "epochs_run", "steps_run",
                                           "validation_mse", "test_mse", "weights_sha256") if k in meta}, indent=2))


def cmd_train_decoder(args) -> int:
    from autoencoders import load_autoencoder
    from autoencoders.adversarial import AdversarialConfig, train_adversarial_decoder

    from ..io.splits import dataset_split

    base, base_meta = load_autoencoder(args.base)
    if base_meta["dataset"] == "images":
        raise UsageError(f"{args.base} was trained on your own images: train its sampling decoder with "
                         "`swflow train-ae --images PUBLIC --decoder-steps N`")
    from ..io.splits import public_rows

    images, labels, split = dataset_split(base_meta["dataset"], base_meta, root=args.data_root)
    config = AdversarialConfig(steps=args.steps, batch_size=args.batch_size, seed=args.seed,
                               init_from=args.init_from, critic_warmup=args.critic_warmup)
    if args.name is not None:
        _check_name(args.name)
    meta = train_adversarial_decoder(args.name or f"{base_meta['name']}-adv", base, base_meta, images, split,
                                     config=config, out_dir=Path(args.out_dir or "."),
                                     rows=public_rows(base_meta, labels, split))
    _print_checkpoint(meta)
    return 0


def register(sub) -> None:
    """Add this module's commands to the `swflow` parser."""
    for add in (_register_demo, _register_train_ae, _register_train_decoder, _register_encode):
        add(sub)


def _register_demo(sub) -> None:
    p = sub.add_parser("demo", help="embedded digits end to end: DPSWflow-r at eps = 10",
                       description="Take scikit-learn's digits, the shipped autoencoder trained on their "
                       "public half, run DPSWflow-r on the private half's latents and write samples, "
                       "trajectory, an animated GIF and privacy.json.")
    p.add_argument("--out", default="runs/demo")
    p.add_argument("--epsilon", type=float, default=10.0)
    p.add_argument("--delta", type=float, default=PrivacySpec.delta)
    p.add_argument("--steps", type=int, default=20, help="flow steps = private releases (default %(default)s; chosen "
                   "by comparing particles with the public latents)")
    p.add_argument("--n-particles", type=int, default=2000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--overwrite", action="store_true", help="replace an existing output directory")
    p.add_argument("--resume", action="store_true", help="continue an interrupted run in --out")
    p.set_defaults(func=cmd_demo)


def _register_train_ae(sub) -> None:
    p = sub.add_parser("train-ae", help="train an autoencoder on public images (a dataset's public split, or yours)",
                       description="Train an autoencoder (004 App. C.2) on public images only and write "
                       "OUT_DIR/NAME.pt + NAME.json. --dataset: the public half of a named dataset's training set "
                       "(Fashion-MNIST is found where Debian's dataset-fashion-mnist puts it; MNIST and CelebA need "
                       "--data-root). --images PUBLIC: your own public images (a folder of .png/.jpg or an "
                       ".npy/.npz/.h5 array), all of them public, resized to --size; then a sampling decoder is "
                       "trained on them too (--decoder-steps). Interrupted training resumes.",
                       epilog="example: swflow train-ae --images public_images/ --name mine --out-dir my-models "
                       "--epochs 20 --decoder-steps 2000",
                       formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    source = p.add_mutually_exclusive_group()
    source.add_argument("--dataset", choices=DATASETS)
    source.add_argument("--images", metavar="PUBLIC", help="your public images: a folder or an image array file")
    p.add_argument("--size", type=int, default=32, help="--images: resize (centre crop) to SIZE x SIZE: 8, 32 or 64")
    p.add_argument("--channels", type=int, choices=(1, 3), help="--images: 1 (grey) or 3 (RGB); default: the "
                   "images' own")
    p.add_argument("--decoder-steps", type=int, default=3000, help="--images: updates of the sampling decoder "
                   "(conditional GAN, as train-decoder) after the pixel-loss autoencoder; 0 keeps the pixel-loss "
                   "decoder")
    p.add_argument("--data-root", help="directory with the dataset's files")
    p.add_argument("--name", help="checkpoint name (default: the dataset's)")
    p.add_argument("--architecture", choices=("liutkus32", "dcgan64", "digits8"), help="default: the dataset's")
    p.add_argument("--latent", type=int, help="latent size (default: 8, 48 for CelebA)")
    p.add_argument("--epochs", type=int, default=20)
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--patience", type=int, default=3, help="early stopping on validation MSE")
    p.add_argument("--exclude-classes", type=int, nargs="+", metavar="C",
                   help="--dataset: leave these classes out of the public images (a benchmark for private classes the "
                   "public data never saw; the checkpoint's JSON names them)")
    p.add_argument("--public-fraction", type=float, default=0.5)
    p.add_argument("--split-seed", type=int, default=0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out-dir", help="folder for NAME.pt and NAME.json (default: the current directory; never the "
                   "installed package)")
    p.add_argument("--overwrite", action="store_true", help="replace a finished checkpoint of the same name")
    p.set_defaults(func=cmd_train_ae)


def _register_train_decoder(sub) -> None:
    p = sub.add_parser("train-decoder", help="a sharper decoder for a trained autoencoder (conditional GAN)",
                       description="Keep a checkpoint's encoder (so private latents and flow runs are unchanged) "
                       "and train a new decoder G(z, u) on the same public split: a conditional GAN with a "
                       "projection critic, a code-consistency term through the frozen encoder and a low-pass L1 "
                       "term (autoencoders/adversarial.py). Writes checkpoints/NAME.pt + NAME.json; an "
                       "interrupted run resumes from NAME.partial.pt, and rerunning with a smaller --steps "
                       "finishes it from its last save.",
                       formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--base", required=True, help="checkpoint whose encoder is kept (e.g. fashion-mnist)")
    p.add_argument("--name", help="new checkpoint name (default: BASE-adv)")
    p.add_argument("--steps", type=int, default=6000, help="critic + decoder updates")
    p.add_argument("--batch-size", type=int, default=64, help="public images per update")
    p.add_argument("--seed", type=int, default=0, help="training seed")
    p.add_argument("--init-from", metavar="CHECKPOINT", help="start the decoder from this checkpoint's (trained on "
                   "the same encoder), e.g. to train fashion-mnist-adv further under a new name")
    p.add_argument("--critic-warmup", type=int, default=0, help="critic-only updates before the decoder moves "
                   "(a fresh critic meets a warm-started decoder: a few hundred)")
    p.add_argument("--data-root", help="directory with the dataset's files")
    p.add_argument("--out-dir", help="folder for NAME.pt and NAME.json (default: the current directory)")
    p.set_defaults(func=cmd_train_decoder)


def _register_encode(sub) -> None:
    p = sub.add_parser("encode", help="encode a split of a dataset to latents (HDF5)",
                       description="Encode the public, private or test split with the dataset's autoencoder into "
                       "an HDF5 file (dataset 'data', rows = records) that `swflow generate --data` accepts. "
                       "The private split's file holds private records: keep it confidential.")
    p.add_argument("--dataset", required=True, choices=DATASETS)
    p.add_argument("--split", choices=("public", "private", "test"), default="private")
    p.add_argument("--data-root")
    p.add_argument("--checkpoint")
    p.add_argument("--out", required=True, help="output .h5 file")
    p.add_argument("--overwrite", action="store_true", help="replace an existing --out file")
    p.set_defaults(func=cmd_encode)
