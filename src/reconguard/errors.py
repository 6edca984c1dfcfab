"""Errors raised at reconguard's edges, in words a user can act on.

Every error names the problem and the fix. They subclass the builtin types a caller
would expect (``ValueError``, ``FileNotFoundError``) so plain ``except ValueError``
code keeps working.
"""

from __future__ import annotations


class ReconguardError(Exception):
    """Base class of every reconguard error."""


class InputError(ReconguardError, ValueError):
    """An argument has the wrong value, type or range."""


class ShapeError(InputError):
    """A tensor has the wrong number of dimensions or the wrong size."""


class NonFiniteError(InputError):
    """A tensor holds NaN or Inf."""


class PixelRangeError(InputError):
    """Images are outside the [0, 1] float range reconguard works in."""


class ParameterError(InputError):
    """A scalar parameter (sigma, tau, k, alpha, ...) is out of its range."""


class UnknownOptionError(InputError):
    """An option name (dataset, encoder, recipe, preset, ...) is not known."""


class DataFileNotFoundError(ReconguardError, FileNotFoundError):
    """A data or weights file is missing; the message says where we looked and what format is expected."""


class CorruptDataError(ReconguardError, ValueError):
    """A data file exists but does not have the expected format."""


class OutputError(ReconguardError, ValueError):
    """An output path cannot be used: it holds someone else's files, another run is writing it, or it is not
    writable. Nothing is written or deleted."""
