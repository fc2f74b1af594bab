"""swflow: differentially private synthetic data by the smoothed sliced-Wasserstein gradient flow."""
from .flow import FlowConfig, FlowResult, ParticleFlow, Presampled, Resampled
from .methods import make_flow
from .registry import METHODS
from .sliced import (random_directions, sliced_wasserstein, smoothed_sliced_wasserstein,
                     wasserstein_1d)

__all__ = ["METHODS", "FlowConfig", "FlowResult", "ParticleFlow", "Presampled", "Resampled",
           "make_flow", "random_directions", "sliced_wasserstein", "smoothed_sliced_wasserstein",
           "wasserstein_1d"]
__version__ = "0.1.0"
