"""CLI for central DP cubes: the hierarchical, hat-tree and Privelet mechanisms, and
``fugu recommend``."""

from __future__ import annotations

from functools import partial
from typing import Any

import click

from ._common import (
    MechanismEntry,
    bool_option,
    domain_options,
    emit,
    int_option,
    load_domain,
    parse_workload,
    refuse_unused,
    register_mechanism,
    table,
)


def _hierarchical(
    hist: Any, epsilon: float, options: dict[str, Any], rng: Any, accountant: Any = None
) -> Any:
    from ..central import hierarchical

    return hierarchical(
        hist,
        epsilon,
        branching=options.get("branching"),
        budget=_budget_option(options.get("budget", "optimal")),
        consistency=bool_option(options, "consistency", True),
        nonnegative=bool_option(options, "nonnegative", False),
        flat=[f for f in str(options["flat"]).split(",") if f] if options.get("flat") else None,
        neighbours=options.get("neighbours", "replace"),
        strategy=options.get("strategy", "auto"),
        rng=rng,
        accountant=accountant,
    )


def _budget_option(value: Any) -> Any:
    """``-o budget=uniform`` or per-level shares ``-o budget=1,2,4`` (top level first): the
    shares reached the library as the text '1,2,4', which it refused although the error
    offered per-level shares."""
    from ..errors import InvalidParameterError

    if not isinstance(value, str) or "," not in value:
        return value
    parts = [p.strip() for p in value.split(",")]
    try:
        return [float(p) for p in parts]
    except ValueError:
        raise InvalidParameterError(
            f"-o budget={value}: per-level shares are numbers separated by commas, top level "
            f"first (e.g. -o budget=1,2,4), or one of optimal, uniform, geometric"
        ) from None


def _hat_tree(
    hist: Any, epsilon: float, options: dict[str, Any], rng: Any, accountant: Any = None
) -> Any:
    from ..central import hat_tree

    fanout = int_option(
        options, "fanout", " (>= 2); or leave it out to let the expected error choose"
    )
    # an explicit fan-out asks for the hat tree: 'auto' (the default otherwise) released the
    # tree instead and dropped -o fanout=B without a word; -o strategy=auto still compares
    return hat_tree(
        hist,
        epsilon,
        fanout=fanout,
        strategy=options.get("strategy", "auto" if fanout is None else "hats"),
        neighbours=options.get("neighbours", "replace"),
        rng=rng,
        accountant=accountant,
    )


def _privelet(
    hist: Any,
    epsilon: float,
    options: dict[str, Any],
    rng: Any,
    accountant: Any = None,
    *,
    plain_default: str | None = None,
) -> Any:
    """Privelet with ``--plain`` defaulting to ``plain_default`` (None: every attribute is
    transformed; 'auto': Privelet+)."""
    from ..central import privelet

    return privelet(
        hist,
        epsilon,
        plain=options.get("plain", plain_default),
        neighbours=options.get("neighbours", "replace"),
        rng=rng,
        accountant=accountant,
    )


register_mechanism(
    MechanismEntry(
        "hierarchical",
        _hierarchical,
        "central-dp",
        "b-ary trees + least squares (--branching B, -o budget=uniform or 1,2,4, "
        "-o consistency=false, -o nonnegative=true, -o flat=sex; cubes: "
        "-o strategy=auto|trees|kronecker)",
        options=("branching", "budget", "consistency", "nonnegative", "flat", "strategy"),
    )
)
register_mechanism(
    MechanismEntry(
        "hat-tree",
        _hat_tree,
        "central-dp",
        "1-D: overlapping hat levels + least squares; by default the lower expected error of "
        "this and the tree (-o strategy=hats|auto; -o fanout=B: the hat tree with fan-out B)",
        options=("fanout", "strategy"),
        in_demo=False,
    )
)
register_mechanism(
    MechanismEntry(
        "privelet",
        _privelet,
        "central-dp",
        "Privelet: Haar / nominal wavelets on every attribute (--plain names)",
        options=("plain",),
    )
)
register_mechanism(
    MechanismEntry(
        "privelet+",
        partial(_privelet, plain_default="auto"),
        "central-dp",
        "Privelet+: wavelets except on small attributes (--plain auto|names)",
        demo_options={"plain": "auto"},
        options=("plain",),
    )
)


def register(cli: click.Group) -> None:
    @cli.command()
    @domain_options("'adult' or a data file (only its domain is used).")
    @click.option(
        "--workload",
        "-w",
        default="random:1000",
        show_default=True,
        help="'random:N[:K1-K2]' (K predicates per query) or a JSON list of queries.",
    )
    @click.option("--epsilon", "-e", type=float, required=True, help="Privacy-loss bound ε > 0.")
    @click.option(
        "--neighbours",
        type=click.Choice(["replace", "add-remove"]),
        default="replace",
        show_default=True,
    )
    @click.option(
        "--seed",
        type=int,
        default=0,
        show_default=True,
        help="Seed of the random workload (public).",
    )
    @click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
    @click.pass_context
    def recommend(
        ctx: click.Context,
        data: str,
        attributes: tuple[str, ...],
        domain_file: str | None,
        workload: str,
        epsilon: float,
        neighbours: str,
        seed: int,
        as_json: bool,
    ) -> None:
        """Predict each central mechanism's error on a workload and recommend one.

        Uses only the domain, the workload and ε: no data is read and no budget is spent.
        """
        from ..central import recommend as rec_fn

        if not workload.startswith("random"):
            refuse_unused(ctx, {"seed": "--seed"}, "with a workload file (it seeds random:N)")
        dom = load_domain(data, attributes, domain_file)
        w = parse_workload(workload, dom, seed)
        rec = rec_fn(dom, w, epsilon, neighbours=neighbours)

        def options_text(opts: dict[str, Any]) -> str:
            return "; ".join(f"{k}={v}" for k, v in opts.items()) or "-"

        def text() -> str:
            rows = [[*r[:3], options_text(rec.options.get(r[0], {}))] for r in rec.table()]
            return (
                f"predicted RMSE over {len(w)} queries, epsilon = {epsilon:g} (no data read):\n"
                + table(rows, ["mechanism", "RMSE", "x better than laplace", "options"])
                + f"\nrecommended: {rec.best}"
            )

        emit(rec.to_dict() | {"n_queries": len(w)}, as_json, text)
