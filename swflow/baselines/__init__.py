"""Generator baselines that the flows are compared with; every private input goes through swflow.privacy."""
from .dpsgd_sw import ClippedGradientConfig, DPSGDSWGen, make_dpsgd_sw_gen
from .dpswgen import DPSWGen, GeneratorConfig, make_dpswgen
from .ldp_sinkhorn import LDPSinkhornGen, SinkhornConfig, make_ldp_sinkhorn_gen

__all__ = ["ClippedGradientConfig", "DPSGDSWGen", "DPSWGen", "GeneratorConfig", "LDPSinkhornGen", "SinkhornConfig",
           "make_dpsgd_sw_gen", "make_dpswgen", "make_generator", "make_ldp_sinkhorn_gen"]


def make_generator(method: str, data, *, privacy, steps: int, n_projections: int, batch_size: int,
                   privacy_seed: int | None = None, seed: int = 0, device: str = "cpu", **options):
    """A generator baseline by registry name; ``options`` are further fields of its config dataclass."""
    from ..registry import check_budget

    check_budget(method, private=privacy.private)
    if data.shape[0] < 2:  # batch statistics (BatchNorm) and a batch to train on need two rows
        raise ValueError(f"{method} trains a generator on batches: it needs at least 2 private rows, "
                         f"got {data.shape[0]}")
    common = {"steps": steps, "seed": seed, "device": device, **options}
    if method == "dpswgen":
        return make_dpswgen(data, privacy=privacy, config=GeneratorConfig(**common), n_projections=n_projections,
                            batch_size=batch_size, privacy_seed=privacy_seed)
    if method == "dpsgd-sw-gen":
        return make_dpsgd_sw_gen(data, privacy=privacy, config=ClippedGradientConfig(**common),
                                 n_projections=n_projections, batch_size=batch_size, privacy_seed=privacy_seed)
    if method == "ldp-sinkhorn-gen":
        return make_ldp_sinkhorn_gen(data, privacy=privacy, privacy_seed=privacy_seed,
                                     config=SinkhornConfig(batch_size=batch_size, **common))
    raise ValueError(f"unknown generator {method!r}")
