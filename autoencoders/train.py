"""Train an autoencoder on the public split only; checkpoints with JSON metadata.

``train_autoencoder`` receives the whole training set and the :class:`~swflow.io.data.Split`, and
only ever indexes ``images[split.public]``: private rows cannot reach the model. The metadata
records the split's manifest hashes, so a checkpoint can be matched to the split it was made with.
"""
from __future__ import annotations

import hashlib
import json
import os
import platform
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn
from tqdm.auto import tqdm

from swflow.simulate.rng import keeps_global_rng

from .models import SphereAutoencoder, build

__all__ = ["TrainConfig", "train_autoencoder", "load_autoencoder", "default_checkpoint", "CHECKPOINT_DIR"]

def _checkpoint_dir() -> Path:
    """Where the shipped autoencoders are: the repository's checkpoints/ in a checkout, else the copy
    the wheel installs as the package swflow.checkpoints."""
    checkout = Path(__file__).resolve().parents[1] / "checkpoints"
    if checkout.is_dir():
        return checkout
    from importlib.resources import files

    return Path(str(files("swflow.checkpoints")))


CHECKPOINT_DIR = _checkpoint_dir()


@dataclass(frozen=True)
class TrainConfig:
    architecture: str
    latent: int
    epochs: int = 20
    batch_size: int = 128
    lr: float = 1e-3
    val_fraction: float = 0.1
    patience: int = 3
    seed: int = 0

    def __post_init__(self):
        for name in ("latent", "epochs", "batch_size"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 1:
                raise ValueError(f"{name} must be a whole number >= 1, got {getattr(self, name)!r}")
        if self.patience < 0 or not 0 < self.val_fraction < 1 or not self.lr > 0:
            raise ValueError(f"need patience >= 0, 0 < val_fraction < 1 and lr > 0, got {self.patience}, "
                             f"{self.val_fraction}, {self.lr}")


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _mse(model: SphereAutoencoder, images: np.ndarray, batch: int = 512) -> float:
    model.eval()
    total = 0.0
    with torch.no_grad():
        for i in range(0, len(images), batch):
            x = torch.from_numpy(images[i:i + batch])
            total += float(((model(x) - x) ** 2).mean(dim=(1, 2, 3)).sum())
    return total / len(images)


def _restore(partial: Path, model: SphereAutoencoder, opt, config: TrainConfig, split, public_sha256: str) -> dict:
    """Load an interrupted run into ``model`` and ``opt``; its training state, or a fresh one."""
    if not partial.exists():
        return {"epoch": 0, "best": float("inf"), "best_state": None, "stale": 0, "history": []}
    from swflow.io.hdf5 import load_tensors

    saved = load_tensors(partial, what="autoencoder training checkpoint")
    if saved["config"] != asdict(config) or saved["split"] != split.manifest():
        raise ValueError(f"{partial} was written with other settings or another split; delete it to restart")
    if saved.get("public_sha256") != public_sha256:
        raise ValueError(f"{partial} was trained on other images than these (their sha256 differs): resuming would "
                         "keep what it learned from them. Delete it to start afresh, or train under another --name")
    model.load_state_dict(saved["model"])
    opt.load_state_dict(saved["optimizer"])
    torch.set_rng_state(saved["torch_rng"])
    return saved["state"]


def _train_epoch(model: SphereAutoencoder, opt, loss_fn, batches, bar) -> None:
    for x in batches:
        loss = loss_fn(model(x), x)
        opt.zero_grad()
        loss.backward()
        opt.step()
        bar.update()
        bar.set_postfix(loss=f"{loss.item():.4f}", refresh=False)


def _fit_epochs(name: str, model, opt, train_t: torch.Tensor, val: np.ndarray, state: dict, config: TrainConfig, *,
                checkpoint, started: float, progress: bool) -> None:
    """Epochs from ``state['epoch']`` until ``config.epochs`` or ``config.patience`` epochs without a better
    validation MSE; ``state`` keeps the best weights, and ``checkpoint()`` saves everything after each epoch."""
    loss_fn = nn.BCELoss()
    gen = torch.Generator().manual_seed(config.seed)
    if "permutation_rng" in state:  # a resumed run draws the batches the uninterrupted one would have drawn
        gen.set_state(state["permutation_rng"])
    batches = -(-len(train_t) // config.batch_size)
    # one bar over every epoch's batches, so its ETA is the whole run's (early stopping may end it sooner)
    bar = tqdm(total=config.epochs * batches, initial=state["epoch"] * batches, disable=not progress,
               desc=f"{name}", unit="batch")
    while state["epoch"] < config.epochs and state["stale"] < config.patience:
        model.train()
        perm = torch.randperm(len(train_t), generator=gen)
        bar.set_description(f"{name} epoch {state['epoch'] + 1}/{config.epochs}")
        _train_epoch(model, opt, loss_fn, (train_t[perm[i:i + config.batch_size]]
                                           for i in range(0, len(perm), config.batch_size)), bar)
        val_mse = _mse(model, val)
        state["epoch"] += 1
        state["seconds"] = time.perf_counter() - started
        state["history"].append(val_mse)
        if val_mse < state["best"]:
            state.update(best=val_mse, stale=0, best_state={k: v.clone() for k, v in model.state_dict().items()})
        else:
            state["stale"] += 1
        if progress:
            bar.write(f"{name}: epoch {state['epoch']} validation MSE {val_mse:.5f}")
        state["permutation_rng"] = gen.get_state()
        checkpoint()
    bar.close()


def _save_partial(partial: Path, model, opt, state: dict, config: TrainConfig, split, public_sha256: str) -> None:
    """Everything a resumed training needs, written whole (a temporary file, then a rename)."""
    tmp = partial.with_suffix(".tmp")
    torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "state": state,
                "config": asdict(config), "split": split.manifest(), "public_sha256": public_sha256,
                "torch_rng": torch.get_rng_state()}, tmp)
    os.replace(tmp, partial)


def _test_fields(model, test_images: np.ndarray | None) -> dict:
    return {"test_mse": _mse(model, test_images) if test_images is not None else None,
            "test_set": "official test split" if test_images is not None else
            "none (validation MSE is on held-out public rows)"}


@keeps_global_rng
def train_autoencoder(name: str, images: np.ndarray, split, *, dataset: str, config: TrainConfig,
                      test_images: np.ndarray | None = None, out_dir: Path = CHECKPOINT_DIR,
                      progress: bool = True, source: dict | None = None, rows: np.ndarray | None = None,
                      excluded_classes: tuple[int, ...] = ()) -> dict:
    """Fit on ``images[split.public]``; write ``out_dir/name.pt`` and ``name.json``; return the metadata.

    ``source`` describes a user's public image collection (swflow.io.images.image_source) when the
    images are not a named dataset. ``rows``: a part of the public split to train on (the public split
    without ``excluded_classes``, which the metadata names). Interrupted training resumes from
    ``name.partial.pt`` (model, optimiser, epoch, best state).
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    public = images[public_part(split, rows)]  # the only rows this function touches
    torch.manual_seed(config.seed)
    rng = np.random.default_rng(config.seed)
    order = rng.permutation(len(public))
    n_val = max(1, int(config.val_fraction * len(public)))
    val, train = public[order[:n_val]], public[order[n_val:]]
    model = build(config.architecture, channels=images.shape[1], latent=config.latent)
    if tuple(model.image_shape) != tuple(images.shape[1:]):
        raise ValueError(f"{config.architecture} expects images of shape {model.image_shape}, "
                         f"got {tuple(images.shape[1:])}")
    opt = torch.optim.Adam(model.parameters(), lr=config.lr)
    partial = out_dir / f"{name}.partial.pt"
    public_sha256 = hashlib.sha256(np.ascontiguousarray(public, dtype=np.float32).tobytes()).hexdigest()
    state = _restore(partial, model, opt, config, split, public_sha256)
    started = time.perf_counter() - state.get("seconds", 0.0)  # wall time summed over resumed sessions
    _fit_epochs(name, model, opt, torch.from_numpy(train), val, state, config,
                checkpoint=lambda: _save_partial(partial, model, opt, state, config, split, public_sha256),
                started=started, progress=progress)
    model.load_state_dict(state["best_state"])
    meta = {"name": name, "dataset": dataset, "architecture": config.architecture, "channels": int(images.shape[1]),
            "image_shape": list(images.shape[1:]), "latent": config.latent, "latent_norm": 1.0,
            "trained_on": "public split only", "split": split.manifest(), **({"source": source} if source else {}),
            **({"excluded_classes": sorted(int(c) for c in excluded_classes),
                "trained_rows": int(len(public))} if excluded_classes else {}),
            "train_config": asdict(config), "epochs_run": state["epoch"], "validation_mse": state["best"],
            **_test_fields(model, test_images), "cost": training_cost(started)}
    meta = publish_checkpoint(model, meta, out_dir / f"{name}.pt")
    partial.unlink(missing_ok=True)
    return meta


def training_cost(started: float, note: str = "wall time summed over sessions") -> dict:
    """What a checkpoint's training cost, for its JSON: wall seconds since ``started`` (a perf_counter reading moved
    back by the seconds of earlier, resumed sessions), threads and machine."""
    return {"wall_seconds": round(time.perf_counter() - started, 1), "torch_threads": torch.get_num_threads(),
            "machine": platform.machine(), "device": "cpu", "note": note}


def public_part(split, rows: np.ndarray | None) -> np.ndarray:
    """The public split's rows to train on: all of them, or ``rows`` (refused unless every one is public)."""
    if rows is None:
        return split.public
    if not np.isin(rows, split.public).all():
        raise ValueError("the rows to train on must all belong to the public split")
    return np.asarray(rows)


def publish_checkpoint(model: SphereAutoencoder, meta: dict, weights: Path) -> dict:
    """Write ``weights`` and its JSON metadata (with the weights' sha256), each swapped in whole."""
    torch.save(model.state_dict(), weights.with_suffix(".tmp"))
    os.replace(weights.with_suffix(".tmp"), weights)
    meta = {**meta, "weights_sha256": _sha256(weights)}
    tmp_meta = weights.with_suffix(".json.tmp")
    tmp_meta.write_text(json.dumps(meta, indent=2) + "\n")
    os.replace(tmp_meta, weights.with_suffix(".json"))
    return meta


#: The checkpoint a dataset uses when none is named; others use the dataset's own name. Fashion-MNIST
#: and digits decode with a conditional-GAN decoder (reconstruction FID 14.3 against 77.7 at 10 000
#: Fashion-MNIST test images); ``--checkpoint fashion-mnist`` is the paper's liutkus32, kept for
#: reproducing 004, and ``fashion-mnist-adv`` (26.2) is the decoder Table 1 was measured with. All
#: share one encoder, so private latents and every privacy figure are the same with each.
DEFAULT_CHECKPOINTS: dict[str, str] = {"fashion-mnist": "fashion-mnist-adv2", "digits": "digits-adv"}


def default_checkpoint(dataset: str) -> str:
    return DEFAULT_CHECKPOINTS.get(dataset, dataset)


def load_autoencoder(name_or_path: str | Path, *, expected_sha256: str | None = None) -> tuple[SphereAutoencoder, dict]:
    """Load ``checkpoints/NAME.pt`` (or a path to a .pt) with its JSON metadata, checking the sha256
    against the metadata and, for a run's autoencoder, against the ``expected_sha256`` the run recorded."""
    path = Path(name_or_path)
    if path.suffix != ".pt":
        path = CHECKPOINT_DIR / f"{name_or_path}.pt"
    meta_path = path.with_suffix(".json")
    if not path.exists() or not meta_path.exists():
        raise FileNotFoundError(f"checkpoint {path} (and its .json) not found; train it with "
                                f"`swflow train-ae --dataset ...`")
    meta = {**json.loads(meta_path.read_text()), "checkpoint_path": str(path)}  # where it was read (not stored)
    if _sha256(path) != meta["weights_sha256"]:
        raise ValueError(f"{path} does not match the sha256 in {meta_path.name}: corrupt or replaced weights")
    if expected_sha256 is not None and meta["weights_sha256"] != expected_sha256:
        raise ValueError(f"checkpoint {meta['name']} is not the autoencoder the run used (sha256 differs)")
    model = build(meta["architecture"], channels=meta["channels"], latent=meta["latent"], decoder=meta.get("decoder"))
    from swflow.io.hdf5 import load_tensors

    model.load_state_dict(load_tensors(path, what="autoencoder checkpoint"))
    model.eval()
    return model, meta
