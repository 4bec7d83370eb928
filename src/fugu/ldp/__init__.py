"""Local differential privacy: frequency oracles, Square Wave, multi-dimensional range queries.

Every method is a protocol object built from a public domain and ε, with a client side that
runs on user devices and a server side that aggregates (see :mod:`fugu.ldp.protocol`)::

    olh = fugu.ldp.OLH(dom, epsilon=1.0)
    reports = olh.client().perturb(records)   # on the devices (vectorised for simulation)
    rel = olh.aggregate(reports)              # on the server -> Release (model "ldp")
    rel = olh.simulate(records)               # both, for experiments

Methods (``fugu.ldp.METHODS`` maps wire names to classes): frequency oracles ``GRR``, ``OLH``,
``OUE`` (and :func:`adaptive`); ``SW`` (Square Wave, one numeric attribute); multi-dimensional
range queries ``HIO``, ``LHIO``, ``CALM``, ``MSW``, ``Uni`` (baselines) and ``TDG``, ``HDG``.
"""

from .checks import RejectedReportsWarning
from .hdg import HDG
from .multidim import CALM, HIO, LHIO, MSW, PairsRelease, Uni
from .oracles import GRR, OLH, OUE, FrequencyRelease, GroupedOracle, adaptive, choose_oracle
from .protocol import Aggregator, Client, LDPProtocol, Reports, protocol_from_header
from .registry import METHODS, register_method
from .square_wave import SW
from .tdg import TDG

for _cls in (GRR, OLH, OUE, SW, HIO, LHIO, CALM, MSW, Uni):
    register_method(_cls)

__all__ = [
    "CALM",
    "GRR",
    "HDG",
    "HIO",
    "LHIO",
    "METHODS",
    "MSW",
    "OLH",
    "OUE",
    "SW",
    "TDG",
    "Aggregator",
    "Client",
    "FrequencyRelease",
    "GroupedOracle",
    "LDPProtocol",
    "PairsRelease",
    "Reports",
    "RejectedReportsWarning",
    "Uni",
    "adaptive",
    "choose_oracle",
    "protocol_from_header",
    "register_method",
]
