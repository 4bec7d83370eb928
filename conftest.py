"""Optional system parts for the whole test run (tests/ and the doctests in src/fugu).

A test that needs something outside Python declares it with a marker:

* ``@pytest.mark.browser`` -- headless Chromium (``chromium`` or ``chromium-browser`` on PATH);
* ``@pytest.mark.spark`` -- pyspark importable and a Java runtime (``$JAVA_HOME/bin/java`` or
  ``java`` on PATH).

On a machine without the part the test is SKIPPED with the reason (and how to install it), so
the README's test command passes on a fresh machine with only Python. CI must not skip them:
``FUGU_REQUIRE_BROWSER=1`` / ``FUGU_REQUIRE_JAVA=1`` (or ``FUGU_REQUIRE_SYSTEM=1`` for every
part) turn the missing part into a FAILURE that names it. ``.ci/run`` sets
``FUGU_REQUIRE_SYSTEM=1``.

Doctests of modules that only work with a part (``fugu.engines.spark``) get its marker too.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
from pathlib import Path

import pytest

# Doctests of these modules need the part named (their module works only with it).
_DOCTEST_MODULES = {"fugu.engines.spark": "spark"}


def _chromium() -> str | None:
    if shutil.which("chromium") or shutil.which("chromium-browser"):
        return None
    return "no headless Chromium ('chromium' or 'chromium-browser' on PATH)"


def _java() -> str | None:
    if importlib.util.find_spec("pyspark") is None:
        return "pyspark is not installed (pip install 'fugu[spark]')"
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").exists():
        return None
    if shutil.which("java"):
        return None
    return "no Java runtime for Spark ('java' on PATH or $JAVA_HOME/bin/java; Java 17)"


# marker -> (variable that makes it required, check returning what is missing or None, the fix)
_MISSING = pytest.StashKey[list[str]]()

PARTS = {
    "browser": ("FUGU_REQUIRE_BROWSER", _chromium, "apt-get install chromium"),
    "spark": ("FUGU_REQUIRE_JAVA", _java, "install Java 17 and pip install 'fugu[spark]'"),
}


def required(marker: str) -> bool:
    """True when CI asked for this part (its variable or FUGU_REQUIRE_SYSTEM is '1')."""
    var = PARTS[marker][0]
    return os.environ.get(var) == "1" or os.environ.get("FUGU_REQUIRE_SYSTEM") == "1"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    missing: dict[str, str | None] = {}
    for item in items:
        markers = {m.name for m in item.iter_markers() if m.name in PARTS}
        dtest = getattr(item, "dtest", None)
        if dtest is not None:  # a doctest: marked by its module
            mod = str(getattr(dtest, "name", ""))
            for prefix, marker in _DOCTEST_MODULES.items():
                if mod == prefix or mod.startswith(prefix + "."):
                    markers.add(marker)
                    item.add_marker(getattr(pytest.mark, marker))
        for marker in sorted(markers):
            if marker not in missing:
                missing[marker] = PARTS[marker][1]()
            why = missing[marker]
            if why is None:
                continue
            var, _, fix = PARTS[marker]
            if required(marker):
                item.stash.setdefault(_MISSING, []).append(f"{why}; {fix} ({var}=1 is set)")
            else:
                item.add_marker(
                    pytest.mark.skip(reason=f"{why}; {fix} (set {var}=1 to make this a failure)")
                )


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Fails a test whose required system part is missing (CI sets FUGU_REQUIRE_*=1)."""
    reasons = item.stash.get(_MISSING, [])
    if reasons:
        pytest.fail(f"required system part missing: {'; '.join(reasons)}", pytrace=False)
