"""Autoencoders fitted on the public split only (004 App. C.2 architectures)."""
from .models import ARCHITECTURES, SphereAutoencoder, build
from .train import CHECKPOINT_DIR, TrainConfig, default_checkpoint, load_autoencoder, train_autoencoder

__all__ = ["ARCHITECTURES", "CHECKPOINT_DIR", "SphereAutoencoder", "TrainConfig", "build", "default_checkpoint",
           "load_autoencoder", "train_autoencoder"]
