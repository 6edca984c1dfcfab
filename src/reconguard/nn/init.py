"""Seeded construction without touching the global RNG (DESIGN: randomness comes in as a seed)."""

from __future__ import annotations

import contextlib

import torch


@contextlib.contextmanager
def seeded(seed: int | None):
    """Run a block (e.g. module construction) under ``seed``; the global RNG state is restored after."""
    if seed is None:
        yield
        return
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed))
        yield
