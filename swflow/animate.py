"""Pictures of runs: image grids, 2-D scatter plots, and GIF animations along the flow."""
from __future__ import annotations

from pathlib import Path

import numpy as np

__all__ = ["image_grid", "save_grid", "save_scatter", "save_gif"]


def image_grid(images: np.ndarray, *, ncol: int = 10, scale: int = 4) -> np.ndarray:
    """(n, C, H, W) in [0, 1] -> one uint8 (rows·H·scale, ncol·W·scale[, 3]) picture."""
    n, c, h, w = images.shape
    nrow = int(np.ceil(n / ncol))
    canvas = np.ones((nrow * (h + 1) + 1, ncol * (w + 1) + 1, c), dtype=np.float32)
    for i in range(n):
        r, q = divmod(i, ncol)
        canvas[1 + r * (h + 1):1 + r * (h + 1) + h, 1 + q * (w + 1):1 + q * (w + 1) + w] = images[i].transpose(1, 2, 0)
    canvas = np.kron(canvas, np.ones((scale, scale, 1), dtype=np.float32))
    out = (canvas * 255).round().astype(np.uint8)
    return out[..., 0] if c == 1 else out


def save_grid(images: np.ndarray, path: str | Path, *, ncol: int = 10) -> Path:
    from PIL import Image

    Image.fromarray(image_grid(images, ncol=ncol)).save(path)
    return Path(path)


def save_scatter(points: np.ndarray, path: str | Path, *, reference: np.ndarray | None = None,
                 title: str = "") -> Path:
    """Scatter of the first two coordinates (reference points in grey underneath)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(4.5, 4.5))
    if reference is not None:
        ax.scatter(reference[:, 0], reference[:, 1], s=2, color="0.75", label="target")
    ax.scatter(points[:, 0], points[:, 1], s=2, color="C0", alpha=0.6, label="particles")
    ax.set_title(title, fontsize=9)
    ax.set_aspect("equal")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return Path(path)


def save_gif(frames: list[np.ndarray], path: str | Path, *, duration_ms: int = 120) -> Path:
    """uint8 frames (H, W) or (H, W, 3) -> looping GIF (Pillow); the last frame lingers."""
    from PIL import Image

    images = [Image.fromarray(f) for f in frames]
    durations = [duration_ms] * (len(images) - 1) + [duration_ms * 10]
    images[0].save(path, save_all=True, append_images=images[1:], duration=durations, loop=0)
    return Path(path)
