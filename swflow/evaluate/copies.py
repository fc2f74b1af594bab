"""Are samples new data? The copy rate: the share of samples closer to a training image than held-out images are.

A sample whose nearest training image (pixel L2) is closer than the 5th percentile of held-out images' own
nearest distances counts as a copy: held-out images score 0.05 by construction, exact copies 1.0.
"""
from __future__ import annotations

import hashlib
import json

import numpy as np
import torch

from .metrics import CACHE_DIR, _store_in_cache

__all__ = ["copy_rate", "nearest_distances"]


def nearest_distances(queries: np.ndarray, pool: np.ndarray, *, chunk: int = 512) -> np.ndarray:
    """Euclidean distance (n,) from each of ``queries`` (n, ...) to its nearest row of ``pool`` (m, ...), on the
    flattened pixels. The nearest row is found in float32 (‖p‖² − 2 q·p in blocks of ``chunk`` queries: memory
    chunk × m), and its distance is then computed exactly in float64 from the two rows."""
    q = torch.as_tensor(np.asarray(queries, dtype=np.float32).reshape(len(queries), -1))
    p = torch.as_tensor(np.asarray(pool, dtype=np.float32).reshape(len(pool), -1))
    if q.shape[1] != p.shape[1]:
        raise ValueError(f"queries of {q.shape[1]} values each cannot be compared with pool rows of {p.shape[1]}")
    pool_norms = p.square().sum(1)
    out = []
    for block in q.split(chunk):
        nearest = (pool_norms - 2.0 * (block @ p.T)).argmin(dim=1)
        out.append((block.double() - p[nearest].double()).norm(dim=1))
    return torch.cat(out).numpy() if out else np.zeros(0)


def copy_rate(samples: np.ndarray, training: np.ndarray, reference: np.ndarray, *,
              quantile: float = 0.05, max_reference: int = 2000) -> tuple[float, float]:
    """The share of ``samples`` closer to a training image than real held-out images usually are, and the
    threshold: the ``quantile`` (5%) of the ``reference`` images' own nearest-training distances (pixel L2).
    Held-out images score ``quantile`` by construction; samples that are training images score 1.0. Returns
    (rate, threshold). The threshold reads the first ``max_reference`` held-out images (2 000: the 5% quantile's
    level then has a standard error of 0.5 percentage points), so it costs seconds, not a minute."""
    if not 0 < quantile < 1:
        raise ValueError(f"quantile must be in (0, 1), got {quantile}")
    threshold = _copy_threshold(reference[:max_reference], training, quantile)
    return float((nearest_distances(samples, training) < threshold).mean()), threshold


def _copy_threshold(reference: np.ndarray, training: np.ndarray, quantile: float) -> float:
    """The held-out images' ``quantile`` nearest-training distance, cached in CACHE_DIR by the sha256 of both image
    sets (computing it compares every test image with every training image: about a minute on 2 cores)."""
    digest = hashlib.sha256(repr((quantile, np.shape(reference), np.shape(training))).encode())
    for images in (reference, training):
        digest.update(np.ascontiguousarray(images, dtype=np.float32).tobytes())
    path = CACHE_DIR / "copy" / f"threshold-{digest.hexdigest()[:24]}.json"
    if path.exists():
        return float(json.loads(path.read_text())["threshold"])
    threshold = float(np.quantile(nearest_distances(reference, training), quantile))
    _store_in_cache(path, json.dumps({"threshold": threshold, "quantile": quantile}).encode())
    return threshold
