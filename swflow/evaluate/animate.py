"""Pictures of runs: image grids, 2-D scatter plots, and GIF animations along the flow."""
from __future__ import annotations

from pathlib import Path

import numpy as np

__all__ = ["image_grid", "save_grid", "save_scatter", "save_gif", "save_mp4", "image_frames", "scatter_frames",
           "animate_trajectory"]


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


def _figure(**kwargs):
    """A matplotlib Figure drawn by the Agg canvas: matplotlib's object API, not pyplot, so the caller's backend
    and open figures are left alone (pyplot's backend is process-wide)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(**kwargs)
    FigureCanvasAgg(fig)
    return fig


def _save_figure(fig, path: str | Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return Path(path)


def save_panels(panels: list[tuple[str, np.ndarray | None]], path: str | Path, *, ncol: int = 10,
                columns: int | None = None) -> Path:
    """Labelled image grids on the same scale: [(title, images (n, C, H, W) in [0, 1]), ...], ``columns`` panels
    a row (default: all in one row); a panel whose images are None leaves its place blank."""
    columns = len(panels) if columns is None else max(1, min(columns, len(panels)))
    rows = -(-len(panels) // columns)
    fig = _figure(figsize=(3.6 * columns, 4.0 * rows))
    axes = fig.subplots(rows, columns, squeeze=False)
    for ax in axes.flat:
        ax.axis("off")
    for ax, (title, images) in zip(axes.flat, panels):
        if images is None:
            continue
        ax.imshow(image_grid(images, ncol=ncol), interpolation="nearest", cmap="gray", vmin=0, vmax=255)
        ax.set_title(title, fontsize=10)
    return _save_figure(fig, path)


def save_scatter(points: np.ndarray, path: str | Path, *, reference: np.ndarray | None = None,
                 title: str = "") -> Path:
    """Scatter of the first two coordinates (reference points in grey underneath); a histogram for 1-D rows."""
    fig = _figure(figsize=(4.5, 4.5))
    ax = fig.subplots()
    if points.shape[1] == 1:  # one coordinate: its histogram
        if reference is not None:
            ax.hist(reference[:, 0], bins=50, density=True, color="0.75", label="target")
        ax.hist(points[:, 0], bins=50, density=True, color="C0", alpha=0.6, label="particles")
        ax.set_title(title, fontsize=9)
        return _save_figure(fig, path)
    if reference is not None:
        ax.scatter(reference[:, 0], reference[:, 1], s=2, color="0.75", label="target")
    ax.scatter(points[:, 0], points[:, 1], s=2, color="C0", alpha=0.6, label="particles")
    ax.set_title(title, fontsize=9)
    ax.set_aspect("equal")
    return _save_figure(fig, path)


def save_gif(frames: list[np.ndarray], path: str | Path, *, duration_ms: int = 120) -> Path:
    """uint8 frames (H, W) or (H, W, 3) -> looping GIF (Pillow); the last frame lingers."""
    from PIL import Image

    images = [Image.fromarray(f) for f in frames]
    durations = [duration_ms] * (len(images) - 1) + [duration_ms * 10]
    images[0].save(path, save_all=True, append_images=images[1:], duration=durations, loop=0)
    return Path(path)


def _frame_indices(n_frames: int, wanted: int) -> np.ndarray:
    """``wanted`` frame indices spread evenly over ``n_frames`` (first and last always kept)."""
    if wanted < 1:
        raise ValueError(f"frames must be >= 1, got {wanted}")
    return np.unique(np.linspace(0, n_frames - 1, min(n_frames, wanted)).round().astype(int))


def image_frames(latents: np.ndarray, decode, *, frames: int = 50, n_show: int = 64, ncol: int = 8,
                 scale: int | None = None) -> list[np.ndarray]:
    """Grids of the first ``n_show`` decoded particles at ``frames`` moments of a trajectory (T, n, d)."""
    pictures = [decode(latents[i][:n_show]) for i in _frame_indices(len(latents), frames)]
    scale = scale or (4 if pictures[0].shape[-1] <= 16 else 2)  # small images get bigger pixels
    return [image_grid(p, ncol=ncol, scale=scale) for p in pictures]


def scatter_frames(latents: np.ndarray, steps: np.ndarray, *, frames: int = 50, reference: np.ndarray | None = None,
                   size: float = 4.5, max_points: int = 5000) -> list[np.ndarray]:
    """2-D particles at ``frames`` moments over the level sets of a Gaussian KDE of ``reference``
    (held-out or public rows, never the private target)."""
    keep = _frame_indices(len(latents), frames)
    shown = latents[:, :max_points, :2]
    lo, hi = shown.reshape(-1, 2).min(0), shown.reshape(-1, 2).max(0)
    if reference is not None:
        lo, hi = np.minimum(lo, reference[:, :2].min(0)), np.maximum(hi, reference[:, :2].max(0))
    pad = 0.05 * (hi - lo + 1e-9)
    lo, hi = lo - pad, hi + pad
    contour = None
    if reference is not None:
        from scipy.stats import gaussian_kde

        gx, gy = np.meshgrid(np.linspace(lo[0], hi[0], 120), np.linspace(lo[1], hi[1], 120))
        density = gaussian_kde(reference[:, :2].T)(np.vstack([gx.ravel(), gy.ravel()])).reshape(gx.shape)
        contour = (gx, gy, density)
    out = []
    for i in keep:
        fig = _figure(figsize=(size, size), dpi=100)
        ax = fig.subplots()
        if contour is not None:
            ax.contour(*contour, levels=8, cmap="Greys", linewidths=0.8)
        ax.scatter(shown[i, :, 0], shown[i, :, 1], s=2, color="C0", alpha=0.6)
        ax.set_xlim(lo[0], hi[0])
        ax.set_ylim(lo[1], hi[1])
        ax.set_title(f"step {int(steps[i])}", fontsize=9)
        ax.set_aspect("equal")
        fig.tight_layout()
        fig.canvas.draw()
        out.append(np.asarray(fig.canvas.buffer_rgba())[..., :3].copy())
    return out


def save_mp4(frames: list[np.ndarray], path: str | Path, *, fps: int = 8) -> Path:
    """uint8 frames -> H.264 MP4 through the ffmpeg binary (a clear error when it is absent)."""
    import shutil
    import subprocess

    ffmpeg = shutil.which("ffmpeg")
    if ffmpeg is None:
        raise FileNotFoundError("MP4 needs the ffmpeg program on PATH (e.g. `apt-get install ffmpeg`); "
                                "use --format gif otherwise")
    rgb = [np.repeat(f[..., None], 3, axis=2) if f.ndim == 2 else f for f in frames]
    h, w = rgb[0].shape[:2]
    h2, w2 = h + h % 2, w + w % 2  # yuv420p needs even sides
    cmd = [ffmpeg, "-loglevel", "error", "-y", "-f", "rawvideo", "-pix_fmt", "rgb24", "-s", f"{w2}x{h2}",
           "-r", str(fps), "-i", "-", "-pix_fmt", "yuv420p", "-vcodec", "libx264", str(path)]
    data = b"".join(np.pad(f, ((0, h2 - h), (0, w2 - w), (0, 0)), constant_values=255).tobytes() for f in rgb)
    subprocess.run(cmd, input=data, check=True)
    return Path(path)


def animate_trajectory(trajectory: str | Path, out: str | Path, *, decode=None, frames: int = 50,
                       reference: np.ndarray | None = None, n_show: int = 64, scale: int | None = None,
                       fps: int = 8) -> Path:
    """GIF or MP4 (by ``out``'s suffix) of a trajectory.h5: decoded image grids when ``decode`` is
    given, else 2-D particles over the reference's level sets."""
    from ..io.hdf5 import read_trajectory

    latents, steps, _ = read_trajectory(trajectory)
    if len(latents) == 0:
        raise ValueError(f"{trajectory} holds no frames")
    if decode is not None:
        pictures = image_frames(latents, decode, frames=frames, n_show=n_show, scale=scale)
    else:
        if latents.shape[2] < 2:
            raise ValueError("a particle animation needs d >= 2 (or an autoencoder to decode images)")
        pictures = scatter_frames(latents, steps, frames=frames, reference=reference)
    out = Path(out)
    if out.suffix == ".mp4":
        return save_mp4(pictures, out, fps=fps)
    return save_gif(pictures, out, duration_ms=int(1000 / fps))
