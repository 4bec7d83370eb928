"""Local differential privacy: frequency oracles, Square Wave, multi-dimensional range queries.

Every method is a protocol object built from a public domain and ε, with a client side that
runs on user devices and a server side that aggregates (see :mod:`fugu.ldp.protocol`)::

    olh = fugu.ldp.OLH(dom, epsilon=1.0)
    reports = olh.client().perturb(records)   # on the devices (vectorised for simulation)
    rel = olh.aggregate(reports)              # on the server -> Release (model "ldp")
    rel = olh.simulate(records)               # both, for experiments
"""

from .hdg import HDG  # TDG and HDG register themselves
from .oracles import GRR, OLH, OUE, FrequencyRelease, GroupedOracle, adaptive, choose_oracle
from .protocol import Aggregator, Client, LDPProtocol, Reports, protocol_from_header
from .registry import METHODS, register_method
from .tdg import TDG

for _cls in (GRR, OLH, OUE):
    register_method(_cls)

__all__ = [
    "HDG",
    "TDG",
    "GRR",
    "OLH",
    "OUE",
    "METHODS",
    "Aggregator",
    "Client",
    "FrequencyRelease",
    "GroupedOracle",
    "LDPProtocol",
    "Reports",
    "adaptive",
    "choose_oracle",
    "protocol_from_header",
    "register_method",
]
