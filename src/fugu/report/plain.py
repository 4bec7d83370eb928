"""The guarantee of a release in plain words: what an adversary can and cannot learn.

Written for a reader who is not a privacy expert. Every sentence follows from the release's
:class:`~fugu.Guarantee` (model, ε, neighbour relation, policy, post-processing); nothing is
read from the data.

>>> import fugu
>>> g = fugu.Guarantee("central-dp", 1.0, "replace one record", "laplace")
>>> text = plain_words(g)
>>> "cannot" in text["cannot"] and "73%" in text["cannot"]
True
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["plain_words", "posterior_bound", "plain_text"]


def posterior_bound(epsilon: float, prior: float = 0.5) -> float:
    """The most an ε-bounded release can raise an adversary's belief from ``prior``.

    Odds can grow by at most a factor e^ε, so a 50% guess becomes at most e^ε / (1 + e^ε).

    >>> round(posterior_bound(1.0), 3)
    0.731
    """
    odds = prior / (1.0 - prior) * math.exp(epsilon)
    return odds / (1.0 + odds)


#: What central DP leaves learnable, under either neighbour relation.
_GROUP_PATTERNS = (
    "patterns over many people: counts, proportions and trends, to within the stated error. A "
    'fact that holds for a whole group ("most people aged 20-29 earn under 50K") is learned '
    "about everyone in that group, in the data or not: that is the purpose of the release, not "
    "a leak."
)


def _unit_sentence(model: str, g: Any) -> tuple[str, str, str]:
    """(who is protected, what the adversary cannot learn, what remains learnable)."""
    params = dict(getattr(g, "parameters", {}) or {})
    policy = params.get("policy")
    if model == "central-dp" and "replace" in str(getattr(g, "neighbours", "")):
        # bounded DP: the number of records is public and may be released exactly, so
        # membership is not what it protects (a record added changes the exact total)
        return (
            "every person in the data (one record each)",
            "what any one person's record says",
            "the exact number of records: under replace-one neighbours it is public and may be "
            "released exactly, so whether one person is in the data at all is not protected "
            "when the count gives it away (use add/remove neighbours to protect that too); and "
            + _GROUP_PATTERNS,
        )
    if model == "central-dp":
        return (
            "every person in the data (one record each)",
            "whether any one person is in the data, or what their record says",
            _GROUP_PATTERNS,
        )
    if model == "blowfish":
        pol = f" ({policy})" if policy else ""
        # the policy's bottom vertex (add/remove neighbours) also hides whether a person is in
        bottom = bool(params.get("bottom")) or str(policy or "").endswith("+bottom")
        presence = (
            "; and whether any one person is in the data at all (the policy's bottom vertex: "
            "add/remove neighbours)"
            if bottom
            else ""
        )
        return (
            f"the secret pairs of the policy{pol}: for every pair of values the policy links, "
            "nobody can tell which of the two a person has"
            + (", nor whether they are in the data" if bottom else ""),
            "which of two linked values any one person has (e.g. under a distance policy with "
            "theta = 5, whether someone is 33 or 37)" + presence,
            "distinctions the policy declares not secret. Under a distance policy an adversary "
            "may learn a value roughly, to within a few times theta; under a partition policy, "
            "which block a person is in; with public constraints, what those constraints imply. "
            "Choose the policy so that every distinction that matters is a secret pair.",
        )
    if model == "node-dp":
        return (
            "every participant (a node of the graph, with all of its edges)",
            "whether any one participant is in the graph at all, and who they are connected to",
            "the overall structure of the graph, e.g. about how many triangles it has, to within "
            "the stated error.",
        )
    if model == "participant-dp":
        return (
            "every participant of the relational query (one person or entity, with every tuple "
            "it owns in the joined tables)",
            "whether any one participant is in the data at all, and what their tuples say",
            "the query's overall answer (e.g. how many tuples the join has), to within the "
            "stated error.",
        )
    if model == "edge-dp":
        return (
            "every single relationship (one edge of the graph)",
            "whether any one relationship exists",
            "which nodes exist (the node set is public) and, more or less, how connected a "
            "participant with many edges is: a person with k edges is protected only at "
            "k times epsilon. Use node privacy when a person's whole neighbourhood is sensitive.",
        )
    if model == "ldp":
        return (
            "every user, before their data leaves their device: each user randomises their own "
            "record and sends only one noisy report",
            "any one user's true value from their report, even for the server that collects the "
            "reports (no trusted curator is needed)",
            "population-level distributions and range counts, to within the stated error (which "
            "is much larger than under central DP at the same epsilon; it shrinks as the number "
            "of users grows).",
        )
    return ("(unknown model)", "(unknown)", "(unknown)")


def plain_words(g: Any) -> dict[str, str]:
    """The guarantee ``g`` (a :class:`~fugu.Guarantee`) as short paragraphs.

    Returns a dict with keys ``protects``, ``cannot``, ``can``, ``strength``, ``caveats``.
    """
    eps = float(g.epsilon)
    delta = float(getattr(g, "delta", 0.0) or 0.0)
    who, cannot, can = _unit_sentence(g.model, g)
    post = posterior_bound(eps)
    if delta:  # (ε, δ): the factor bound is not certain (Guarantee.describe says the same)
        bound = (
            f"epsilon = {eps:g}, delta = {delta:g}: seeing the release multiplies the odds of "
            f"any conclusion about the protected unit by at most e^{eps:g} = "
            f"{math.exp(eps):.3g}, except that with probability up to {delta:g} this bound may "
            "fail (this is (epsilon, delta)-DP, not pure epsilon-DP). Otherwise an adversary "
            f"who thought something was a 50/50 guess can be at most {post:.0%} sure afterwards. "
        )
    else:
        bound = (
            f"epsilon = {eps:g}: seeing the release multiplies the odds of any conclusion about "
            f"the protected unit by at most e^{eps:g} = {math.exp(eps):.3g}. An adversary who "
            f"thought something was a 50/50 guess can be at most {post:.0%} sure afterwards, "
            "however much else they know. "
        )
    strength = bound + (
        "This is a strong guarantee."
        if eps <= 1
        else "This is a moderate guarantee; epsilon above 2 to 4 protects little in the worst case."
        if eps <= 4
        else "This is a weak guarantee."
    )
    caveats = []
    if not getattr(g, "private", True):
        caveats.append(
            "NOT PRIVATE: this release was made with a seeded random source so that it can be "
            "reproduced; anybody who knows the seed can remove the noise. Do not publish it."
        )
    pp = tuple(getattr(g, "post_processing", ()) or ())
    if pp:
        caveats.append(
            "Post-processing applied after the noise (it costs no privacy): " + ", ".join(pp) + "."
        )
    caveats.append(
        "Every further release about the same people spends more budget: the epsilons add up "
        "(use a ledger file to cap the total)."
    )
    return {
        "protects": f"Who is protected: {who}.",
        "cannot": f"What an adversary cannot learn: {cannot}. {strength}",
        "can": f"What can still be learned: {can}",
        "strength": strength,
        "caveats": " ".join(caveats),
    }


def plain_text(g: Any) -> str:
    """:func:`plain_words` joined into paragraphs (separated by blank lines)."""
    w = plain_words(g)
    return "\n\n".join([w["protects"], w["cannot"], w["can"], w["caveats"]])
