"""Generator baselines that the flows are compared with; every private input goes through swflow.privacy."""
from .dpsgd_sw import ClippedGradientConfig, DPSGDSWGen, make_dpsgd_sw_gen
from .dpswgen import DPSWGen, GeneratorConfig, make_dpswgen
from .ldp_sinkhorn import LDPSinkhornGen, SinkhornConfig, make_ldp_sinkhorn_gen

__all__ = ["ClippedGradientConfig", "DPSGDSWGen", "DPSWGen", "GeneratorConfig", "LDPSinkhornGen", "SinkhornConfig",
           "make_dpsgd_sw_gen", "make_dpswgen", "make_generator", "make_ldp_sinkhorn_gen"]


def make_generator(method: str, data, *, privacy, steps: int, n_projections: int, batch_size: int,
                   privacy_seed: int | None = None, seed: int = 0, device: str = "cpu", **options):
    """A generator baseline by registry name; ``options`` are further fields of its config dataclass."""
    from ..registry import method as method_spec

    spec = method_spec(method)
    if spec.kind != "generator":
        raise ValueError(f"{method} is a flow, not a generator: use swflow.make_flow")
    spec.check_budget(private=privacy.private)
    if data.shape[0] < 2:  # batch statistics (BatchNorm) and a batch to train on need two rows
        raise ValueError(f"{method} trains a generator on batches: it needs at least 2 private rows, "
                         f"got {data.shape[0]}")
    return spec.builder()(data, privacy=privacy, steps=steps, n_projections=n_projections, batch_size=batch_size,
                             privacy_seed=privacy_seed, seed=seed, device=device, **options)
