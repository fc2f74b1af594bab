"""Generator baselines that the flows are compared with; every private input goes through swflow.privacy."""
from .dpswgen import DPSWGen, GeneratorConfig, make_dpswgen

__all__ = ["DPSWGen", "GeneratorConfig", "make_dpswgen"]
