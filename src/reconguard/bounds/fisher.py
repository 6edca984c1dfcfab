"""``E[G] = E_x[J(x)ᵀ J(x)]``, the expected Fisher information of ``Enc_D`` up to ``1/σ²``
(spectral-bounds paper, eq. 1 and section 5.3), and the split of its eigenspaces into range and null.

``estimate_fisher`` averages ``J_iᵀ J_i`` over ``k`` inputs, with Jacobians from ``torch.func``:
reverse mode (a chunk's VJP vmapped over the m one-hot cotangents, as ``jacrev`` does) when the
encoder narrows (m < d), forward mode (JVPs vmapped over the d one-hot tangents, as ``jacfwd``)
otherwise, in chunks so that at most ``chunk × m × d`` Jacobian entries exist at once.

Precision (never overstate privacy): the Jacobians are taken of a float64 copy of the encoder,
whatever its own dtype (float32, bfloat16, float16 weights are exact in float64), and ``J_iᵀ J_i`` is
accumulated in float64. The round-off cut of the spectrum (eigenvalues ``≤ d·eps·λ_max`` count as
zero) therefore uses float64's eps: with the encoder's float32 eps the cut is ``d·1.2e-7·λ_max``,
about the paper's τ = 1e-4 at d = 784, and real directions would be called null — the bound would
then exceed what an attacker reaches. Cutting too little only lowers a bound. When the copy cannot
be made (``precision="native"``, or a module that refuses float64) the Jacobians are taken in the
encoder's dtype, still accumulated in float64, and the cut stays at float64's eps: their round-off
noise then shows up as small positive eigenvalues, which again only lowers the bounds.

Sampling error: ``E[G]`` estimated from ``k`` inputs is kept as ``groups`` partial means (contiguous
blocks of the k inputs) so that the bounds can carry its Monte-Carlo error (a grouped jackknife,
:mod:`reconguard.bounds.sampling`). The eigendecomposition is computed once, then reused by every
bound for every σ and τ.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import nn

from ..checks import as_samples, check_positive_int, check_tau
from ..errors import ParameterError, ShapeError, UnknownOptionError
from ..encoders.noisy import split_noise
from ..results import Result
from .jacobians import (ACCUMULATION_EPS, DEFAULT_GROUPS, _batched_jacobian, _default_chunk, default_heldout,  # noqa: F401
                        group_edges, jacobian_ready, loop_jacobian, select_inputs)
from .differentiable import path_error
from .saturation import Sampled, dense_saturation
from ..progress import progress as progress_bar


METHODS = ("auto", "jacrev", "jacfwd", "loop")
PRECISIONS = ("float64", "native")


@dataclass(frozen=True)
class FisherEstimate(Result, Sampled):
    """``E[G]`` (``d×d`` float64) with its eigendecomposition (eigenvalues ascending, clipped at 0)."""

    matrix: torch.Tensor
    eigenvalues: torch.Tensor
    eigenvectors: torch.Tensor
    d: int
    m: int
    k: int  # inputs averaged over (0 when exact)
    method: str
    exact: bool
    eps: float = ACCUMULATION_EPS  # precision E[G] was accumulated in (the round-off cut uses it)
    jacobian_dtype: str = "float64"  # dtype the Jacobians were taken in
    group_means: torch.Tensor | None = None  # B×d×d partial means over contiguous blocks of the k inputs
    group_sizes: tuple = ()
    heldout_means: torch.Tensor | None = None  # H×d×d partial means of J_iᵀJ_i over held-out inputs (saturation)
    heldout_sizes: tuple = ()
    path_error: float | None = None  # reconguard.bounds.differentiable (None: exact, given, or one input)
    _cache: dict = field(default_factory=dict, compare=False, repr=False)
    _skip_in_dict = ("matrix", "eigenvectors", "group_means", "heldout_means")

    _saturation_of = staticmethod(lambda f: dense_saturation(f))

    @property
    def groups(self) -> int:
        """Number of partial means kept (0 when exact or not kept): the jackknife's groups."""
        return 0 if self.group_means is None else int(self.group_means.shape[0])

    def leave_out(self, b: int) -> "FisherEstimate":
        """The estimate without group ``b`` (for the grouped jackknife), cached."""
        key = ("loo", b)
        if key not in self._cache:
            sizes = torch.tensor(self.group_sizes, dtype=torch.float64)
            keep = torch.arange(self.groups) != b
            G = (self.group_means[keep] * sizes[keep, None, None]).sum(0) / sizes[keep].sum()
            G = (G + G.T) / 2
            evals, evecs = torch.linalg.eigh(G)
            self._cache[key] = FisherEstimate(G, evals.clamp_min(0.0), evecs, self.d, self.m,
                                              self.k - int(self.group_sizes[b]), self.method, False, self.eps,
                                              self.jacobian_dtype)
        return self._cache[key]

    @property
    def trace(self) -> float:
        return float(self.eigenvalues.sum())

    @property
    def lambda_max(self) -> float:
        return float(self.eigenvalues[-1])

    def to_dict(self):
        out = super().to_dict()
        out.update(trace=self.trace, lambda_max=self.lambda_max, saturation=self.saturation.to_dict())
        return out

    @classmethod
    def from_matrix(cls, G, *, m: int | None = None, k: int = 0, method: str = "given", exact: bool = True):
        """Wrap a user-supplied ``E[G]`` (symmetric PSD ``d×d``)."""
        from ..checks import as_square_matrix

        raw = torch.as_tensor(getattr(G, "matrix", G))
        # the cut uses float64's eps whatever dtype the matrix came in: a float32 matrix's round-off then
        # counts as range (a lower bound), never as null (a higher one)
        G = as_square_matrix(raw, int(raw.shape[0]), "E[G]")
        evals, evecs = torch.linalg.eigh(G)
        return cls(G, evals.clamp_min(0.0), evecs, G.shape[0], m if m is not None else G.shape[0], k, method, exact,
                   ACCUMULATION_EPS, str(raw.dtype).replace("torch.", ""))


def as_fisher(fisher) -> FisherEstimate:
    """Accept a ``FisherEstimate`` or a plain ``d×d`` matrix (API contract)."""
    return fisher if isinstance(fisher, FisherEstimate) else FisherEstimate.from_matrix(fisher)


def accumulate_jtj(enc: nn.Module, x: torch.Tensor, m: int, d: int, method: str, edges: list[int],
                   chunk_size: int | None, label: str, progress: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """``(Σ_i J_iᵀJ_i, per-block sums)`` in float64 over the inputs ``x``, blocks given by ``edges`` (a chunk never
    straddles two blocks)."""
    G = torch.zeros(d, d, dtype=torch.float64, device=x.device)
    parts = torch.zeros(len(edges) - 1, d, d, dtype=torch.float64)
    size = 1 if method == "loop" else (chunk_size or _default_chunk(x.shape[0], m, d, x.device))
    chunks = [(g, x[a:min(a + size, edges[g + 1])]) for g in range(len(edges) - 1)
              for a in range(edges[g], edges[g + 1], size)]
    for gi, xc in progress_bar(chunks, label, enabled=progress):
        if method == "loop":
            J = loop_jacobian(enc, xc, m, d)
        else:  # (under no_grad, torch.func runs about 2x slower here)
            J = _batched_jacobian(enc, xc, m, d, forward=(method == "jacfwd"))
        J = J.detach().to(torch.float64).reshape(-1, d)
        JtJ = J.T @ J
        G += JtJ
        parts[gi] += JtJ.cpu()
    return G.cpu(), parts


def _block_means(parts: torch.Tensor, edges: list[int]) -> tuple[torch.Tensor, tuple]:
    sizes = tuple(edges[b + 1] - edges[b] for b in range(len(edges) - 1))
    return parts / torch.tensor(sizes, dtype=torch.float64)[:, None, None], sizes


def estimate_fisher(
    encoder: nn.Module,
    data=None,
    k: int = 256,
    *,
    method: str = "auto",
    chunk_size: int | None = None,
    generator: torch.Generator | None = None,
    seed: int | None = 0,
    device: torch.device | str | None = None,
    exact: bool = True,
    progress: bool = False,
    precision: str = "float64",
    groups: int = DEFAULT_GROUPS,
    heldout: int | None = None,
    representation: str = "auto",
):
    """Estimate ``E[G] = mean_i J_iᵀ J_i`` of the deterministic part of ``encoder`` over ``k`` inputs.

    ``data``: ``N×d`` or ``N×C×H×W`` samples from the prior (or a dataset with ``.images``);
    ``k`` of them are drawn without replacement (``generator`` / ``seed``). A ``Noisy`` encoder
    is unwrapped. When the encoder has a closed form (``exact_fisher()``, e.g. ``LinearEncoder``:
    ``WᵀW``) and ``exact`` is true, that is used and ``data`` is optional. ``method``:
    ``auto`` (jacrev if m < d else jacfwd), ``jacrev``, ``jacfwd``, or ``loop`` (one
    ``torch.autograd.functional.jacobian`` per input: the slow reference). BatchNorm and
    dropout run in eval mode; the module's mode is restored after.

    ``precision``: ``float64`` (default) differentiates a float64 copy of the encoder; ``native`` its own
    dtype (faster for big float32 nets; the bounds stay valid, only lower). ``groups``: partial means
    kept for the sampling error's jackknife (0 keeps none; at most ``k``). ``heldout``: inputs drawn beside
    the k (default :func:`default_heldout`, fewer when the data runs out) whose Jacobians are kept as block
    means for the saturation check (:mod:`reconguard.bounds.saturation`): what share of their energy lies
    outside the sampled range, and the valid bound when it is not zero. The estimate also carries the path check of
    :mod:`reconguard.bounds.differentiable` on the sampled inputs: an encoder autograd does not describe (sign,
    rounding, integer outputs, detach) gets every bound 0.

    ``representation``: ``auto`` (default) returns this dense ``FisherEstimate`` where the d×d matrices fit in half
    the memory, else a :class:`~reconguard.bounds.lowrank.LowRankFisher` (the Gram of the k·m Jacobian rows);
    ``dense`` / ``lowrank`` force one. Every bound function takes either.
    """
    if method not in METHODS:
        raise UnknownOptionError(f"method must be one of {METHODS}, got {method!r}.")
    if precision not in PRECISIONS:
        raise UnknownOptionError(f"precision must be one of {PRECISIONS}, got {precision!r}.")
    enc, _ = split_noise(encoder)
    if exact and hasattr(enc, "exact_fisher"):
        G = enc.exact_fisher().to(torch.float64)
        if data is not None:
            x = as_samples(data)
            if x[0].numel() != G.shape[0]:
                raise ShapeError(f"data has dimension {x[0].numel()} but the encoder expects d={G.shape[0]}.")
        evals, evecs = torch.linalg.eigh(G)
        return FisherEstimate(G, evals.clamp_min(0.0), evecs, G.shape[0], int(getattr(enc, "out_dim", G.shape[0])),
                              0, "exact", True, ACCUMULATION_EPS, "float64")
    if data is None:
        raise ParameterError("estimate_fisher needs data (samples from the prior) for an encoder "
                             "without a closed-form Fisher matrix.")
    k = check_positive_int(k, "k")
    x = as_samples(data)
    if representation != "dense":
        from .representation import choose_path

        with jacobian_ready(enc, x[:1], "native", device) as (_, _, d, m):  # m from one forward pass
            pass
        if choose_path(d, k * m, representation) == "lowrank":
            from .lowrank import estimate_fisher_lowrank

            return estimate_fisher_lowrank(encoder, x, k, chunk_size=chunk_size, groups=groups, seed=seed,
                                           device=device, progress=progress, heldout=heldout)
    if generator is None and seed is not None:
        generator = torch.Generator().manual_seed(int(seed))
    x, x_held = select_inputs(x, k, heldout, generator)
    h = int(x_held.shape[0])
    with jacobian_ready(enc, torch.cat([x, x_held]), precision, device) as (enc, xs, d, m):
        if method == "auto":
            method = "jacrev" if m < d else "jacfwd"
        groups, edges = group_edges(k, groups)
        G, parts = accumulate_jtj(enc, xs[:k], m, d, method, edges, chunk_size, f"E[G] ({method}, k={k})", progress)
        held, held_sizes = None, ()
        if h:
            _, h_edges = group_edges(h, min(h, DEFAULT_GROUPS))
            _, h_parts = accumulate_jtj(enc, xs[k:], m, d, method, h_edges, chunk_size,
                                        f"held-out Jacobians (h={h})", progress)
            held, held_sizes = _block_means(h_parts, h_edges)
        dtype = str(xs.dtype).replace("torch.", "")
        path = path_error(enc, xs, forward=(method == "jacfwd"))
    G = G / k
    G = (G + G.T) / 2
    evals, evecs = torch.linalg.eigh(G)
    means, sizes = _block_means(parts, edges) if groups else (None, ())
    return FisherEstimate(G, evals.clamp_min(0.0), evecs, d, m, k, method, False, ACCUMULATION_EPS, dtype,
                          means, sizes, held, held_sizes, path)


@dataclass(frozen=True)
class RangeNullSplit(Result):
    """Orthonormal bases of the range and null spaces of ``E[G]`` (section 5.3).

    Null = eigenvalues ``≤ threshold = max(tau, d·eps)·λ_max``, eps the machine epsilon of float64,
    the precision E[G] is accumulated in (never the encoder's dtype: see the module docstring); the
    ``d·eps`` floor makes ``tau = 0`` mean the numerically exact null space (eigenvalues that are zero
    up to round-off). ``cut`` names the rule that set the threshold.
    """

    tau: float
    threshold: float
    rank: int
    d: int
    range_basis: torch.Tensor
    null_basis: torch.Tensor
    cut: str = ""
    _skip_in_dict = ("range_basis", "null_basis")

    @property
    def P_r(self) -> torch.Tensor:
        return self.range_basis @ self.range_basis.T

    @property
    def P_n(self) -> torch.Tensor:
        return self.null_basis @ self.null_basis.T


def split_range_null(fisher, tau: float = 0.0) -> RangeNullSplit:
    """Split ``R^d`` into range(E[G]) and null(E[G]) at ``tau·λ_max`` (``0 <= tau < 1``; 0, the default, is the
    null space up to float64 round-off — any larger τ is the paper's heuristic)."""
    fisher = as_fisher(fisher)
    tau = check_tau(tau)
    floor = fisher.d * fisher.eps
    threshold = max(tau, floor) * fisher.lambda_max
    null = fisher.eigenvalues <= threshold
    if fisher.lambda_max == 0:
        null[:] = True
    cut = (f"tau·λ_max (tau={tau:g})" if tau > floor
           else f"round-off: d·eps(float64)·λ_max = {floor:.3g}·λ_max")
    return RangeNullSplit(tau, threshold, int((~null).sum()), fisher.d,
                          fisher.eigenvectors[:, ~null], fisher.eigenvectors[:, null], cut)

