"""Every method by name, with its kind: the one list behind `swflow generate --method` and
:class:`swflow.estimator.Synthesizer` (no heavy imports, so `--help` stays fast)."""
from __future__ import annotations

__all__ = ["METHODS", "DEFAULT_LENGTH", "FLOW_METHOD_NAMES", "GENERATOR_METHOD_NAMES", "check_budget"]

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
#: How long each method runs when neither --steps nor --epochs is given (004 App. C.5 where the paper
#: has a setting): ("epochs", E) means E passes over the private rows in batches, ("steps", K) K steps.
DEFAULT_LENGTH = {
    "swf": ("steps", 500),
    "dpswflow-r": ("epochs", 35),
    "dpswflow": ("steps", 1500),
    "ldp-flow": ("steps", 1500),
    "dpswgen": ("epochs", 35),
    "dpsgd-sw-gen": ("epochs", 5),
    "ldp-sinkhorn-gen": ("steps", 400),
}


def check_budget(method: str, *, private: bool) -> None:
    """The one rule for which budgets a method takes, for `generate`, `privacy` and the estimator:
    swf is never private; every other method runs private, or without noise at epsilon = inf
    (then privacy.json says it is not private); a local release needs a finite budget."""
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; choose one of {sorted(METHODS)}")
    if method == "swf" and private:
        raise ValueError("swf is not private (sigma = 0): use dpswflow-r or dpswflow for a finite epsilon")
    if method in ("ldp-flow", "ldp-sinkhorn-gen") and not private:
        raise ValueError(f"{method} is a local release: it needs a finite epsilon or a noise multiplier "
                         "(use swf for no privacy)")


FLOW_METHOD_NAMES = tuple(k for k, (kind, _) in METHODS.items() if kind == "flow")
GENERATOR_METHOD_NAMES = tuple(k for k, (kind, _) in METHODS.items() if kind == "generator")
