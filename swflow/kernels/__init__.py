"""The math, as pure functions on tensors: sliced primitives (sliced.py) and the smoothed sliced-Wasserstein
drift (drift.py). Nothing here knows about privacy, files or runs.
"""
