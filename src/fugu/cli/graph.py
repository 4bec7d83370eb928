"""``fugu graph``: node- and edge-DP pattern counts (Recursive Mechanism) from the command line."""

from __future__ import annotations

import sys
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import click

from ._common import (
    emit,
    ledger_line,
    ledger_option,
    open_ledger,
    quiet_requested,
    refuse_overwriting,
    refuse_unused,
    seed_source,
    table,
)

GRAPHS = ("karate", "lesmis", "florentine", "davis")


def _load(edges: str | None, graph: str | None, drop_self_loops: bool) -> Any:
    import networkx as nx

    from ..graph import read_edge_list

    if (edges is None) == (graph is None):
        raise click.UsageError("give exactly one of --edges FILE or --graph NAME")
    if edges is not None:
        return read_edge_list(edges, self_loops="drop" if drop_self_loops else "error")
    loaders = {
        "karate": nx.karate_club_graph,
        "lesmis": nx.les_miserables_graph,
        "florentine": nx.florentine_families_graph,
        "davis": nx.davis_southern_women_graph,
    }
    G = loaders[str(graph)]()
    return nx.Graph(G)  # drop weights/attributes' multigraph-ness if any


#: Edge-DP mechanisms whose noise or parameters depend on the number of nodes n, which edge
#: privacy takes as public (the Recursive Mechanism does not use n).
USES_N = ("laplace", "smooth", "karwa")


def _public_nodes(G: Any, nodes: int) -> Any:
    """``G`` with isolated nodes added up to the public node count ``nodes``.

    An edge list only names the nodes that have an edge, so the node set read from it depends on
    the private edges (removing a node's last edge removes the node). Under edge privacy n is
    public: it comes from ``--nodes``. The count read from the file is never printed.
    """
    if G.number_of_nodes() > nodes:
        raise click.UsageError(
            f"--nodes {nodes}: the edge list names more nodes than that; --nodes is the public "
            f"number of nodes of the graph (isolated nodes included), at least every node that "
            f"can have an edge"
        )
    extra = nodes - G.number_of_nodes()
    G.add_nodes_from(("isolated", i) for i in range(extra))
    return G


@contextmanager
def _warnings_as_lines() -> Iterator[None]:
    """Each warning raised inside (say, an empty edge list, read and released rather than
    refused) is printed as one ``warning: ...`` line on stderr: information for the operator,
    never part of the release."""
    with warnings.catch_warnings(record=True) as caught:
        try:
            yield
        finally:
            for w in caught:
                click.echo(f"warning: {w.message}", err=True)


def _nonnegative(rel: Any) -> Any:
    """``--nonnegative``: fugu.graph's recorded clamp at 0 (post-processing)."""
    try:
        from ..graph.recursive import nonnegative_release
    except ImportError:  # pragma: no cover - an older fugu.graph
        raise click.UsageError("--nonnegative needs fugu.graph's nonnegative_release") from None
    return nonnegative_release(rel)


def register(cli: click.Group) -> None:
    @cli.group("graph")
    def graph_group() -> None:
        """Node- and edge-DP pattern counts in graphs (Recursive Mechanism)."""

    @graph_group.command("count")
    @click.option(
        "--edges",
        type=click.Path(dir_okay=False),
        help="SNAP-style edge list (read as undirected simple graph).",
    )
    @click.option(
        "--graph", "graph_name", type=click.Choice(GRAPHS), help="A graph shipped with networkx."
    )
    @click.option(
        "--pattern",
        "-p",
        default="triangle",
        show_default=True,
        help="edge, triangle, k-star, k-triangle, path, cycle, k-clique "
        "(or '2-star', '4-cycle', ...).",
    )
    @click.option("-k", "k", type=int, help="Size parameter of the pattern.")
    @click.option(
        "--unit",
        type=click.Choice(["node", "edge"]),
        default="node",
        show_default=True,
        help="Who is protected: a node with all its edges, or one edge.",
    )
    @click.option("--epsilon", "-e", type=float, required=True, help="Privacy-loss bound ε > 0.")
    @click.option(
        "--mechanism",
        type=click.Choice(["recursive", "laplace", "smooth", "karwa"]),
        default="recursive",
        show_default=True,
        help="laplace = global-sensitivity baseline (node unit needs --degree-bound); "
        "smooth = smooth-sensitivity baseline (triangles, edge unit); karwa = Karwa et al. "
        "(k-star ε-DP, k-triangle (ε, δ)-DP with --delta; edge unit).",
    )
    @click.option(
        "--delta",
        type=float,
        help="δ of an (ε, δ) mechanism (--mechanism karwa --pattern k-triangle); the ledger "
        "must have a δ total (fugu ledger init --delta).",
    )
    @click.option(
        "--degree-bound", type=int, help="Public max degree promise (node-DP Laplace baseline)."
    )
    @click.option(
        "--nodes",
        "n_nodes",
        type=click.IntRange(min=1),
        help="Public number of nodes of an --edges graph (isolated nodes included), needed by "
        "the edge-DP baselines (laplace, smooth, karwa): an edge list names only the nodes "
        "that have edges, so the node count read from it depends on the private edges.",
    )
    @click.option("--beta", type=float, help="β (default ε/5, at most 0.4).")
    @click.option("--mu", type=float, help="μ (default 1 node, 0.5 edge).")
    @click.option("--theta", type=float, help="θ of the recursive mechanism (default 1).")
    @click.option(
        "--g-factor",
        type=float,
        help="Factor of G (eq. 19; default 2 as published, 1 as R2T's implementation): "
        "utility only, privacy holds for every value > 0.",
    )
    @click.option(
        "--solver",
        type=click.Choice(["clarabel", "highs-ipm", "highs-ds", "highs"]),
        default="clarabel",
        show_default=True,
        help="Linear-program solver of the Recursive Mechanism.",
    )
    @click.option(
        "--drop-self-loops", is_flag=True, help="Drop self-loops in --edges instead of refusing."
    )
    @click.option(
        "--nonnegative",
        is_flag=True,
        help="Clamp a negative estimate at 0 (post-processing, no privacy cost, recorded).",
    )
    @click.option("--seed", type=int, help="Reproducible, NOT private run.")
    @ledger_option
    @click.option(
        "--quiet",
        "-q",
        "--no-progress",
        "quiet",
        is_flag=True,
        help="No progress display on stderr (it is off anyway when stderr is not a terminal).",
    )
    @click.option("--out", type=click.Path(dir_okay=False), help="Write the release here (.npz).")
    @click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
    @click.pass_context
    def count_cmd(
        ctx: click.Context,
        edges: str | None,
        graph_name: str | None,
        pattern: str,
        k: int | None,
        unit: str,
        epsilon: float,
        mechanism: str,
        delta: float | None,
        degree_bound: int | None,
        n_nodes: int | None,
        beta: float | None,
        mu: float | None,
        theta: float | None,
        g_factor: float | None,
        solver: str,
        drop_self_loops: bool,
        nonnegative: bool,
        seed: int | None,
        ledger: str | None,
        quiet: bool,
        out: str | None,
        as_json: bool,
    ) -> None:
        """Release a privately counted number of PATTERN occurrences."""
        from ..graph import count, karwa_count, laplace_count, smooth_triangle_count

        # Options the chosen mechanism would ignore are refused before anything is read or spent.
        recursive_only = {
            "beta": "--beta",
            "mu": "--mu",
            "theta": "--theta",
            "g_factor": "--g-factor",
            "solver": "--solver",
        }
        if mechanism != "recursive":
            refuse_unused(
                ctx,
                recursive_only,
                f"with --mechanism {mechanism} (only --mechanism recursive reads them)",
            )
        if mechanism != "laplace":
            refuse_unused(
                ctx,
                {"degree_bound": "--degree-bound"},
                f"with --mechanism {mechanism} (only --mechanism laplace reads it)",
            )
        if mechanism != "karwa":
            refuse_unused(
                ctx,
                {"delta": "--delta"},
                f"with --mechanism {mechanism} (only --mechanism karwa reads it)",
            )
        refuse_overwriting(
            out,
            "--out",
            [("the edge list (--edges)", edges), ("the budget ledger (--ledger)", ledger)],
            release=True,
        )
        if edges is None:
            refuse_unused(
                ctx, {"drop_self_loops": "--drop-self-loops"}, "without --edges (it reads them)"
            )
        if mechanism == "karwa" and unit != "edge":
            raise click.BadParameter(
                f"Karwa et al.'s counts are edge-private, got --unit {unit}; use --unit edge",
                param_hint="--mechanism",
            )
        from ..graph.patterns import canonical_pattern

        canonical = canonical_pattern(pattern)
        if k is not None and canonical in ("triangle", "edge"):
            raise click.UsageError(
                f"-k has no effect with --pattern {pattern} (it sizes k-star, k-triangle, path, "
                f"cycle and k-clique)"
            )
        if mechanism == "smooth" and (canonical != "triangle" or unit != "edge"):
            raise click.BadParameter(
                f"the smooth-sensitivity baseline counts triangles under edge privacy, got "
                f"--pattern {pattern} --unit {unit}; use --pattern triangle --unit edge or "
                f"another --mechanism",
                param_hint="--mechanism",
            )
        # n is public under edge privacy: for an edge list it must be declared (the node set
        # read from the edges changes when a node's last edge is removed, and with it the
        # baselines' sensitivity, noise and parameters, all published)
        needs_n = unit == "edge" and mechanism in USES_N and edges is not None
        if n_nodes is not None and not needs_n:
            raise click.UsageError(
                "--nodes is the public node count of an --edges graph for the edge-DP baselines "
                "(--unit edge --mechanism laplace|smooth|karwa); it has no effect here"
            )
        if needs_n and n_nodes is None:
            raise click.UsageError(
                f"--mechanism {mechanism} --unit edge uses the number of nodes n, which edge "
                f"privacy takes as public; an edge list names only the nodes that have edges, so "
                f"give the public node count with --nodes N"
            )
        with _warnings_as_lines():  # an empty edge list is read, with a warning
            G = _load(edges, graph_name, drop_self_loops)
        if needs_n:
            assert n_nodes is not None
            G = _public_nodes(G, n_nodes)
        rng = seed_source(seed)
        show = not quiet_requested(quiet) and not as_json
        t0 = time.perf_counter()
        if show:
            click.echo(
                f"enumerating {pattern} occurrences, then solving linear programs ...", err=True
            )
        model = f"{unit}-dp"
        with _warnings_as_lines(), open_ledger(ledger, model=model) as acct:
            if mechanism == "smooth":
                rel = smooth_triangle_count(G, epsilon, rng=rng, accountant=acct)
            elif mechanism == "karwa":
                rel = karwa_count(G, pattern, epsilon, k=k, delta=delta, rng=rng, accountant=acct)
            elif mechanism == "laplace":
                rel = laplace_count(
                    G,
                    pattern,
                    epsilon,
                    unit=unit,
                    rng=rng,
                    k=k,
                    degree_bound=degree_bound,
                    accountant=acct,
                )
            else:
                rel = count(
                    G,
                    pattern,
                    epsilon,
                    unit=unit,
                    rng=rng,
                    k=k,
                    beta=beta,
                    mu=mu,
                    theta=1.0 if theta is None else theta,
                    g_factor=2.0 if g_factor is None else g_factor,
                    method=solver,
                    progress=show and sys.stderr is not None,
                    accountant=acct,
                )
        if nonnegative:
            rel = _nonnegative(rel)
        seconds = time.perf_counter() - t0
        path = rel.save(out) if out else None
        # Running time depends on the data (number of LPs): shown to the operator on stderr only,
        # never part of the release or of the printed summary.
        if show:
            click.echo(f"done in {seconds:.2f} s (operator information: do not publish)", err=True)
        summary = rel.summary() | {"file": str(path) if path else None}

        def text() -> str:
            rows = [["estimate", f"{rel.value:,.1f}"]]
            if rel.delta_hat is not None:
                rows.append(["noisy sensitivity Δ̂", f"{rel.delta_hat:,.3f}"])
            if rel.noise_std is not None:
                rows.append(["noise std", f"{rel.noise_std:,.2f}"])
            lines = [table(rows, [rel.statistic, ""]), rel.guarantee.describe()]
            if rel.delta_hat is not None:
                lines.append(
                    "The estimate is biased low by design "
                    "(a private lower bound plus unbiased noise)."
                )
            if path:
                lines.append(f"written to {path}")
            if ledger:
                lines.append(ledger_line(ledger))
            return "\n".join(lines)

        emit(summary, as_json, text)
