"""Latent spaces fitted on the public split only."""
from .linear import LinearAutoencoder

__all__ = ["LinearAutoencoder"]
