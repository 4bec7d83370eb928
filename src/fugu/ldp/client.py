"""The user side of an LDP protocol: the randomiser that runs on each device.

:class:`Client` (``protocol.client(rng)``) randomises records into reports with the protocol's
``_perturb`` hook: ``perturb(records)`` a whole batch at once (simulation, batch clients) into a
:class:`~fugu.ldp.Reports`, ``perturb_one(record)`` one record into a JSON-able dict (one line of
the JSON-lines wire format, the path an app embeds). All randomness comes from the client's
:class:`~fugu.RandomSource` (secure by default).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ..errors import InvalidParameterError, InvalidTypeError
from ..noise import RandomSource, default_source
from .reports import Reports, _coerce_column, _empty_column

if TYPE_CHECKING:
    from .protocol import LDPProtocol

__all__ = ["Client"]


class Client:
    """The user-side randomiser of a protocol.

    ``perturb(records)`` randomises a batch (vectorised); ``perturb_one(record)`` randomises one
    record and returns a JSON-able dict, one line of the JSON-lines wire format.
    """

    def __init__(self, protocol: LDPProtocol, rng: RandomSource | None = None) -> None:
        self.protocol = protocol
        self.rng = default_source(rng)

    def perturb(self, records: Any, groups: ArrayLike | None = None) -> Reports:
        """Randomise every record; ``groups`` (public, optional) fixes each user's group."""
        p = self.protocol
        codes = p.encode(records)
        n = codes.shape[0]
        g: NDArray[np.int64] | None = None
        if p.n_groups <= 0 and groups is not None:
            raise InvalidParameterError(
                f"{p.name} does not divide users into groups (every user reports the whole "
                f"record); leave groups out"
            )
        if p.n_groups > 0:
            if groups is None:
                g = p.assign_groups(n, self.rng)
            else:
                raw = np.asarray(groups).reshape(-1)
                if raw.size and raw.dtype.kind not in "iu":  # 1.7 was truncated to group 1
                    raise InvalidParameterError(
                        f"groups must be {n} integers in [0, {p.n_groups}), one per record; "
                        f"got values of type {raw.dtype}"
                    )
                g = raw.astype(np.int64)
                if g.size != n or (n and (g.min() < 0 or g.max() >= p.n_groups)):
                    raise InvalidParameterError(
                        f"groups must be {n} integers in [0, {p.n_groups}), one per record"
                    )
        cols = (
            p._perturb(codes, self.rng, g)
            if n
            else {k: _empty_column(s) for k, s in p.report_columns().items()}
        )
        specs = p.report_columns()
        cols = {k: _coerce_column(k, specs[k], cols[k]) for k in specs}
        return Reports(p.name, p.version, p.params(), cols, n, private=self.rng.private)

    def perturb_one(self, record: Mapping[str, Any], group: int | None = None) -> dict[str, Any]:
        """Randomise one user's record (``{attribute: value}``) into one report dict.

        The group, for methods that divide users, is drawn uniformly at random when not given
        (public randomness, independent of the record).
        """
        p = self.protocol
        if not isinstance(record, Mapping):
            raise InvalidTypeError(
                f"a record must be a mapping {{attribute: value}} with the attributes "
                f"{list(p.domain.names)}, got {type(record).__name__}"
            )
        # a missing attribute is left out, so the domain's encoder names it (never a KeyError)
        codes = p.encode({k: [record[k]] for k in p.domain.names if k in record})
        g = None
        if p.n_groups <= 0 and group is not None:
            raise InvalidParameterError(
                f"{p.name} does not divide users into groups (every user reports the whole "
                f"record); leave group out"
            )
        if p.n_groups > 0:
            if group is None:
                group = int(self.rng.integers(p.n_groups))
            if isinstance(group, bool) or not isinstance(group, int | np.integer):
                raise InvalidParameterError(
                    f"group must be an integer in [0, {p.n_groups}), got {group!r}"
                )
            if not 0 <= int(group) < p.n_groups:
                raise InvalidParameterError(f"group must lie in [0, {p.n_groups}), got {group}")
            g = np.array([int(group)], dtype=np.int64)
        cols = p._perturb(codes, self.rng, g)
        specs = p.report_columns()
        row: dict[str, Any] = {}
        for k, spec in specs.items():
            v = np.asarray(cols[k])[0]
            row[k] = bytes(np.asarray(v, np.uint8)).hex() if isinstance(spec, tuple) else v.item()
        return row

    def header(self) -> dict[str, Any]:
        """The header line to send before the rows of :meth:`perturb_one`."""
        return self.protocol.header(private=self.rng.private)
