"""Signed runs: a data owner's Ed25519 signature over every file of a finished run folder.

A run folder's read-back (swflow.privacy.verify, swflow.pipeline.table_ledger) refuses any edit that leaves the
files inconsistent, but a forger who edits every setting, every count and every claim consistently makes a run a
user could have made: no file can tell. A signature can. ``sign_run`` writes RUN/signature.json: the SHA-256 of
every file in the folder and an Ed25519 signature (from the ``cryptography`` package) over that list, made with
the owner's private key; ``check_signature`` verifies it with the owner's public key, given by the reader (never the
one the folder names), and refuses a changed byte in any signed file, a file added after signing, or another key.

Keys are PEM files: ``new_key`` writes one (the private key readable by its owner only) and its public half beside
it (KEY.pub), which is what the owner publishes.
"""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

__all__ = ["SIGNATURE", "SignatureRefused", "new_key", "sign_run", "check_signature"]

#: the file a signed run carries
SIGNATURE = "signature.json"
_FORMAT = "swflow-signature-1"


class SignatureRefused(ValueError):
    """A run's signature does not verify, or does not cover what the folder holds."""


def _digests(run_dir: Path) -> dict[str, str]:
    """{path relative to ``run_dir``: SHA-256 hex} of every regular file under it but the signature, sorted."""
    out = {}
    for path in sorted(p for p in run_dir.rglob("*") if p.is_file() and p.name != SIGNATURE):
        digest = hashlib.sha256()
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
        out[path.relative_to(run_dir).as_posix()] = digest.hexdigest()
    return out


def _payload(files: dict[str, str], public_pem: str) -> bytes:
    """The bytes signed: the format, the signer's public key and the files' digests, as canonical JSON."""
    return json.dumps({"format": _FORMAT, "public_key": public_pem, "files": files}, sort_keys=True,
                      separators=(",", ":")).encode()


def new_key(path: str | Path) -> tuple[Path, Path]:
    """Write a new Ed25519 private key to ``path`` (PEM, readable by its owner only) and its public key to
    ``path``.pub; refuse to replace either. Returns (private, public)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    private, public = Path(path), Path(f"{path}.pub")
    for p in (private, public):
        if p.exists():
            raise FileExistsError(f"{p} exists: a key is never replaced; choose another path")
    key = Ed25519PrivateKey.generate()
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption())
    fd = os.open(private, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(pem)
    public.write_bytes(key.public_key().public_bytes(serialization.Encoding.PEM,
                                                     serialization.PublicFormat.SubjectPublicKeyInfo))
    return private, public


def _read_key(path: str | Path, *, private: bool):
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such key file (make a pair with `swflow sign --new-key KEY`)")
    try:
        data = path.read_bytes()
        key = (serialization.load_pem_private_key(data, password=None) if private
               else serialization.load_pem_public_key(data))
    except (ValueError, TypeError) as err:
        raise ValueError(f"{path} is not a PEM {'private' if private else 'public'} key without a password "
                         f"({err})") from None
    if not isinstance(key, Ed25519PrivateKey if private else Ed25519PublicKey):
        raise ValueError(f"{path} is not an Ed25519 key: swflow signs with Ed25519 only")
    return key


def _public_pem(public_key) -> str:
    from cryptography.hazmat.primitives import serialization

    return public_key.public_bytes(serialization.Encoding.PEM,
                                   serialization.PublicFormat.SubjectPublicKeyInfo).decode()


def sign_run(run_dir: str | Path, key: str | Path) -> Path:
    """Sign every file of the finished run folder ``run_dir`` with the private key file ``key``: writes (replaces)
    RUN/signature.json and returns its path."""
    run_dir = Path(run_dir)
    if not (run_dir / "privacy.json").is_file():
        raise FileNotFoundError(f"{run_dir}/privacy.json is missing: sign a finished swflow run folder")
    private = _read_key(key, private=True)
    files = _digests(run_dir)
    public_pem = _public_pem(private.public_key())
    signature = private.sign(_payload(files, public_pem))
    path = run_dir / SIGNATURE
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"format": _FORMAT, "public_key": public_pem, "files": files,
                               "signature": signature.hex()}, indent=2) + "\n")
    os.replace(tmp, path)
    return path


def check_signature(run_dir: str | Path, public_key: str | Path) -> list[str]:
    """The files of ``run_dir`` that its signature covers, after checking it with the owner's ``public_key`` file:
    refused (:class:`SignatureRefused`) when the folder is unsigned, the signature is not that key's over these
    digests, a signed file is missing or changed, or a file was added after signing."""
    from cryptography.exceptions import InvalidSignature

    run_dir = Path(run_dir)
    key = _read_key(public_key, private=False)
    path = run_dir / SIGNATURE
    if not path.is_file():
        raise SignatureRefused(f"{run_dir} is not signed (no {SIGNATURE}): only its owner can sign it "
                               "(`swflow sign RUN --key KEY`)")
    try:
        signed = json.loads(path.read_text())
        files, signature = dict(signed["files"]), bytes.fromhex(signed["signature"])
    except (ValueError, KeyError, TypeError) as err:
        raise SignatureRefused(f"{path} is not a signature swflow writes ({type(err).__name__}: {err})") from None
    try:
        key.verify(signature, _payload(files, _public_pem(key)))
    except InvalidSignature:
        raise SignatureRefused(f"{path}: the signature is not {public_key}'s over the digests it lists: signed with "
                               "another key, or the list was edited") from None
    present = _digests(run_dir)
    for name, digest in files.items():
        if name not in present:
            raise SignatureRefused(f"{run_dir}: {name} was signed and is missing")
        if present[name] != digest:
            raise SignatureRefused(f"{run_dir}: {name} changed after it was signed")
    added = sorted(set(present) - set(files))
    if added:
        raise SignatureRefused(f"{run_dir}: {', '.join(added)} were added after signing: remove them, or have the "
                               "owner sign again")
    return sorted(files)
