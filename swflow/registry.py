"""Every method by name, with its kind: the one list behind `swflow generate --method` and
:class:`swflow.estimator.Synthesizer` (no heavy imports, so `--help` stays fast)."""
from __future__ import annotations

__all__ = ["METHODS", "FLOW_METHOD_NAMES", "GENERATOR_METHOD_NAMES"]

METHODS = {
    "swf": ("flow", "sliced Wasserstein flow of Liutkus et al. (sigma = 0, no privacy)"),
    "dpswflow-r": ("flow", "DP flow, fresh directions + one private batch release per step (004 Alg. 1)"),
    "dpswflow": ("flow", "DP flow, one release of a direction pool, free later steps (004 Alg. 2)"),
    "ldp-flow": ("flow", "local DP: each record released once as y + N(0, s^2 I); the flow smooths the particle "
                         "side only, so it deconvolves the noise"),
    "dpswgen": ("generator", "MLP generator trained with the DP-smoothed SW loss, accounted like dpswflow-r "
                             "(004 §4.2)"),
    "dpsgd-sw-gen": ("generator", "generator trained by DP-SGD on the exact SW gradient with activation and "
                                  "Jacobian clipping (000 Thm 4.1)"),
    "ldp-sinkhorn-gen": ("generator", "generator trained on locally released rows with entropic OT, "
                                      "lambda = 2 s^2 (002)"),
}
FLOW_METHOD_NAMES = tuple(k for k, (kind, _) in METHODS.items() if kind == "flow")
GENERATOR_METHOD_NAMES = tuple(k for k, (kind, _) in METHODS.items() if kind == "generator")
