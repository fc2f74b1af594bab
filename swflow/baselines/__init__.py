"""Generator baselines that the flows are compared with; every private input goes through swflow.privacy."""
from .dpsgd_sw import ClippedGradientConfig, DPSGDSWGen, make_dpsgd_sw_gen
from .dpswgen import DPSWGen, GeneratorConfig, make_dpswgen
from .ldp_sinkhorn import LDPSinkhornGen, SinkhornConfig, make_ldp_sinkhorn_gen

__all__ = ["ClippedGradientConfig", "DPSGDSWGen", "DPSWGen", "GeneratorConfig", "LDPSinkhornGen", "SinkhornConfig",
           "make_dpsgd_sw_gen", "make_dpswgen", "make_ldp_sinkhorn_gen"]
