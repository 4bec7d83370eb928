"""The Python examples of the model pages run as written, and what the docs say they print is true.

``tests/foundation/test_readme.py`` runs the README's blocks and ``tests/ux/test_ux_docs.py`` the
Python blocks of the site pages (index, CLI guide, tutorials) and the ``fugu`` commands of every
page. This file covers what neither does:

* the Python blocks of the pages one per privacy model or subsystem (``docs/*.md`` other than the
  site pages), run in order in one fresh folder per page with the bundled data only. A block that
  cannot run here is marked in the page with ``<!-- docs-test: skip (reason) -->`` on the line
  before its fence; it must still compile, and its ``import`` lines still run (the names it
  shows exist);
* values the pages show next to an example (a sensitivity, a printed dict, a guarantee line):
  ``DOCUMENTED`` lists each one with the block it follows, and checks it after that block ran.
  Numbers that come from a random release are checked for their shape and rough size only;
* ``fugu ...`` commands quoted inline in the prose (not in code blocks): the command exists and
  accepts every option shown (click's own parser, nothing is run).
"""

from __future__ import annotations

import ast
import contextlib
import io
import re
import shlex
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
import pytest
from docs_blocks import SKIP, Block, blocks

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
# run by tests/ux/test_ux_docs.py (test_site_page_runs)
SITE_PAGES = {"index.md", "cli.md", "security.md", "benchmarks.md"}
MODEL_PAGES = sorted(p.name for p in DOCS.glob("*.md") if p.name not in SITE_PAGES)
ALL_PAGES = [ROOT / "README.md", *sorted(DOCS.glob("*.md")), *sorted(DOCS.glob("tutorials/*.md"))]


def python_blocks(page: str) -> list[Block]:
    return [b for b in blocks(DOCS / page) if b.lang == "python"]


def _imports_only(text: str) -> ast.Module:
    tree = ast.parse(text)
    tree.body = [n for n in tree.body if isinstance(n, ast.Import | ast.ImportFrom)]
    return tree


# Values the pages show next to their examples: page -> [(text of the block they follow,
# check(namespace, printed output))]. The check returns nothing and asserts.
Check = Callable[[dict[str, Any], str], None]


def _blowfish_sensitivities(ns: dict[str, Any], out: str) -> None:
    s, P, dom = ns["sensitivity"], ns["Policy"], ns["dom"]
    assert s("cumulative", P.line(dom)) == 1.0
    assert s("cumulative", P.full(dom)) == 99.0  # "(DP: 99)"
    assert s("cumulative", P.distance_threshold(dom, 5)) == 5.0
    assert s("sum", P.distance_threshold(dom, 5)) == 5.0
    assert s("sum", P.full(dom)) == 99.0
    assert s("histogram", P.full(dom)) == 2.0
    assert s(ns["Coarsening"]({"age": 10}), P.partition(dom, {"age": 10})) == 0.0


def _blowfish_ordered(ns: dict[str, Any], out: str) -> None:
    rel = ns["rel"]
    # the ordered-hierarchical release ends the block; the documented text is the Ordered one's
    first = ns["ordered"](ns["hist"], epsilon=1.0, policy=ns["pol"])
    text = " ".join(first.guarantee.describe().split())
    shown = (
        "Blowfish privacy: ε-indistinguishability of the policy's secret pairs, epsilon = 1, "
        "neighbours: move one record along an edge of the secret graph 'distance:theta=5'."
    )
    assert text.startswith(shown), text
    err = first.expected_error({"age": (30, 39)})
    assert 0.9 * 2 * 5 <= err <= 1.1 * 2 * 5  # "exact RMSE (≈ 2θ/ε)"
    assert len(first.quantile([0.25, 0.5, 0.75])) == 3
    assert rel.guarantee.mechanism == "ordered-hierarchical"


def _blowfish_constraints(ns: dict[str, Any], out: str) -> None:
    s = ns["sensitivity"]
    assert s("histogram", ns["pol"]) == 4.0  # 2·size(C) = 4
    assert s("histogram", ns["ranges"]) == 6.0  # 2·(maxcomp + 1) = 6


def _kmeans_example(ns: dict[str, Any], out: str) -> None:
    assert ns["km"].sensitivity_ == {"q_size": 0.0, "q_sum": 68.0, "mode": "safe"}
    assert "{'q_size': 0.0, 'q_sum': 68.0, 'mode': 'safe'}" in out


def _ldp_first_run(ns: dict[str, Any], out: str) -> None:
    value, err = (float(x) for x in out.split())
    true = int(((ns["ages"] >= 30) & (ns["ages"] <= 39)).sum())
    assert 15_000 < true < 17_000 and 1_500 < err < 2_500  # "≈ 16,000 ± 2,000 (RMSE)"
    assert abs(value - true) < 5 * err  # random: a false failure about once in 10^6 runs


def _ldp_client(ns: dict[str, Any], out: str) -> None:
    row = ns["row"]
    assert set(row) == {"seed", "y"} and 0 <= row["seed"] < 2**32 and 0 <= row["y"] < 4
    assert {"protocol", "params", "version"} <= set(ns["header"])


def _ldp_batches(ns: dict[str, Any], out: str) -> None:
    assert ns["agg"].n_accepted == 100_000 and dict(ns["agg"].rejected) == {}


def _engines_ldp(ns: dict[str, Any], out: str) -> None:
    assert out.split(maxsplit=1) == ["10000", "{}\n"]


def _graph_joins(ns: dict[str, Any], out: str) -> None:
    assert (ns["paths"].form, ns["paths"].clause_bound) == ("dnf", 1.0)
    assert ns["fof"].form == "formula" and ns["fof_dnf"].form == "dnf"
    assert ns["fof_dnf"].clause_bound == 50.0


def _graph_g_factor(ns: dict[str, Any], out: str) -> None:
    assert out.strip() == "1.0"  # "# 1.0, recorded"


def _graphs_tutorial_joins(ns: dict[str, Any], out: str) -> None:
    lines = out.splitlines()
    assert lines[0] == "1 24"  # "1 row, 24 participants"
    assert lines[1] == "('clamped at 0 (nonnegative=True)',)"


def _graphs_tutorial_karwa(ns: dict[str, Any], out: str) -> None:
    shown = "(ε, δ)-edge DP with ε = 1, δ = 1e-06"
    assert out.splitlines()[1].startswith(shown), out


def _ldp_tutorial_budget(ns: dict[str, Any], out: str) -> None:
    assert out.strip() == "{} 2.0"


def _blowfish_tutorial_cumulative(ns: dict[str, Any], out: str) -> None:
    assert out.split() == ["5.0", "73.0"]  # "5 against 73 for Adult's 74 ages"


def _central_recommend(ns: dict[str, Any], out: str) -> None:
    rec = ns["rec"]
    assert rec.best in rec.rmse and set(rec.rmse) == {"laplace", "hierarchical", "privelet"}


DOCUMENTED: dict[str, list[tuple[str, Check]]] = {
    "blowfish.md": [
        ('sensitivity("histogram", Policy.full(dom))', _blowfish_sensitivities),
        ("rel.monotone()", _blowfish_ordered),
        ("MarginalConstraint", _blowfish_constraints),
    ],
    "central.md": [("fugu.central.recommend", _central_recommend)],
    "engines.md": [("agg.n_accepted", _engines_ldp)],
    "graph.md": [("fof_dnf =", _graph_joins), ("g_factor=1", _graph_g_factor)],
    "kmeans.md": [("partition:lat=40,lon=30", _kmeans_example)],
    "ldp.md": [
        ("olh.aggregate(reports)", _ldp_first_run),
        ("client.perturb_one", _ldp_client),
        ("agg.add(", _ldp_batches),
    ],
    # tutorials run in test_ux_docs too; here only for the values they show (fast pages)
    "tutorials/graphs.md": [
        ("rel.participants", _graphs_tutorial_joins),
        ('"2-triangle"', _graphs_tutorial_karwa),
    ],
    "tutorials/ldp.md": [('on_invalid="raise"', _ldp_tutorial_budget)],
    "tutorials/blowfish.md": [("CumulativeHistogram()", _blowfish_tutorial_cumulative)],
}


def run_page(page: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Run the page's Python blocks in order; return the skip reasons met."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MPLBACKEND", "Agg")
    ns: dict[str, Any] = {"__name__": "__docs__"}
    skipped: list[str] = []
    checks = list(DOCUMENTED.get(page, []))
    for b in python_blocks(page):
        name = f"docs/{page}:{b.line}"
        if b.skip:
            compile(b.text, name, "exec")
            exec(compile(_imports_only(b.text), name, "exec"), ns)  # noqa: S102
            skipped.append(b.skip)
            continue
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(b.text, name, "exec"), ns)  # noqa: S102
        for marker, check in [c for c in checks if c[0] in b.text]:
            check(ns, out.getvalue())
            checks.remove((marker, check))
    assert not checks, f"{page}: documented values not checked (block gone?): {checks}"
    return skipped


@pytest.mark.parametrize(
    "page",
    [p for p in MODEL_PAGES if python_blocks(p)]
    + ["tutorials/graphs.md", "tutorials/ldp.md", "tutorials/blowfish.md"],
)
def test_model_page_python_runs(page: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    start = time.perf_counter()
    skipped = run_page(page, tmp_path, monkeypatch)
    assert all(len(r) > 10 for r in skipped), f"skip reasons must say why: {skipped}"
    assert time.perf_counter() - start < 45, f"docs/{page} examples are too slow for a doc test"


def test_skip_markers_are_found() -> None:
    marked = [b.skip for p in MODEL_PAGES for b in python_blocks(p) if b.skip]
    assert any("Spark" in r for r in marked)
    text = "<!-- docs-test: skip (needs a browser) -->\n```python\nx = 1\n```\n"
    assert SKIP.search(text.splitlines()[0]).group(1) == "needs a browser"  # type: ignore[union-attr]


def test_every_documented_page_exists() -> None:
    assert all((DOCS / page).exists() for page in DOCUMENTED)


# ---- fugu commands quoted in the prose ----------------------------------------------------------


def inline_commands() -> list[tuple[str, str]]:
    """(page, command) for every `fugu ...` in backticks outside code blocks."""
    out = []
    for path in ALL_PAGES:
        text = re.sub(r"```.*?```", "", path.read_text(encoding="utf-8"), flags=re.S)
        for cmd in re.findall(r"`(fugu [^`]+)`", text):
            out.append((str(path.relative_to(ROOT)), cmd))
    return out


def _command(args: list[str]) -> tuple[click.Command, list[str]]:
    from fugu.cli import _load_models, cli

    _load_models()
    if "report" not in cli.commands:
        from fugu.cli import report

        report.register(cli)
    cmd: click.Command = cli
    while isinstance(cmd, click.Group) and args and not args[0].startswith("-"):
        sub = cmd.commands.get(args[0])
        if sub is None:
            break
        cmd, args = sub, args[1:]
    return cmd, args


def test_inline_check_can_fail() -> None:
    with pytest.raises(AssertionError, match="--branchng is not an option"):
        test_inline_command_options_exist("x.md", "fugu release -a age --branchng 4")
    with pytest.raises(AssertionError, match="names no fugu command"):
        test_inline_command_options_exist("x.md", "fugu relase -a age")


@pytest.mark.parametrize(("page", "line"), inline_commands())
def test_inline_command_options_exist(page: str, line: str) -> None:
    args = shlex.split(line.replace("…", ""))[1:]
    cmd, rest = _command(args)
    placeholder = bool(rest) and re.fullmatch(r"[A-Z][A-Z_.]*", rest[0]) is not None  # COMMAND
    assert not isinstance(cmd, click.Group) or not rest or rest[0].startswith("-") or placeholder, (
        f"{page}: '{line}' names no fugu command"
    )
    known = {o for p in cmd.params for o in (*p.opts, *p.secondary_opts)} | {"--help", "-h"}
    for tok in rest:
        if tok.startswith("-") and not re.fullmatch(r"-?\d.*", tok):
            assert tok.split("=", 1)[0] in known, f"{page}: '{line}': {tok} is not an option"


def test_cli_default_engines_are_the_ones_cli_md_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/cli.md said DuckDB counted CSV files by default; the CLI uses the numpy engine."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    import fugu
    from fugu.cli import main

    text = " ".join((DOCS / "cli.md").read_text(encoding="utf-8").split())
    assert "A Parquet file is counted by DuckDB and a CSV file by the numpy engine" in text
    monkeypatch.chdir(tmp_path)
    (tmp_path / "s.csv").write_text("age,grade\n30,A\n41,B\n")
    pq.write_table(pa.table({"age": [30, 41], "grade": ["A", "B"]}), tmp_path / "s.parquet")
    for data, engine in [("s.csv", "numpy"), ("s.parquet", "duckdb")]:
        args = ["release", "--data", data, "-a", "age:18..70,grade:A|B|C", "-e", "1", "-q"]
        assert main([*args, "--out", f"{data}.npz"]) == 0
        rel = fugu.Release.load(f"{data}.npz")
        assert rel.guarantee.data_options["engine"] == engine, data


def test_central_tutorial_predictions_are_current() -> None:
    """The 'predicted' column of tutorials/central.md is what recommend() computes now.

    It showed the product of trees (46.6) as the default hierarchical plan after the default
    became the Kronecker plan (42.8).
    """
    import fugu
    from fugu.datasets import adult_domain

    rows = {}
    for line in (DOCS / "tutorials" / "central.md").read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and re.fullmatch(r"[\d.]+", cells[2]):
            rows[cells[0].split(" (")[0] + (" default" if "(default" in cells[0] else "")] = float(
                cells[2]
            )
    dom = adult_domain(["age", "sex", "occupation", "income"])
    wl = fugu.random_workload(dom, 1000, n_predicates=(1, 4), seed=0)
    rec = fugu.central.recommend(dom, wl, epsilon=1.0)
    assert rows["hierarchical default"] == round(rec.rmse["hierarchical"], 1)
    assert rows["laplace"] == round(rec.rmse["laplace"], 1)
    assert rows["privelet"] == round(rec.rmse["privelet"])


def dotted_names() -> list[tuple[str, str]]:
    """(page, name) for every ``fugu.a.b`` the README and docs mention (file names excluded)."""
    found = set()
    for path in [*ALL_PAGES, *sorted(DOCS.glob("reference/*.md"))]:
        for name in re.findall(r"(?<![\w/.-])fugu(?:\.[A-Za-z_]\w*)+", path.read_text("utf-8")):
            if name.rsplit(".", 1)[1] not in {"fish", "bash", "json", "html", "npz", "lock"}:
                found.add((str(path.relative_to(ROOT)), name))
    return sorted(found)


def resolve(name: str) -> object:
    import importlib

    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj: object = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for attr in parts[i:]:
            obj = getattr(obj, attr)
        return obj
    raise ImportError(name)


@pytest.mark.parametrize("page", sorted({page for page, _ in dotted_names()}))
def test_dotted_names_in_the_docs_exist(page: str) -> None:
    missing = []
    for _, name in [pn for pn in dotted_names() if pn[0] == page]:
        try:
            resolve(name)
        except (AttributeError, ImportError):
            missing.append(name)
    assert not missing, f"{page} names what does not exist: {missing}"


def test_dotted_name_check_can_fail() -> None:
    assert resolve("fugu.central.hierarchical") is not None
    with pytest.raises(AttributeError):
        resolve("fugu.central.hierachical")


# The model pages name these public functions and classes; the API reference must document them.
API_PAGES = {
    "fugu.central": ["central.md", "tutorials/central.md"],
    "fugu.blowfish": ["blowfish.md", "kmeans.md", "tutorials/blowfish.md"],
    "fugu.graph": ["graph.md", "tutorials/graphs.md"],
    "fugu.ldp": ["ldp.md", "ldp_grids.md", "tutorials/ldp.md"],
    "fugu.engines": ["engines.md"],
}
# its docstring's |X(D1) − X(D2)| is an undefined reStructuredText substitution (sphinx -W fails)
NOT_IN_API_REFERENCE = {"fugu.graph.general_recursive"}


def test_api_reference_documents_what_the_pages_use() -> None:
    import importlib

    api = (DOCS / "reference" / "api.md").read_text(encoding="utf-8")
    documented = {
        id(resolve(name)) for name in re.findall(r"^\.\. auto\w+:: (fugu[\w.]*)", api, flags=re.M)
    }
    missing = []
    for module, pages in API_PAGES.items():
        text = "\n".join((DOCS / p).read_text(encoding="utf-8") for p in pages)
        for name in importlib.import_module(module).__all__:
            used = re.search(rf"(?<![\w.]){name}\(|`{name}`|{re.escape(module)}\.{name}\b", text)
            full = f"{module}.{name}"
            if used and not name.isupper() and full not in NOT_IN_API_REFERENCE:
                if id(resolve(full)) not in documented:
                    missing.append(full)
    assert not missing, f"docs/reference/api.md lacks {missing}"


def test_examples_import_only_what_a_fresh_install_has() -> None:
    """``pip install .`` brings fugu's dependencies only (no pandas, scikit-learn, xxhash)."""
    import sys
    import tomllib

    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    installed = {re.split(r"[<>=\[ ;]", d, maxsplit=1)[0].lower().replace("-", "_") for d in deps}
    allowed = installed | set(sys.stdlib_module_names) | {"fugu"}
    bad = []
    for path in ALL_PAGES:
        for b in blocks(path):
            if b.lang != "python" or b.skip:
                continue
            for node in ast.walk(ast.parse(b.text)):
                names = []
                if isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                    names = [node.module]
                bad += [
                    f"{path.name}:{b.line} {n}" for n in names if n.split(".")[0] not in allowed
                ]
    assert not bad, f"examples import what a fresh install lacks: {bad}"


def test_ldp_tutorial_uniform_guess_is_current() -> None:
    """The uniform guess is deterministic: its error in tutorials/ldp.md must be today's.

    The page said 11,220 after the demo's workload had changed (11,349).
    """
    import fugu
    from fugu.datasets import adult, adult_domain
    from fugu.demo import LDP_ATTRIBUTES
    from fugu.queries import mae

    text = " ".join((DOCS / "tutorials" / "ldp.md").read_text(encoding="utf-8").split())
    shown = re.search(r"and ([\d,]+) for the uniform guess", text)
    assert shown, "tutorials/ldp.md no longer quotes the uniform guess"
    dom = adult_domain(list(LDP_ATTRIBUTES))
    records = {k: v for k, v in adult().items() if k in dom.names}
    wl = fugu.random_workload(dom, 300, n_predicates=2, volume=0.5, seed=1)
    truth = wl.answer(fugu.Histogram.from_records(records, dom).counts, dom)
    uni = fugu.ldp.Uni(dom, epsilon=1.0).simulate(records)
    assert round(mae(uni.answer_many(wl), truth)) == int(shown.group(1).replace(",", ""))


def test_ldp_rejection_reasons_are_the_ones_the_pages_list(tmp_path: Path) -> None:
    """docs/ldp.md's table names every reason the aggregator counts; docs/engines.md filed a
    bit vector of another length under 'malformed', which the aggregator counts as 'wrong type'."""
    import json
    import warnings

    import fugu
    from fugu.ldp.wire import REASONS

    text = (DOCS / "ldp.md").read_text(encoding="utf-8")
    table = text.split("| reason | what |", 1)[1].split("\n\n", 1)[0]
    assert set(re.findall(r"^\| `([^`]+)` \|", table, flags=re.M)) == set(REASONS)
    engines = " ".join((DOCS / "engines.md").read_text(encoding="utf-8").split())
    assert "`wrong type` (text, a fraction where an integer belongs, a bit vector of another" in (
        engines
    )

    oue = fugu.ldp.OUE(fugu.Domain([fugu.Ordinal("age", 0, 99)]), 1.0)
    oue.client().perturb({"age": [3, 4, 5]}).save(tmp_path / "r.jsonl")
    head, short, gone, ok = (tmp_path / "r.jsonl").read_text().splitlines()
    short = json.dumps({k: v[:-2] for k, v in json.loads(short).items()})  # one byte short
    gone = json.dumps({})  # a row without the column
    (tmp_path / "bad.jsonl").write_text("\n".join([head, short, gone, ok]) + "\n")
    agg = oue.aggregator()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        agg.add(fugu.ldp.Reports.load(tmp_path / "bad.jsonl"))
    assert dict(agg.rejected) == {"wrong type": 1, "malformed": 1} and agg.n_accepted == 1


def test_benchmark_commands_use_options_the_scripts_define() -> None:
    """`python bench/bench_x.py --opt` in the pages: the script exists and defines --opt."""
    bad = []
    for path in ALL_PAGES:
        text = path.read_text(encoding="utf-8")
        for script, args in re.findall(
            r"(bench_\w+\.py)((?:\s+--?[\w-]+(?:\s+[^\s`|-][^\s`|]*)?)*)", text
        ):
            source = ROOT / "bench" / script
            if not source.exists():
                bad.append(f"{path.name}: {script} does not exist")
                continue
            code = source.read_text(encoding="utf-8")
            for opt in re.findall(r"(?<![\w-])(--[\w-]+)", args):
                if f'"{opt}"' not in code:
                    bad.append(f"{path.name}: {script} has no {opt}")
    assert not bad, bad


def test_hat_tree_graded_plan_is_chosen_where_central_md_says() -> None:
    """central.md said the graded plan wins under replace-one at 100, 128 and 384 cells; the
    planner picks the hat levels there (and the cells alone at 40), graded under add/remove."""
    from fugu.central.hatplan import plan_hat_tree

    text = " ".join((DOCS / "central.md").read_text(encoding="utf-8").split())
    assert "Under replace-one (the default) it is chosen at none of the sizes tried" in text
    assert plan_hat_tree(40, neighbours="add-remove").choice == "graded"
    assert plan_hat_tree(40, neighbours="replace").choice == "identity"  # "up to 74 the cells"
    assert plan_hat_tree(100, neighbours="replace").choice == "optimal"  # "from 100 on the hats"


def test_kmeans_smallest_epsilon_is_what_kmeans_md_says() -> None:
    """kmeans.md said every ε below about 1e-11 is refused; the default grid start runs at 1e-13."""
    import numpy as np

    import fugu
    from fugu.blowfish.kmeans import KMeans
    from fugu.errors import InvalidParameterError

    text = " ".join((DOCS / "kmeans.md").read_text(encoding="utf-8").split())
    assert "with noisy updates on the 400 × 300 map below, about 1e-11 and up" in text
    dom = fugu.Domain([fugu.Ordinal("lat", 0, 399), fugu.Ordinal("lon", 0, 299)])
    X = np.random.default_rng(0).integers(0, [400, 300], size=(500, 2))
    KMeans(4, 1e-11, domain=dom, init="spread").fit(X)
    with pytest.raises(InvalidParameterError, match="too small"):
        KMeans(4, 1e-12, domain=dom, init="spread").fit(X)
    KMeans(4, 1e-15, domain=dom).fit(X)  # grid start only
