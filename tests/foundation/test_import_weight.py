"""``import fugu`` stays light: heavy optional machinery is imported where it is used.

The out-of-core engine test counts a file under a 400 MiB data-segment limit; importing
scipy.optimize and scipy.sparse at ``import fugu`` once doubled the data segment (97 -> 203 MB)
and the import time (0.4 -> 2.3 s), and that test ran out of memory. (``fugu.graph`` builds
sparse linear programs and imports scipy.sparse when it is imported.) Deterministic.
"""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = ("scipy.optimize", "scipy.sparse", "pyspark", "duckdb", "matplotlib", "pandas", "polars")


def test_import_fugu_loads_no_heavy_module() -> None:
    code = (
        "import json, sys, fugu, fugu.central, fugu.blowfish, fugu.ldp; "
        f"print(json.dumps([m for m in {list(HEAVY)!r} if m in sys.modules]))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert json.loads(out) == []
