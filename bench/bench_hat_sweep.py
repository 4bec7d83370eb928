"""The hat tree against Ektelo's H_b at many domain sizes (issue 15, part 1: "at least 10 % lower
RMSE than H_b at every domain size from 256 to 65,536").

For each size n: the hat tree's exact expected RMSE (its plan for add/remove neighbours, ε = 1,
discrete Laplace, least squares; no data needed) and H_b's exact RMSE (Qardaji's fan-out, no
root, continuous Laplace, least squares; ``bench_central.hb_exact_mse``) on the same 4,000
random ranges, and their ratio. Planning is cached per n but not across processes, so large
sizes take a minute or more each on a shared machine.

    python bench/bench_hat_sweep.py                       # 256..1,024 every 16 cells
    python bench/bench_hat_sweep.py --sizes 1024:8192:256  # start:stop:step, or a,b,c
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_central import _all_pairs_sample, hb_exact_mse  # noqa: E402
from fugu.central import hattree  # noqa: E402


def sizes_arg(text: str) -> list[int]:
    if ":" in text:
        start, stop, step = (int(x) for x in text.split(":"))
        return list(range(start, stop + 1, step))
    return [int(x) for x in text.split(",")]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=sizes_arg, default=sizes_arg("256:1024:16"))
    args = ap.parse_args()
    print(f"{'cells':>7} {'plan':<8} {'hat/H_b':>8} {'seconds':>8}")
    worst = (0.0, 0)
    for n in args.sizes:
        t0 = time.perf_counter()
        b = _all_pairs_sample(n)
        plan = hattree._measured(hattree.plan_hat_tree(n, neighbours="add-remove"))
        sysm = hattree._system_for(plan, hattree._level_variances(plan, 1.0, 1))
        hat = float(np.mean(sysm.variance(b[:, 0], b[:, 1], False)))
        ratio = float(np.sqrt(hat / hb_exact_mse(n, b)))
        worst = max(worst, (ratio, n))
        desc = "graded" if plan.graded else f"b={plan.fanout}"
        print(f"{n:>7} {desc:<8} {ratio:>8.4f} {time.perf_counter() - t0:>8.1f}", flush=True)
    print(f"worst hat/H_b {worst[0]:.4f} at {worst[1]} cells (target <= 0.90)")


if __name__ == "__main__":
    main()
