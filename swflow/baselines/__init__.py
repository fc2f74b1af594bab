"""Generator baselines that the flows are compared with; every private input goes through swflow.privacy."""
from .dpswgen import DPSWGen, GeneratorConfig, make_dpswgen
from .ldp_sinkhorn import LDPSinkhornGen, SinkhornConfig, make_ldp_sinkhorn_gen

__all__ = ["DPSWGen", "GeneratorConfig", "LDPSinkhornGen", "SinkhornConfig", "make_dpswgen", "make_ldp_sinkhorn_gen"]
