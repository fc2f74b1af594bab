"""Signed runs: a data owner's Ed25519 signature over every file of a finished run folder.

A run folder's read-back (swflow.privacy.verify, swflow.pipeline.table_measurements) refuses any edit that leaves the
files inconsistent, but a forger who edits every setting, every count and every claim consistently makes a run a
user could have made: no file can tell. A signature can. ``sign_run`` writes RUN/signature.json: the SHA-256 of
every file in the folder and an Ed25519 signature (from the ``cryptography`` package) over that list, made with
the owner's private key; ``check_signature`` verifies it with the owner's public key, given by the reader (never the
one the folder names), and refuses a changed byte in any signed file, a file added after signing, or another key.

Keys are PEM files: ``new_key`` writes one (the private key readable by its owner only) and its public half beside
it (KEY.pub), which is what the owner publishes.

A folder is read once (:func:`read_run_files`): every file hashed as it is read, the files a reader parses copied
as they are hashed into a private folder, which is what the reader then parses; so the bytes checked are the bytes
read, whatever the folder does in between. A link, a special file or a signature.json below the top is refused. The
hidden marker the command leaves in a run folder (``.swflow-run``) is neither signed nor required, so a run copied
with ``cp RUN/* COPY/`` verifies.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import stat
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path

from .outdir import MARKER

__all__ = ["SIGNATURE", "SignatureRefused", "RunFiles", "read_run_files", "new_key", "sign_run", "check_signature",
           "check_signed"]

#: the file a signed run carries
SIGNATURE = "signature.json"
_FORMAT = "swflow-signature-1"
_FIELDS = {"format", "public_key", "files", "signature"}


class SignatureRefused(ValueError):
    """A run's signature does not verify, or does not cover what the folder holds."""


@dataclass(frozen=True)
class RunFiles:
    """A run folder as it was read once: {path relative to it: SHA-256 hex} of every regular file but the
    signature and the marker (``digests``), the marker's digest if present, and the signature's bytes (or None)."""

    digests: dict
    marker: str | None
    signature: bytes | None


def read_run_files(run_dir: str | Path, *, copy_to: str | Path | None = None, parsed=frozenset()) -> RunFiles:
    """Read every file of ``run_dir`` once (module docstring): hash it, and copy those whose name is in ``parsed``
    into ``copy_to`` as they are read. Refuses a link, anything but a regular file or a folder, and a signature.json
    below the top (ValueError naming it)."""
    run_dir = Path(run_dir)
    digests, marker, signature = {}, None, None
    for path in _walk(run_dir):
        name = path.relative_to(run_dir).as_posix()
        if path.name == SIGNATURE and name != SIGNATURE:
            raise SignatureRefused(f"{run_dir}: {name} is a signature file below the top: a run carries one, "
                                   f"{SIGNATURE}; remove it")
        digest, data = hashlib.sha256(), bytearray() if name == SIGNATURE else None
        target = Path(copy_to) / name if copy_to is not None and name in parsed else None
        with open(path, "rb", opener=_no_follow) as source, (open(target, "xb") if target else nullcontext()) as copy:
            for block in iter(lambda: source.read(1 << 20), b""):
                digest.update(block)
                if copy is not None:
                    copy.write(block)
                if data is not None:
                    data += block
        if name == SIGNATURE:
            signature = bytes(data)
        elif name == MARKER:
            marker = digest.hexdigest()
        else:
            digests[name] = digest.hexdigest()
    return RunFiles(dict(sorted(digests.items())), marker, signature)


def _walk(run_dir: Path):
    """Every regular file under ``run_dir`` (sorted), links and special files refused; ``run_dir`` itself may not be
    a link."""
    if run_dir.is_symlink() or not run_dir.is_dir():
        raise ValueError(f"{run_dir} is not a folder (a link to one is not read): give the run folder itself")
    for entry in sorted(os.scandir(run_dir), key=lambda e: e.name):
        mode = entry.stat(follow_symlinks=False).st_mode
        if stat.S_ISLNK(mode):
            raise SignatureRefused(f"{run_dir}: {entry.name} is a link: a run folder holds its own files only; "
                                   "copy the file itself in place of the link")
        if stat.S_ISDIR(mode):
            yield from _walk(Path(entry.path))
        elif stat.S_ISREG(mode):
            yield Path(entry.path)
        else:
            raise SignatureRefused(f"{run_dir}: {entry.name} is not a regular file (a pipe, a device or a socket)")


def _no_follow(path, flags):
    """open()'s opener: never through a link (one swapped in after the folder was listed is refused)."""
    return os.open(path, flags | os.O_NOFOLLOW)



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
    files = read_run_files(run_dir).digests  # the marker left out: a plain copy of the run verifies
    public_pem = _public_pem(private.public_key())
    signature = private.sign(_payload(files, public_pem))
    path = run_dir / SIGNATURE
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"format": _FORMAT, "public_key": public_pem, "files": files,
                               "signature": signature.hex()}, indent=2) + "\n")
    os.replace(tmp, path)
    return path


def check_signature(run_dir: str | Path, public_key: str | Path) -> list[str]:
    """The files of ``run_dir`` that its signature covers, read once and checked with the owner's ``public_key``
    file (:func:`check_signed`)."""
    return check_signed(read_run_files(run_dir), public_key, source=Path(run_dir))


def check_signed(files: RunFiles, public_key: str | Path, *, source: Path) -> list[str]:
    """The files that the signature read in ``files`` covers, after checking it with the owner's ``public_key``
    file: refused (:class:`SignatureRefused`) when the folder is unsigned, signature.json is not one swflow writes
    (every field checked, its key the one given), the signature is not that key's over these digests, a signed file
    is missing or changed, or a file was added after signing."""
    from cryptography.exceptions import InvalidSignature

    key = _read_key(public_key, private=False)
    path = source / SIGNATURE
    if files.signature is None:
        raise SignatureRefused(f"{source} is not signed (no {SIGNATURE}): only its owner can sign it "
                               "(`swflow sign RUN --key KEY`)")
    signed = _signature_fields(files.signature, path)
    if signed["public_key"] != _public_pem(key):
        raise SignatureRefused(f"{path} names another public key than {public_key}: signed by someone else, or its "
                               "key field was edited")
    try:
        key.verify(bytes.fromhex(signed["signature"]), _payload(signed["files"], _public_pem(key)))
    except InvalidSignature:
        raise SignatureRefused(f"{path}: the signature is not {public_key}'s over the digests it lists: signed with "
                               "another key, or the list was edited") from None
    present = dict(files.digests, **({MARKER: files.marker} if files.marker is not None else {}))
    for name, digest in signed["files"].items():
        if name not in present:
            raise SignatureRefused(f"{source}: {name} was signed and is missing")
        if present[name] != digest:
            raise SignatureRefused(f"{source}: {name} changed after it was signed")
    added = sorted(set(files.digests) - set(signed["files"]))
    if added:
        raise SignatureRefused(f"{source}: {', '.join(added)} were added after signing: remove them, or have the "
                               "owner sign again")
    return sorted(signed["files"])


def _signature_fields(data: bytes, path: Path) -> dict:
    """signature.json's fields, each checked: exactly format, public_key, files, signature; the format swflow's;
    files a map of relative paths to SHA-256 hex; the signature 64 bytes of hex."""
    try:
        signed = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as err:
        raise SignatureRefused(f"{path} is not a signature swflow writes ({err})") from None
    wrong = []
    if not isinstance(signed, dict) or set(signed) != _FIELDS:
        wrong.append(f"its fields are {sorted(signed) if isinstance(signed, dict) else type(signed).__name__}, "
                     f"not {sorted(_FIELDS)}")
    else:
        if signed["format"] != _FORMAT:
            wrong.append(f"its format is {signed['format']!r}, not {_FORMAT!r}")
        if not isinstance(signed["public_key"], str):
            wrong.append("its public_key is not PEM text")
        files = signed["files"]
        if not isinstance(files, dict) or not all(
                isinstance(k, str) and isinstance(v, str) and re.fullmatch(r"[0-9a-f]{64}", v) and
                not k.startswith("/") and ".." not in k.split("/") for k, v in files.items()):
            wrong.append("its files are not relative paths mapped to SHA-256 digests")
        if not isinstance(signed["signature"], str) or not re.fullmatch(r"[0-9a-f]{128}", signed["signature"]):
            wrong.append("its signature is not 64 bytes of hex")
    if wrong:
        raise SignatureRefused(f"{path} is not a signature swflow writes: {'; '.join(wrong)}")
    return signed
