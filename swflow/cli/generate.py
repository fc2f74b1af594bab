"""`swflow generate`: a method on a dataset's private split or on private vectors, into a run directory."""
from __future__ import annotations

import argparse

from ..core.errors import SettingsError
from ..core.sources import SourceRequest
from ..methods.registry import method
from ._common import DATASETS, UsageError, _as_flags, flow_config_args, privacy_args, settings, shape_args


def cmd_generate(args) -> int:
    """The flags become the source, the settings and the request, once; then one call runs it all."""
    from ..io.resources import check_device
    from ..pipeline.generate import generate
    from ..sources import open_source

    if args.table is not None:
        from .tables import cmd_generate_table

        return cmd_generate_table(args)
    check_device(args.device)
    spec = method(args.method)  # the method's facts, asked once
    _check_flags(args, spec)
    source, request = _source_request(args, spec), _run_request(args)
    data = open_source(source)
    for note in data.notes:
        print(note)
    run = settings(args, manifold=data.manifold, norm_bound=data.norm_bound)
    # from here on: the settings, the request and the data; the flags are not read again
    try:
        result = generate(run, request, data)
    except SettingsError as err:
        raise UsageError(_as_flags(str(err))) from None
    if result is not None:  # None on the ranks of a torchrun other than 0
        print(result.summary(request.out))
    return 0


def _check_flags(args, spec) -> None:
    """Combinations of flags that name no run."""
    for flag in ("schema", "public_table", "target", "privacy_unit"):
        if getattr(args, flag) is not None:
            raise UsageError(f"--{flag.replace('_', '-')} belongs to a --table run")
    if sum(x is not None for x in (args.data, args.dataset, args.images)) != 1:
        raise UsageError("give exactly one of --dataset NAME (private split, encoded by its autoencoder), "
                         "--images PRIVATE (your private images, encoded by --checkpoint), --data FILE "
                         "(.npy/.npz/.h5 rows in the flow's space) or --table PRIVATE --schema SCHEMA.json")
    if args.population is not None and args.dataset is None:
        raise UsageError("--population draws from a dataset's private split: give --dataset")
    if args.labels_public and not args.conditional:
        raise UsageError("--labels-public applies to --conditional runs only")
    if args.conditional and spec.kind != "flow":
        raise UsageError(f"--conditional runs one flow per class; {args.method} is not a flow method")
    if args.conditional and args.dataset is None:
        raise UsageError("--conditional needs --dataset (its labels split the private rows into classes)")


def _source_request(args, spec) -> SourceRequest:
    """Which records the run reads and which codec encodes them."""
    if args.dataset is not None:
        kind, location = "dataset", args.dataset
    elif args.images is not None:
        kind, location = "images", args.images
    else:
        kind, location = "rows", args.data
    codec = "identity" if kind == "rows" and args.decoder == "autoencoder" else args.decoder
    return SourceRequest(kind, location, codec, checkpoint=args.checkpoint, population=args.population,
                         data_root=args.data_root, manifold=args.manifold,
                         require_manifold=spec.kind == "flow", streamed=spec.release.of_counts)


def _run_request(args):
    from ..pipeline.generate import RunRequest

    return RunRequest(out=args.out, inputs=(args.data, args.images), overwrite=args.overwrite, resume=args.resume,
                      quiet=args.quiet, conditional=args.conditional, labels_public=args.labels_public,
                      label_set=_label_set(args) if args.conditional else (), shard_mode=args.shard_mode)


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


def register(sub) -> None:
    """Add this module's commands to the `swflow` parser."""
    _register_generate(sub)


def _register_generate(sub) -> None:
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
    _source_args(p)
    _run_args(p)
    from .tables import add_table_args

    add_table_args(p)
    shape_args(p, with_data_shape=False)
    privacy_args(p)
    flow_config_args(p)
    _adapt_args(p)
    p.set_defaults(func=cmd_generate)


def _source_args(p) -> None:
    """Where the private records come from, and the codec between them and the flow."""
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


def _run_args(p) -> None:
    """Where the run goes, and how it treats labels."""
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


def _adapt_args(p) -> None:
    from ..core.config import AdaptSettings
    from ..pipeline.options import add_options

    add_options(p.add_argument_group("DP adaptation of the decoder (dpswflow-hist with --dataset or --images)"),
                AdaptSettings)
