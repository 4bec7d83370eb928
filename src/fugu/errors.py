"""Errors raised by fugu.

Every error names the argument, the bad value and the fix. Subclasses also derive from the
built-in exception that convention expects (``ValueError`` for bad values, ``TypeError`` for bad
types), so ``except ValueError`` keeps working for callers that do not know fugu.
"""

from __future__ import annotations


class FuguError(Exception):
    """Base class of every error fugu raises on purpose."""


class InvalidParameterError(FuguError, ValueError):
    """A parameter (epsilon, branching, theta, ...) has a value fugu cannot use."""


class InvalidTypeError(FuguError, TypeError):
    """An argument has a type fugu cannot use."""


class DomainError(FuguError, ValueError):
    """Records, queries or policies do not fit the declared domain."""


class EmptyDataError(FuguError, ValueError):
    """The input has no records where some are needed."""


class DomainTooLargeError(FuguError, MemoryError):
    """A dense structure over the domain would not fit in memory."""


class BudgetExceededError(FuguError, RuntimeError):
    """A release would spend more privacy budget than remains."""


class ReportError(FuguError, ValueError):
    """A local-DP report is malformed or belongs to another protocol."""


class PolicyError(FuguError, ValueError):
    """A Blowfish policy is malformed or does not cover the domain."""


class FileFormatError(InvalidParameterError):
    """A file fugu reads (a budget ledger, a saved release) is missing, corrupt or of another kind.

    The message names the file and the problem. Derives from :class:`InvalidParameterError` so
    callers that caught that for a bad file keep working.
    """


class LedgerError(FileFormatError):
    """A budget ledger file is missing, corrupt, locked unsafely or tracks another model."""


class MissingDependencyError(FuguError, ImportError):
    """An optional package (pandas, polars, ...) is needed for this call and is not installed."""


class PrivacyLeakWarning(UserWarning):
    """An operation would weaken the stated guarantee (for example a seeded, non-private source)."""


#: Smallest epsilon any fugu mechanism accepts: 2**-52. Below it ``exp(epsilon)`` rounds to 1.0
#: (randomised response and OLH divide by ``e^epsilon - 1``) and a sensitivity-1 noise scale
#: exceeds the samplers' limit ``fugu.noise.MAX_SCALE = 2**52``.
MIN_EPSILON = 2.0**-52

#: Largest epsilon any fugu mechanism accepts.
MAX_EPSILON = 1000.0


def short_repr(value: object, limit: int = 40) -> str:
    """``repr(value)`` cut to ``limit`` characters, for error messages: they quote bad values,
    and one value can be huge (a CSV quote left open makes the rest of the file one field; a
    ledger file may hold a 400-digit number).

    >>> print(short_repr("a" * 100))
    'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa... (100 characters)
    >>> print(short_repr(10**60))
    10000000000000000000000000000000000000... (61 characters)
    """
    text = repr(value)
    if len(text) <= limit:
        return text
    size = len(value) if isinstance(value, str | bytes) else len(text)
    return f"{text[: limit - 2]}... ({size} characters)"


def check_epsilon(epsilon: object, name: str = "epsilon") -> float:
    """Return ``epsilon`` as a float after checking it is a finite number in
    ``[MIN_EPSILON, MAX_EPSILON]`` = ``[2**-52, 1000]``.

    >>> check_epsilon(0.5)
    0.5
    """
    if isinstance(epsilon, bool) or not isinstance(epsilon, int | float):
        try:
            import numpy as np

            if isinstance(epsilon, np.integer | np.floating):
                epsilon = float(epsilon)
            else:
                raise TypeError
        except TypeError:
            raise InvalidTypeError(
                f"{name} must be a positive number, got {epsilon!r} of type "
                f"{type(epsilon).__name__}; pass e.g. {name}=1.0"
            ) from None
    try:
        value = float(epsilon)  # type: ignore[arg-type]
    except OverflowError:  # an int beyond float's range
        if epsilon < 0:  # type: ignore[operator]
            raise InvalidParameterError(
                f"{name} must be > 0, got a negative integer; typical values are 0.1 to 2"
            ) from None
        raise InvalidParameterError(
            f"{name} must be at most {MAX_EPSILON:g}, got an integer too large for a float; "
            f"typical values are 0.1 to 2"
        ) from None
    if not value == value or value in (float("inf"), float("-inf")):
        raise InvalidParameterError(f"{name} must be finite, got {value!r}; pass e.g. {name}=1.0")
    if value <= 0:
        raise InvalidParameterError(
            f"{name} must be > 0, got {value!r}; a smaller {name} means more privacy and more "
            f"noise, typical values are 0.1 to 2"
        )
    if value < MIN_EPSILON:
        raise InvalidParameterError(
            f"{name}={value!r} is too small to compute with: below 2**-52 (about 2.2e-16) e^{name} "
            f"rounds to 1 in floating point and noise scales exceed the samplers' limit; fugu "
            f"accepts {name} from 2.2e-16 to 1000 (typical values are 0.1 to 2), and a mechanism "
            "may need more (its error says how much)"
        )
    if value > MAX_EPSILON:
        raise InvalidParameterError(
            f"{name}={value!r} is so large that the release is not private in any useful sense; "
            f"use a value below 1000 (typical values are 0.1 to 2)"
        )
    return value


def check_positive_int(value: object, name: str, minimum: int = 1) -> int:
    """Return ``value`` as an int after checking it is an integer >= ``minimum``.

    >>> check_positive_int(4, "branching", minimum=2)
    4
    """
    import numpy as np

    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        if isinstance(value, float | np.floating) and float(value).is_integer():
            value = int(value)
        else:
            raise InvalidTypeError(f"{name} must be an integer >= {minimum}, got {value!r}")
    ivalue = int(value)  # type: ignore[arg-type]
    if ivalue < minimum:
        raise InvalidParameterError(f"{name} must be an integer >= {minimum}, got {ivalue}")
    return ivalue
