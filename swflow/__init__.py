"""swflow: differentially private synthetic data by the smoothed sliced-Wasserstein gradient flow.

The public names below are imported on first use, so ``import swflow`` (and ``swflow --help``) stay
light: torch loads only when something needs it.
"""
from importlib import import_module
from importlib.metadata import PackageNotFoundError, version

__all__ = ["METHODS", "Synthesizer", "FlowConfig", "FlowResult", "ParticleFlow", "Presampled", "Resampled",
           "make_flow", "random_directions", "sliced_wasserstein", "smoothed_sliced_wasserstein",
           "wasserstein_1d"]

_HOMES = {"Synthesizer": "pipeline.estimator", "FlowConfig": "core.config", "FlowResult": "simulate.flow",
          "ParticleFlow": "simulate.flow", "Presampled": "simulate.flow", "Resampled": "simulate.flow",
          "make_flow": "methods.flows", "METHODS": "methods.registry", "random_directions": "kernels.sliced",
          "sliced_wasserstein": "kernels.sliced", "smoothed_sliced_wasserstein": "kernels.sliced",
          "wasserstein_1d": "kernels.sliced"}

try:  # one source: pyproject.toml's version, as installed
    __version__ = version("swflow")
except PackageNotFoundError:  # pragma: no cover - imported from a source tree that was never installed
    __version__ = "unknown"


def __getattr__(name: str):
    if name in _HOMES:
        value = getattr(import_module(f".{_HOMES[name]}", __name__), name)
        globals()[name] = value  # once
        return value
    raise AttributeError(f"module 'swflow' has no attribute {name!r}")


def __dir__():
    return sorted([*globals(), *__all__])
