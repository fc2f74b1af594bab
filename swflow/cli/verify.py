"""Proving a run: `swflow verify RUN [--public-key PUB]` and `swflow sign RUN --key KEY` (or `--new-key KEY`)."""
from __future__ import annotations

import argparse


def cmd_verify(args) -> int:
    from ..pipeline.verify_run import NOT_PROVABLE, verify_run

    verified = verify_run(args.run_dir, public_key=args.public_key, regenerate=not args.no_samples,
                          progress=not args.quiet)
    print(f"{args.run_dir}: {verified.report.statement}")
    for check in verified.checks:
        print(f"  checked: {check}")
    for note in verified.unchecked:
        print(f"  not checked: {note}")
    print(f"  no file can prove: {NOT_PROVABLE}")
    return 0


def cmd_sign(args) -> int:
    from ..io.signing import new_key, sign_run

    if args.new_key is not None:
        if args.run_dir is not None or args.key is not None:
            raise ValueError("--new-key makes a key pair and signs nothing: run it alone, then sign with --key")
        private, public = new_key(args.new_key)
        print(f"wrote {private} (private: keep it to yourself) and {public} (public: give it to whoever checks "
              "your runs)")
        return 0
    if args.run_dir is None or args.key is None:
        raise ValueError("sign a run with `swflow sign RUN --key KEY` (make a key pair first with --new-key KEY)")
    from ..pipeline.verify_run import verify_run

    verify_run(args.run_dir, regenerate=True)  # never sign what does not verify
    path = sign_run(args.run_dir, args.key)
    print(f"wrote {path}: every file of {args.run_dir} signed; check it with "
          f"`swflow verify {args.run_dir} --public-key {args.key}.pub`")
    return 0


def register(sub) -> None:
    p = sub.add_parser("verify", help="check a finished run: its claim, its releases, its samples, its signature",
                       formatter_class=argparse.ArgumentDefaultsHelpFormatter,
                       description="Run every check swflow can make on a finished run folder, and say what each "
                       "tested and what no file can prove: privacy.json's claim re-derived from its ledger; a table "
                       "run's model.pt loaded with its ledger derived again from its settings and its released "
                       "counts tested against the claimed noise; privacy.json equal to the model's report; the "
                       "samples made again from the model and compared byte for byte (on a machine with the run's "
                       "swflow and torch); with --public-key, the owner's signature over every file. `evaluate` and "
                       "`sample` run the same checks first. An unsigned run shows consistency, not authorship.")
    p.add_argument("run_dir")
    p.add_argument("--public-key", metavar="PUB", help="the data owner's public key (PEM, from `swflow sign "
                   "--new-key`): the run must carry their signature over every one of its files")
    p.add_argument("--no-samples", action="store_true", help="do not make the samples again to compare them")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.set_defaults(func=cmd_verify)
    s = sub.add_parser("sign", help="sign a finished run with the data owner's key (Ed25519)",
                       formatter_class=argparse.ArgumentDefaultsHelpFormatter,
                       description="The data owner signs what they release: `swflow sign --new-key owner.pem` makes "
                       "a key pair once (owner.pem, private, and owner.pem.pub, to publish); `swflow sign RUN --key "
                       "owner.pem` verifies the run, then writes RUN/signature.json, the SHA-256 of every file and "
                       "an Ed25519 signature over them. A reader runs `swflow verify RUN --public-key owner.pem.pub`: "
                       "any byte changed, a file added, or another key is refused.")
    s.add_argument("run_dir", nargs="?")
    s.add_argument("--key", metavar="KEY", help="the owner's private key (PEM, Ed25519)")
    s.add_argument("--new-key", metavar="KEY", help="make a key pair: KEY (private) and KEY.pub; signs nothing")
    s.set_defaults(func=cmd_sign)
