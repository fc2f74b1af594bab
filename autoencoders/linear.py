"""A linear autoencoder (PCA) fitted on the public split, with a public norm radius.

Latents are PCA coordinates divided by a radius R_pub taken from the public latents (a high
quantile of their norms), so the flow works in the unit ball; private latents outside the ball
are clipped (declared in the privacy report). Nothing here ever sees a private record: ``fit``
takes the public images and the split manifest they came from.
"""
from __future__ import annotations

import numpy as np

__all__ = ["LinearAutoencoder"]


class LinearAutoencoder:
    def __init__(self, latent_dim: int = 8, *, radius_quantile: float = 0.95):
        if latent_dim < 1:
            raise ValueError("latent_dim must be >= 1")
        self.latent_dim = latent_dim
        self.radius_quantile = radius_quantile
        self.mean = self.components = None
        self.radius = None
        self.image_shape = None
        self.fitted_on: dict | None = None

    def fit(self, public_images: np.ndarray, *, manifest: dict) -> "LinearAutoencoder":
        """Fit on the public split only; ``manifest`` (from :meth:`Split.manifest`) records which rows."""
        if "public_sha256" not in manifest:
            raise ValueError("fit needs the split manifest of the public images it is given")
        if len(public_images) != manifest["public_size"]:
            raise ValueError("the images given are not the public split named by the manifest")
        self.image_shape = public_images.shape[1:]
        flat = public_images.reshape(len(public_images), -1).astype(np.float64)
        self.mean = flat.mean(axis=0)
        _, _, vt = np.linalg.svd(flat - self.mean, full_matrices=False)
        self.components = vt[: self.latent_dim]
        self.radius = 1.0
        self.radius = float(np.quantile(np.linalg.norm(self.encode(public_images), axis=1), self.radius_quantile))
        self.fitted_on = {"public_sha256": manifest["public_sha256"], "public_size": manifest["public_size"]}
        return self

    def encode(self, images: np.ndarray) -> np.ndarray:
        flat = images.reshape(len(images), -1).astype(np.float64)
        return ((flat - self.mean) @ self.components.T / self.radius).astype(np.float32)

    def decode(self, latents: np.ndarray) -> np.ndarray:
        flat = np.asarray(latents, dtype=np.float64) * self.radius @ self.components + self.mean
        return np.clip(flat, 0.0, 1.0).reshape(len(latents), *self.image_shape).astype(np.float32)
