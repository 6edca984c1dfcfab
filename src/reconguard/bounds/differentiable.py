"""Whether autograd's Jacobian of an encoder is its derivative: the path check every sampled E[G] carries.

Every bound here is built from ``J(x)`` as autograd returns it. For an encoder that is continuous along a segment and
differentiable almost everywhere on it (smooth networks, ReLU networks), the fundamental theorem of calculus gives,
for two inputs a, b and v = b − a,

    f(b) − f(a) = ∫₀¹ J(a + t·v) v dt  ≈  (1/P) Σ_{p=0..P} w_p J(a + (p/P)·v) v     (trapezoid rule, w = ½, 1, …, 1, ½).

An encoder whose output jumps (sign, rounding, thresholds, argmax, integer outputs) or whose forward hides part of its
computation from autograd (``detach``, ``no_grad``, NumPy) breaks the identity: autograd reports no change (J = 0, or
too little) where the output moves. E[G] then misses that information and every Fisher bound on it — Corollaries 1–3,
Theorems 1–2, the tangent plane — would read as more privacy than there is (a sign encoder's E[G] is 0, so its bound
is the prior's ceiling: "the embedding reveals nothing").

``path_error`` is ``‖Δf − ∫‖ / max(‖Δf‖, ‖∫‖)`` summed over ``pairs`` pairs of the sample's inputs, from one batched
J·v at ``P + 1`` points per pair (the primal outputs at the end points give Δf) in the mode the estimate used (a JVP,
or the VJP of the VJP), P = 16, refined to 64 when the error is above ``PATH_TOL / 2``. Measured: smooth encoders
(SplitCNN, the GELU split ResNet-18 at 32×32 and 3×224×224; P = 8) ≤ 5·10⁻⁴; ReLU networks, the trapezoid's error at
the kinks, about 1/P: an MLP 0.06–0.07 at P = 8, a ReLU ResNet-18 at 32×32 0.10–0.16 at 8, 0.07 at 16, 0.03 at 32,
0.02 at 64; sign, rounding to 1/255, argmax, a detached input: 1.00 at every P; half the outputs detached: 0.81. Above
``PATH_TOL`` the estimate's saturation status is ``"not differentiable"`` and every bound on it is 0
(:mod:`reconguard.bounds.saturation`). The tolerance is what the check can tell, not a proof: an encoder that hides
less than about 4 % of its output's change from autograd (error < 0.2) passes. Two inputs that the encoder maps to one
output in every pair (a constant encoder, or a coarse quantiser flat between them) show no error: there J = 0 is right.
"""

from __future__ import annotations

import torch
from torch import nn

PATH_TOL = 0.2       # path_error above this: autograd's Jacobian does not describe the encoder
PATH_PAIRS = 2       # pairs of the sample's inputs checked
PATH_POINTS = (16, 64)  # trapezoid intervals per pair: the first, and the refinement when the first is above PATH_TOL/2
PATH_PRODUCTS = PATH_PAIRS * (PATH_POINTS[0] + 1)  # J·v products of one check before any refinement (34)
PATH_CHUNK = 8       # points per J·v pass (a reverse pass over 34 points of 3×224×224 in float64 peaked at 4.6 GB)


def path_error(enc: nn.Module, x: torch.Tensor, pairs: int = PATH_PAIRS, points=PATH_POINTS,
               forward: bool = False) -> float | None:
    """``‖Δf − ∫₀¹ J v dt‖ / max(‖Δf‖, ‖∫‖)`` over up to ``pairs`` disjoint pairs of the inputs ``x`` (module
    docstring), with ``points`` trapezoid intervals — an int, or increasing counts tried in turn while the error is
    above ``PATH_TOL / 2`` (a ReLU network's kinks cost the trapezoid about 1/P: a ReLU ResNet-18 gives 0.07 at 16,
    0.02 at 64); None with fewer than two inputs. ``enc`` and ``x`` as
    :func:`~reconguard.bounds.jacobians.jacobian_ready` yields them (eval mode, parameters frozen). ``forward``: the
    mode the estimator took its Jacobians in (jacfwd), else reverse — the check must see the Jacobian E[G] was built
    from: ``torch.no_grad`` inside a forward hides it from reverse mode only."""
    error = None
    for p in (points,) if isinstance(points, int) else points:
        error = _path_error(enc, x, pairs, p, forward)
        if error is None or error <= PATH_TOL / 2:
            break
    return error


def _path_error(enc: nn.Module, x: torch.Tensor, pairs: int, points: int, forward: bool) -> float | None:
    pairs = min(pairs, x.shape[0] // 2)
    if pairs < 1:
        return None
    a, b = x[:pairs], x[pairs:2 * pairs]
    v = b - a
    t = torch.arange(points + 1, dtype=x.dtype, device=x.device) / points
    grid = t.reshape(1, -1, *([1] * (x.dim() - 1)))
    pts = (a[:, None] + grid * v[:, None]).reshape(-1, *x.shape[1:])
    tangents = v[:, None].expand(-1, points + 1, *x.shape[1:]).reshape(-1, *x.shape[1:])
    parts = [_values_and_slopes(enc, pts[i:i + PATH_CHUNK], tangents[i:i + PATH_CHUNK], forward)
             for i in range(0, len(pts), PATH_CHUNK)]
    f = torch.cat([p[0] for p in parts]).reshape(pairs, points + 1, -1)
    jv = torch.cat([p[1] for p in parts]).reshape(pairs, points + 1, -1)
    w = torch.ones(points + 1, dtype=x.dtype, device=x.device)
    w[0] = w[-1] = 0.5
    integral = (w[None, :, None] * jv).sum(1) / points
    change = f[:, -1] - f[:, 0]
    norm = max(float((change ** 2).sum()), float((integral ** 2).sum()))
    return 0.0 if norm == 0.0 else float(((change - integral) ** 2).sum() / norm) ** 0.5


def _values_and_slopes(enc: nn.Module, pts: torch.Tensor, tangents: torch.Tensor,
                       forward: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """``(f(pts), J(pts)·tangents)``, flat per point, in the estimator's mode: forward mode (one JVP), or reverse mode
    (J·v as the VJP of the VJP, linear in the cotangent); where torch.func cannot trace the forward, each point's
    Jacobian by reverse mode (what ``estimate_fisher(method="loop")`` and the Jacobians' own fallback take)."""
    def flat(z: torch.Tensor) -> torch.Tensor:
        return enc(z).reshape(z.shape[0], -1).to(z.dtype)

    try:
        if forward:
            f, jv = torch.func.jvp(flat, (pts,), (tangents,))
        else:
            f, vjp = torch.func.vjp(flat, pts)
            _, vjp_of_vjp = torch.func.vjp(lambda u: vjp(u)[0], torch.zeros_like(f))
            (jv,) = vjp_of_vjp(tangents)
        return f.detach(), jv.detach().reshape(f.shape)
    except Exception:  # noqa: BLE001 — an op without that mode (a custom autograd.Function, NumPy, TorchScript, …)
        from .jacobians import loop_jacobian

        with torch.no_grad():
            f = flat(pts)
        J = loop_jacobian(flat, pts, f.shape[1], pts[0].numel())
        return f, (J @ tangents.reshape(len(pts), -1, 1)).squeeze(-1)
