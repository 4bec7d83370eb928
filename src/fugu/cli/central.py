"""CLI for central DP cubes: the hierarchical, hat-tree and Privelet mechanisms, and
``fugu recommend``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from ..errors import InvalidParameterError
from ._common import (
    MechanismEntry,
    domain_options,
    emit,
    load_domain,
    refuse_unused,
    register_mechanism,
    table,
)


def bool_option(options: dict[str, Any], key: str, default: bool) -> bool:
    """The ``-o key=true|false`` option (``1`` / ``0`` too); any other value is refused, never
    read as true because it is not empty (``-o consistency=2``)."""
    v = options.get(key, default)
    if isinstance(v, str) and v.lower() in ("true", "false"):
        return v.lower() == "true"
    if isinstance(v, bool | int) and v in (0, 1):
        return bool(v)
    raise InvalidParameterError(f"option {key} must be true or false, got {v!r}")


def int_option(options: dict[str, Any], key: str, hint: str = "") -> int | None:
    """The integer option ``-o key=N`` (None when absent or empty). A fractional or non-number
    value is refused: ``int()`` would truncate ``-o fanout=2.9`` to 2 silently."""
    v = options.get(key)
    if v is None or v == "":
        return None
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    if isinstance(v, bool) or not isinstance(v, int):
        raise InvalidParameterError(f"option {key} must be an integer, got {v!r}{hint}")
    return v


def float_option(options: dict[str, Any], key: str) -> float | None:
    """The number option ``-o key=x`` (None when absent); ``true`` / text are refused."""
    v = options.get(key)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int | float):
        raise InvalidParameterError(f"option {key} must be a number, got {v!r}")
    return float(v)


def _hierarchical(
    hist: Any, epsilon: float, options: dict[str, Any], rng: Any, accountant: Any = None
) -> Any:
    from ..central import hierarchical

    return hierarchical(
        hist,
        epsilon,
        branching=options.get("branching"),
        budget=options.get("budget", "optimal"),
        consistency=bool_option(options, "consistency", True),
        nonnegative=bool_option(options, "nonnegative", False),
        flat=[f for f in str(options["flat"]).split(",") if f] if options.get("flat") else None,
        neighbours=options.get("neighbours", "replace"),
        strategy=options.get("strategy", "auto"),
        rng=rng,
        accountant=accountant,
    )


def _hat_tree(
    hist: Any, epsilon: float, options: dict[str, Any], rng: Any, accountant: Any = None
) -> Any:
    from ..central import hat_tree

    fanout = int_option(
        options, "fanout", " (>= 2); or leave it out to let the expected error choose"
    )
    return hat_tree(
        hist,
        epsilon,
        fanout=fanout,
        strategy=options.get("strategy", "auto"),
        neighbours=options.get("neighbours", "replace"),
        rng=rng,
        accountant=accountant,
    )


def _privelet(
    hist: Any, epsilon: float, options: dict[str, Any], rng: Any, accountant: Any = None
) -> Any:
    from ..central import privelet

    return privelet(
        hist,
        epsilon,
        plain=options.get("plain"),
        neighbours=options.get("neighbours", "replace"),
        rng=rng,
        accountant=accountant,
    )


def _privelet_plus(
    hist: Any, epsilon: float, options: dict[str, Any], rng: Any, accountant: Any = None
) -> Any:
    from ..central import privelet

    return privelet(
        hist,
        epsilon,
        plain=options.get("plain", "auto"),
        neighbours=options.get("neighbours", "replace"),
        rng=rng,
        accountant=accountant,
    )


register_mechanism(
    MechanismEntry(
        "hierarchical",
        _hierarchical,
        "central-dp",
        "b-ary trees + least squares (--branching B, -o budget=uniform, "
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
        "this and the tree (-o strategy=hats|auto, -o fanout=B)",
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
        _privelet_plus,
        "central-dp",
        "Privelet+: wavelets except on small attributes (--plain auto|names)",
        demo_options={"plain": "auto"},
        options=("plain",),
    )
)


def parse_workload(spec: str, dom: Any, seed: int | None, option: str = "--workload") -> Any:
    """``random:N[:K1-K2]`` (seeded) or a JSON file of queries, for ``option``."""
    from ..queries import RangeQuery, Workload, random_workload

    if spec.startswith("random"):
        parts = spec.split(":")
        try:
            if parts[0] != "random" or len(parts) > 3:  # nothing is ignored
                raise ValueError(spec)
            n = int(parts[1]) if len(parts) > 1 and parts[1] else 1000
            if len(parts) > 2:
                lo, _, hi = parts[2].partition("-")
                k: int | tuple[int, int] = (int(lo), int(hi or lo))
            else:
                k = (1, dom.ndim)
        except ValueError:
            raise InvalidParameterError(
                f"{option} {spec!r}: write random:N or random:N:K1-K2 (predicates per query)"
            ) from None
        return random_workload(dom, n, n_predicates=k, seed=seed)
    path = Path(spec)
    if not path.exists():
        raise InvalidParameterError(
            f"{option} {spec!r} is neither 'random:N[:K1-K2]' nor an existing JSON file of queries"
        )
    try:
        items = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise InvalidParameterError(f"--workload {spec!r} is not valid JSON ({exc})") from None
    if not isinstance(items, list) or not all(isinstance(q, dict) for q in items):
        raise InvalidParameterError(
            f"--workload {spec!r} must hold a JSON list of queries like "
            f'[{{"age": [20, 29], "sex": "Male"}}]'
        )
    return Workload(
        [
            RangeQuery({k: tuple(v) if isinstance(v, list) else v for k, v in q.items()})
            for q in items
        ]
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

        def text() -> str:
            rows = rec.table()
            return (
                f"predicted RMSE over {len(w)} queries, epsilon = {epsilon:g} (no data read):\n"
                + table(rows, ["mechanism", "RMSE", "x better than laplace", "options"])
                + f"\nrecommended: {rec.best}"
            )

        emit(rec.to_dict() | {"n_queries": len(w)}, as_json, text)
