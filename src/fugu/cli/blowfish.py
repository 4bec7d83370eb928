"""CLI for Blowfish policies: ``fugu release --mechanism ordered|ordered-hierarchical|
blowfish-laplace --policy ...`` and ``fugu sensitivity``."""

from __future__ import annotations

from typing import Any

import click

from ..errors import InvalidParameterError
from ._common import (
    MechanismEntry,
    bool_option,
    domain_options,
    emit,
    float_option,
    int_option,
    load_domain,
    parse_where,
    parse_workload,
    register_mechanism,
    table,
)


def release_policy(spec: Any, domain: Any, neighbours: str | None) -> Any:
    """The policy a Blowfish release of ``fugu release --policy SPEC`` runs under (and is
    charged under): ``SPEC`` on the domain, with the ⊥ vertex for ``--neighbours add-remove``."""
    from ..blowfish import parse_policy

    if not spec:
        raise InvalidParameterError(
            "this mechanism needs --policy, e.g. --policy line, --policy 'distance:theta=5', "
            "--policy attribute or --policy 'partition:age=10'"
        )
    pol = parse_policy(str(spec), domain)
    if neighbours == "add-remove" and not pol.bottom:
        pol = pol.with_bottom()  # add/remove neighbours = the policy with the ⊥ vertex
    return pol


def _policy(hist: Any, options: dict[str, Any]) -> Any:
    return release_policy(options.get("policy"), hist.domain, options.get("neighbours"))


def _ordered(
    hist: Any, epsilon: float, options: dict[str, Any], rng: Any, accountant: Any = None
) -> Any:
    from ..blowfish import ordered

    return ordered(
        hist,
        epsilon,
        _policy(hist, options),
        inference=bool_option(options, "inference", False),
        rng=rng,
        accountant=accountant,
    )


def _ordered_hierarchical(
    hist: Any, epsilon: float, options: dict[str, Any], rng: Any, accountant: Any = None
) -> Any:
    from ..blowfish import ordered_hierarchical

    fanout, branching = int_option(options, "fanout"), int_option(options, "branching")
    if fanout is not None and branching is not None and fanout != branching:
        raise InvalidParameterError(
            f"give the tree's fan-out once: -o fanout={fanout} and --branching {branching} "
            "(the same option) differ"
        )
    return ordered_hierarchical(
        hist,
        epsilon,
        _policy(hist, options),
        fanout=fanout if fanout is not None else branching,
        height=int_option(options, "height"),
        eps_split=float_option(options, "eps_split"),
        consistency=bool_option(options, "consistency", True),
        rng=rng,
        accountant=accountant,
    )


def _blowfish_laplace(
    hist: Any, epsilon: float, options: dict[str, Any], rng: Any, accountant: Any = None
) -> Any:
    from ..blowfish import laplace

    return laplace(hist, epsilon, _policy(hist, options), rng=rng, accountant=accountant)


register_mechanism(
    MechanismEntry(
        "ordered",
        _ordered,
        "blowfish",
        "Blowfish Ordered Mechanism: noisy cumulative histogram, one ordered attribute "
        "(--policy line|'distance:theta=k'; -o inference=true)",
        in_demo=False,
        options=("policy", "inference"),
    )
)
register_mechanism(
    MechanismEntry(
        "ordered-hierarchical",
        _ordered_hierarchical,
        "blowfish",
        "Blowfish Ordered Hierarchical: cumulative counts per block + trees "
        "(--policy; -o fanout=, -o height=, -o eps_split=, -o consistency=false)",
        in_demo=False,
        options=("policy", "fanout", "branching", "height", "eps_split", "consistency"),
    )
)
register_mechanism(
    MechanismEntry(
        "blowfish-laplace",
        _blowfish_laplace,
        "blowfish",
        "Laplace noise at the policy-specific sensitivity S(h, P)/epsilon (--policy)",
        demo_options={"policy": "attribute"},
        in_demo=False,
        options=("policy",),
    )
)


def _query(spec: str, dom: Any) -> Any:
    from ..blowfish import Coarsening, CumulativeHistogram
    from ..queries import RangeQuery, Workload

    s = spec.strip()
    if s in ("histogram", "sum", "cumulative"):
        return s
    if s.startswith("cumulative:"):
        return CumulativeHistogram(s.split(":", 1)[1])
    if s.startswith("coarsening:"):
        spec_map: dict[str, Any] = {}
        for item in s.split(":", 1)[1].split(","):
            k, _, v = item.partition("=")
            if k.strip() in spec_map:
                raise InvalidParameterError(
                    f"--query {spec!r}: {k.strip()!r} is given twice; give one width per attribute"
                )
            spec_map[k.strip()] = int(v) if v.strip().isdigit() else v.strip()
        return Coarsening(spec_map)
    if s.startswith("random:"):  # random:N[:K1-K2], as fugu recommend's --workload
        return parse_workload(s, dom, 0, option="--query")
    if "=" in s:
        return Workload([RangeQuery(_conditions(s, dom, "--query"))])
    raise InvalidParameterError(
        f"--query {spec!r}: use histogram, cumulative[:attr], sum, coarsening:age=10, "
        f"random:N[:K1-K2], "
        f"or a range 'age=20..29&sex=Male'"
    )


def _conditions(text: str, dom: Any, option: str) -> dict[str, Any]:
    """``a=lo..hi&b=v`` as conditions; an attribute named twice is refused (the last one won
    silently: 'count:age=2..3&age=5..5' was the public count of age 5 alone)."""
    out: dict[str, Any] = {}
    for part in text.split("&"):
        key, cond = parse_where(part, dom, option=option)
        if key in out:
            raise InvalidParameterError(
                f"{option} {text!r}: {key!r} is given twice; give one range per attribute "
                f"(a range query or count is a box), or repeat {option} for another one"
            )
        out[key] = cond
    return out


def _constraint(spec: str, dom: Any = None) -> Any:
    from ..blowfish import CountConstraint, MarginalConstraint

    kind, _, rest = spec.partition(":")
    if kind == "marginal" and rest:
        return MarginalConstraint([a.strip() for a in rest.split(",") if a.strip()])
    if kind == "count" and rest:
        return CountConstraint(_conditions(rest, dom, "--constraint"))
    raise InvalidParameterError(
        f"--constraint {spec!r}: write 'marginal:sex,race' or 'count:age=20..29&sex=Male'"
    )


def register(cli: click.Group) -> None:
    @cli.command()
    @domain_options("'adult' or a data file (only its domain is used).")
    @click.option(
        "--policy",
        "-p",
        multiple=True,
        required=True,
        help="Policy: line, 'distance:theta=5', attribute, full, 'partition:age=10'; repeatable.",
    )
    @click.option(
        "--query",
        "-q",
        "queries",
        multiple=True,
        help="histogram (default), cumulative[:attr], sum, coarsening:age=10, random:N[:K1-K2], "
        "age=1..9.",
    )
    @click.option(
        "--constraint",
        "-c",
        "constraints",
        multiple=True,
        help="Public constraint: 'marginal:sex' or 'count:age=20..29'.",
    )
    @click.option(
        "--brute-force",
        "brute",
        type=click.IntRange(min=1),
        help="Also enumerate every database of N >= 1 records (tiny domains).",
    )
    @click.option("--json", "as_json", is_flag=True)
    def sensitivity(
        data: str,
        attributes: tuple[str, ...],
        domain_file: str | None,
        policy: tuple[str, ...],
        queries: tuple[str, ...],
        constraints: tuple[str, ...],
        brute: int | None,
        as_json: bool,
    ) -> None:
        """Policy-specific sensitivity S(f, P) of linear queries (no data is read)."""
        from ..blowfish import brute_force_sensitivity, parse_policy
        from ..blowfish import sensitivity as sens_fn

        dom = load_domain(data, attributes, domain_file)
        cons = [_constraint(c, dom) for c in constraints]
        rows: list[list[Any]] = []
        out: list[dict[str, Any]] = []
        for p in policy:
            pol = parse_policy(p, dom)
            if cons:
                pol = pol.with_constraints(*cons)
            for qs in queries or ("histogram",):
                res = sens_fn(_query(qs, dom), pol, detail=True)
                rec: dict[str, Any] = {
                    "policy": pol.description,
                    "query": qs,
                    "sensitivity": res.value,
                    "exact": res.exact,
                    "method": res.method,
                }
                if brute:
                    rec["brute_force"] = brute_force_sensitivity(_query(qs, dom), pol, brute)
                out.append(rec)
                rows.append(
                    [rec["policy"], qs, res.value, "exact" if res.exact else "bound", res.method]
                    + ([rec["brute_force"]] if brute else [])
                )
        header = ["policy", "query", "S(f,P)", "", "how"] + (["brute force"] if brute else [])
        emit(out, as_json, lambda: table(rows, header))
