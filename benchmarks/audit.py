"""``reconguard audit encoder`` at real sizes on 2 cores: each case in a fresh process, its estimate (printed before
the work starts) beside the measured wall time, CPU-seconds and peak memory per stage.

    python benchmarks/audit.py [--cases smoke-32 resnet18-224]

* ``smoke-32``: a split ResNet-18 (early split, m = 16, CIFAR stem) expecting ImageNet normalisation, on 64 crops
  of photographs at 3×32×32, the smoke preset (the issue asks for under a minute);
* ``resnet18-224``: the same encoder with the ImageNet stem at 3×224×224 (d = 150,528) on 48 crops, the smoke
  preset: the low-rank path, chosen automatically.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time

CASES = {
    "smoke-32": {"size": 32, "stem": "cifar", "n": 64, "m": 16},
    "resnet18-224": {"size": 224, "stem": "imagenet", "n": 48, "m": 16},
}


def run_case(name: str) -> dict:
    import torch

    from reconguard import audit
    from reconguard.data.photos import photo_crops
    from reconguard.encoders import SplitResNet18

    case = CASES[name]
    torch.manual_seed(0)
    size = case["size"]
    enc = SplitResNet18("early", case["m"], (3, size, size), seed=0, stem=case["stem"]).eval()
    images = torch.as_tensor(photo_crops(case["n"], size, 3, seed=1, sides=(size // 2, 2 * size) if size > 64
                                         else (40, 120)), dtype=torch.float32)
    lines = []
    t0, c0 = time.perf_counter(), time.process_time()
    result = audit.encoder(enc, images, preset="smoke", normalize="imagenet", sigmas=(0.0, 0.01),
                            announce=lines.append)
    return {"case": name, **case, "d": result.d, "path": result.bound_path, "announced": lines,
            "wall_s": time.perf_counter() - t0, "cpu_s": time.process_time() - c0,
            "peak_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20,
            "stages": result.stages, "estimate": result.budget,
            "rows": [{"sigma": r.sigma, "bound": r.bound["value"], "best_attack": r.best.mse, "violated": r.violated}
                     for r in result.rows]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", nargs="+", default=list(CASES), choices=list(CASES))
    ap.add_argument("--case", help=argparse.SUPPRESS)  # one case, in this (fresh) process
    args = ap.parse_args()
    if args.case:
        print(json.dumps(run_case(args.case)))
        return
    for name in args.cases:
        r = subprocess.run([sys.executable, __file__, "--case", name], capture_output=True, text=True)
        if r.returncode != 0:
            raise SystemExit(r.stderr[-3000:])
        row = json.loads(r.stdout.strip().splitlines()[-1])
        print(f"\n{name}: d = {row['d']}, {row['path']}")
        print(f"  {row['announced'][-1]}")
        print(f"  measured: {row['wall_s']:.1f} s wall, {row['cpu_s']:.1f} CPU-s, peak {row['peak_gib']:.2f} GiB")
        for r in row["rows"]:
            print(f"  σ = {r['sigma']:g}: bound {r['bound']:.4g} ≤ best attack {r['best_attack']:.4g}: {not r['violated']}")
        for stage, v in row["stages"].items():
            est = row["estimate"]["estimate_seconds"].get({"E[G] and bounds": "bounds"}.get(stage, stage))
            extra = (f" (estimated {est + row['estimate']['estimate_seconds']['Jacobians']:.1f} s)"
                     if stage == "E[G] and bounds" else f" (estimated {est:.1f} s)" if est is not None else "")
            print(f"  {stage:24s} {v['seconds']:8.1f} s{extra}   peak so far {v['peak_gib']:.2f} GiB")


if __name__ == "__main__":
    main()
