"""The ``reconguard`` command (``python -m reconguard`` too): :func:`main` and :func:`build_parser`."""

from .main import build_parser, main

__all__ = ["build_parser", "main"]
