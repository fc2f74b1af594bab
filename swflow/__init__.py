"""swflow: differentially private synthetic data by the smoothed sliced-Wasserstein gradient flow."""
from importlib.metadata import PackageNotFoundError, version

from .estimator import Synthesizer
from .flow import FlowConfig, FlowResult, ParticleFlow, Presampled, Resampled
from .methods import make_flow
from .registry import METHODS
from .sliced import (random_directions, sliced_wasserstein, smoothed_sliced_wasserstein,
                     wasserstein_1d)

__all__ = ["METHODS", "Synthesizer", "FlowConfig", "FlowResult", "ParticleFlow", "Presampled", "Resampled",
           "make_flow", "random_directions", "sliced_wasserstein", "smoothed_sliced_wasserstein",
           "wasserstein_1d"]
try:  # one source: pyproject.toml's version, as installed
    __version__ = version("swflow")
except PackageNotFoundError:  # pragma: no cover - imported from a source tree that was never installed
    __version__ = "unknown"
