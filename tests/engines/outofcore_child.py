"""Child process of the out-of-core test: count a Parquet file under a memory limit.

Usage: python outofcore_child.py PATH ENGINE LIMIT_MB [naive]

Sets RLIMIT_DATA (heap and private anonymous mappings) before importing anything heavy, then
builds a histogram with the chosen engine and makes a Laplace release from it. With ``naive`` it
instead reads the whole table into memory, which must fail under the same limit.
"""

from __future__ import annotations

import resource
import sys


def main() -> int:
    path, engine, limit_mb = sys.argv[1], sys.argv[2], int(sys.argv[3])
    naive = len(sys.argv) > 4 and sys.argv[4] == "naive"
    limit = limit_mb * 2**20
    resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))
    import numpy as np

    import fugu

    dom = fugu.Domain([fugu.Ordinal(c, 0, 63) for c in ("a", "b", "c")])
    if naive:
        import pyarrow.parquet as pq

        table = pq.read_table(path)
        print("naive read", table.num_rows)
        return 0
    opts = {"threads": 1} if engine == "duckdb" else {}
    hist = fugu.Histogram.from_file(path, dom, engine=engine, **opts)
    rel = fugu.central.laplace(hist, epsilon=1.0, rng=fugu.RandomSource(seed=0))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
    answer = rel.answer(fugu.RangeQuery({"a": (0, 31)}))
    print(
        f"total={hist.total()} "
        f"checksum={int((hist.counts.ravel() * np.arange(dom.size) % 1000003).sum())} "
        f"answer={answer:.1f} peak_rss_mb={peak}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
