"""The UCI Adult census data, bundled, with a documented domain and hierarchies.

Data: Becker, B. and Kohavi, R. (1996), "Adult", UCI Machine Learning Repository,
https://archive.ics.uci.edu/dataset/2/adult, CC BY 4.0 (attribution in ``data/ADULT-SOURCE.md``).
32,561 training + 16,281 test rows = 48,842 people.

Cleaning, all public and documented: surrounding spaces are stripped; the test file's income
labels lose their trailing "."; a missing value ("?") becomes the explicit value ``"Unknown"``
(never dropped). Hierarchies group values as described in :data:`HIERARCHIES`; every nominal
hierarchy has all its leaves at the same depth.

>>> from fugu.datasets import adult, adult_domain
>>> cols = adult()
>>> len(cols["age"])
48842
>>> adult_domain(["age", "sex"]).shape
(74, 2)
"""

from __future__ import annotations

import csv
import gzip
from collections.abc import Sequence
from functools import lru_cache
from importlib import resources
from typing import Any

import numpy as np

from ..domain import Domain, Hierarchy, Nominal, Ordinal
from ..errors import InvalidParameterError

COLUMNS = (
    "age", "workclass", "fnlwgt", "education", "education_num", "marital_status", "occupation",
    "relationship", "race", "sex", "capital_gain", "capital_loss", "hours_per_week",
    "native_country", "income",
)  # fmt: skip

#: Edges of the capital-gain bins (dollars); the last bin is closed.
CAPITAL_GAIN_EDGES = (0, 1, 1000, 2000, 3000, 4000, 5000, 7500, 10000, 15000, 20000, 50000, 100000)

HIERARCHIES: dict[str, dict[str, Any]] = {
    "workclass": {
        "workclass:*": {
            "Private-sector": ["Private"],
            "Self-employed": ["Self-emp-not-inc", "Self-emp-inc"],
            "Government": ["Federal-gov", "Local-gov", "State-gov"],
            "Not-working": ["Without-pay", "Never-worked"],
            "Unknown-workclass": ["Unknown"],
        }
    },
    "education": {
        "education:*": {
            "Before-high-school": [
                "Preschool",
                "1st-4th",
                "5th-6th",
                "7th-8th",
                "9th",
                "10th",
                "11th",
                "12th",
            ],
            "High-school": ["HS-grad", "Some-college"],
            "Associate": ["Assoc-acdm", "Assoc-voc"],
            "University": ["Bachelors", "Masters", "Prof-school", "Doctorate"],
        }
    },
    "marital_status": {
        "marital_status:*": {
            "Married": ["Married-civ-spouse", "Married-spouse-absent", "Married-AF-spouse"],
            "Previously-married": ["Divorced", "Separated", "Widowed"],
            "Single": ["Never-married"],
        }
    },
    "occupation": {
        "occupation:*": {
            "White-collar": [
                "Adm-clerical",
                "Exec-managerial",
                "Prof-specialty",
                "Sales",
                "Tech-support",
            ],
            "Blue-collar": [
                "Craft-repair",
                "Farming-fishing",
                "Handlers-cleaners",
                "Machine-op-inspct",
                "Transport-moving",
            ],
            "Service": ["Other-service", "Priv-house-serv", "Protective-serv"],
            "Other-occupation": ["Armed-Forces", "Unknown"],
        }
    },
    "relationship": {
        "relationship:*": {
            "Spouse": ["Husband", "Wife"],
            "Family": ["Own-child", "Other-relative"],
            "Non-family": ["Not-in-family", "Unmarried"],
        }
    },
    "race": {"race:*": ["White", "Black", "Asian-Pac-Islander", "Amer-Indian-Eskimo", "Other"]},
    "sex": {"sex:*": ["Female", "Male"]},
    "income": {"income:*": ["<=50K", ">50K"]},
    "native_country": {
        "native_country:*": {
            "North-America": {
                "United-States-and-territories": [
                    "United-States",
                    "Outlying-US(Guam-USVI-etc)",
                    "Puerto-Rico",
                ],
                "Canada-region": ["Canada"],
                "Central-America": ["Mexico", "Honduras", "Guatemala", "Nicaragua", "El-Salvador"],
                "Caribbean": ["Cuba", "Jamaica", "Dominican-Republic", "Haiti", "Trinadad&Tobago"],
            },
            "South-America": {"South-America-region": ["Ecuador", "Columbia", "Peru"]},
            "Europe": {
                "Western-Europe": [
                    "England",
                    "Scotland",
                    "Ireland",
                    "France",
                    "Germany",
                    "Holand-Netherlands",
                ],
                "Southern-Europe": ["Italy", "Portugal", "Greece"],
                "Eastern-Europe": ["Poland", "Hungary", "Yugoslavia"],
            },
            "Asia": {
                "East-Asia": ["China", "Japan", "Taiwan", "Hong", "South"],
                "South-East-Asia": ["Cambodia", "Philippines", "Vietnam", "Laos", "Thailand"],
                "South-and-West-Asia": ["India", "Iran"],
            },
            "Unknown-continent": {"Unknown-region": ["Unknown"]},
        }
    },
}

ORDINALS: dict[str, Ordinal] = {
    "age": Ordinal("age", 17, 90),
    "education_num": Ordinal("education_num", 1, 16),
    "hours_per_week": Ordinal("hours_per_week", 1, 99),
    "capital_gain": Ordinal("capital_gain", edges=CAPITAL_GAIN_EDGES),
}

#: Attributes with a declared domain, in a fixed order.
ADULT_ATTRIBUTES: tuple[str, ...] = (
    "age", "sex", "race", "workclass", "education", "education_num", "marital_status",
    "occupation", "relationship", "hours_per_week", "capital_gain", "native_country", "income",
)  # fmt: skip

_NUMERIC = {"age", "fnlwgt", "education_num", "capital_gain", "capital_loss", "hours_per_week"}


@lru_cache(maxsize=4)
def _load(split: str) -> dict[str, np.ndarray]:
    files = {
        "train": ["adult.data.gz"],
        "test": ["adult.test.gz"],
        "all": ["adult.data.gz", "adult.test.gz"],
    }
    if split not in files:
        raise InvalidParameterError(f"split must be 'train', 'test' or 'all', got {split!r}")
    rows: list[list[str]] = []
    base = resources.files("fugu.datasets") / "data"
    for name in files[split]:
        with resources.as_file(base / name) as path, gzip.open(path, "rt", newline="") as fh:
            for rec in csv.reader(fh, skipinitialspace=True):
                if len(rec) != len(COLUMNS):
                    continue  # blank lines and the test file's "|1x3 Cross validator" comment line
                rows.append(rec)
    cols: dict[str, np.ndarray] = {}
    for j, name in enumerate(COLUMNS):
        raw = [r[j].strip() for r in rows]
        if name in _NUMERIC:
            cols[name] = np.asarray(raw, dtype=np.int64)
        else:
            vals = np.asarray(
                [("Unknown" if v == "?" else v.rstrip(".")) for v in raw], dtype=object
            )
            cols[name] = vals
    return cols


def adult(split: str = "all") -> dict[str, np.ndarray]:
    """The Adult records as ``{column: array}`` (a fresh copy each call).

    ``split``: ``"train"`` (32,561 rows), ``"test"`` (16,281) or ``"all"`` (48,842).
    """
    return {k: v.copy() for k, v in _load(split).items()}


def adult_attribute(name: str) -> Ordinal | Nominal:
    if name in ORDINALS:
        return ORDINALS[name]
    if name in HIERARCHIES:
        return Nominal(name, Hierarchy.from_dict(HIERARCHIES[name]))
    raise InvalidParameterError(
        f"Adult has no declared domain for {name!r}; choose from {list(ADULT_ATTRIBUTES)}"
    )


def adult_domain(attributes: Sequence[str] | None = None) -> Domain:
    """The documented domain of the chosen Adult attributes.

    Default: age, sex, occupation, income.
    """
    names = list(attributes) if attributes is not None else ["age", "sex", "occupation", "income"]
    return Domain([adult_attribute(n) for n in names])


def adult_histogram(attributes: Sequence[str] | None = None, split: str = "all") -> Any:
    """The Adult histogram over the chosen attributes."""
    from ..histogram import Histogram

    dom = adult_domain(attributes)
    return Histogram.from_records(adult(split), dom)
