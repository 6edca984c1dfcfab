"""Each pixel's global sign after Carlini's attack: ``|x̃_t| = |a_t X|`` is unchanged when pixel p of *every*
image is negated (column p of X), so no fit to the encryptions can tell u_p from −u_p. On digits the attacker's
prior mean (a dark background) decides it pixel by pixel (``carlini_model.orient``); on natural images the mean
is near 0 after normalisation and that choice is a coin flip per pixel (measured: 16×16 grey crops of
scikit-image's photographs, inside k = 3, n = 20, T = 25 — identified 0–20 %, below a random guess's SSIM).

What does tell them apart is the images' structure: neighbouring pixels of natural images move together across
images (cosine 0.97 between neighbours' columns of the true X). The signs s ∈ {±1}^d are chosen to make the
recovered images likely under a Gaussian model of the attacker's own images (mean μ, Ledoit–Wolf precision P):

    minimise  Σ_i (s∘x_i − μ)ᵀ P (s∘x_i − μ) + Σ_p P_pp Σ_i e(s_p x_ip)²  =  sᵀ Q s − 2 hᵀ s + const,
    Q = P ∘ XᵀX,   h = (P μ) ∘ Σ_i x_i − diag(P) ∘ (E⁺ − E⁻) / 4,

where e(v) is v's distance outside the pixel range and E^± = Σ_i e(±x_ip)² (the range term, priced at the pixel's
own prior precision). The images lie in the range, and the range is asymmetric about the mean (a dark background
at 0 is −0.80 normalised, white +2.07 on Fashion-MNIST): a pixel the attack fitted above |lo| in some images
is costly to negate, whatever the Gaussian prior (whose tails cross the range) prefers. Without it, measured on a
collapsed label-free Fashion-MNIST challenge (cross k = 6, n = 100, T = 50; the state before this step saved), the
negated tree's start descended to a lower Gaussian energy with 48 % of the pixels inverted: identified 0.38, plain
0.12; with it 0.80 / 0.70 (the attack's own signs: 0.82 / 0.72), and the good run's state is unchanged (0.80).

It is minimised by coordinate descent (s_p ← −sign(Σ_{q≠p} Q_pq s_q − h_p), sweeps until none changes) from three starts — the
signs as they are, and the maximum spanning tree of the pixel graph (4-neighbours in each channel, the same pixel
across channels, weighted by |cos(x_·p, x_·q)|) propagated from one pixel, and its negative — keeping the lowest.
The tree is what finds the right basin on natural images; the prior term (μ, P's off-diagonal) fixes the pixels
where the tree's links are weak. The one global sign left (all pixels at once) is the one whose images stay inside
the pixel range [0, 1] (normalised: asymmetric about the mean), the mean term on a tie. Above ``max_dim`` pixels
(P is d×d) only the tree's signs are used. Cost O(d²·n + d³) (the precision) once, after the attack.

The same prior then repairs single entries (``prior_moves``): a pixel of one image whose sign the fit left wrong —
colour speckle on natural images, where one encryption's error barely tells x from −x under the public part's
noise — is moved to −x (or black, or white) where the posterior energy (the fit's error over its mean square plus
the prior's energy) falls. ``settle`` runs the steps after the attack, with cross mode's refit to the amplitudes'
mean between them (``carlini_model.mean_link``). Measured in ``benchmarks/carlini.py`` (before and after, paired).
"""

from __future__ import annotations

import numpy as np
import torch

from ...errors import ParameterError

MAX_DIM = 4096


def neighbour_edges(shape: tuple) -> tuple[np.ndarray, np.ndarray]:
    """Index pairs (p, q) of a C×H×W image's pixels flattened C-major: right and down neighbours in each channel,
    and the same location in consecutive channels."""
    c, h, w = shape
    idx = np.arange(c * h * w).reshape(c, h, w)
    pairs = [(idx[:, :, :-1], idx[:, :, 1:]), (idx[:, :-1, :], idx[:, 1:, :]), (idx[:-1], idx[1:])]
    p = np.concatenate([a.reshape(-1) for a, _ in pairs])
    q = np.concatenate([b.reshape(-1) for _, b in pairs])
    return p, q


def tree_signs(X: np.ndarray, shape: tuple) -> np.ndarray:
    """Signs from the maximum spanning tree of the pixel graph weighted by |cos| of the pixels' columns: each pixel
    takes its tree parent's sign times the sign of their cosine (the root, the strongest pixel, keeps +1)."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import breadth_first_order, minimum_spanning_tree

    d = X.shape[1]
    U = X / np.maximum(np.linalg.norm(X, axis=0, keepdims=True), 1e-12)
    p, q = neighbour_edges(shape)
    cos = np.einsum("ip,ip->p", U[:, p], U[:, q])
    # a minimum tree of 2 − |cos| is a maximum tree of |cos| (and no edge weighs 0, which sparse graphs drop);
    # the pixel grid is connected, so one tree spans every pixel
    tree = minimum_spanning_tree(coo_matrix((2.0 - np.abs(cos), (p, q)), shape=(d, d)).tocsr())
    order, parent = breadth_first_order(tree, int(np.linalg.norm(X, axis=0).argmax()), directed=False,
                                        return_predecessors=True)
    child = order[1:]
    step = np.where(np.einsum("ip,ip->p", U[:, child], U[:, parent[child]]) < 0, -1.0, 1.0)
    s = np.ones(d)
    for v, sign in zip(child, step):  # breadth-first: a parent's sign is set before its children's
        s[v] = s[parent[v]] * sign
    return s


def descend_signs(s: np.ndarray, Q: np.ndarray, h: np.ndarray, sweeps: int = 50) -> np.ndarray:
    """Coordinate descent on sᵀQs − 2hᵀs over s ∈ {±1}^d until a sweep changes nothing."""
    s = s.copy()
    diag = np.diag(Q).copy()
    field = Q @ s - diag * s  # Σ_{q≠p} Q_pq s_q, updated as signs change
    for _ in range(sweeps):
        changed = False
        for p in range(len(s)):
            new = -1.0 if field[p] - h[p] > 0 else 1.0
            if new != s[p]:
                field += Q[:, p] * (new - s[p])
                field[p] -= diag[p] * (new - s[p])
                s[p] = new
                changed = True
        if not changed:
            break
    return s


def column_excess(x: np.ndarray, box) -> np.ndarray:
    """Per pixel (column of ``x``), Σ_i of the squared distance of x_ip outside [lo_p, hi_p]."""
    lo, hi = (np.broadcast_to(np.asarray(b, dtype=np.float64), x.shape[1:]) for b in box)
    return (np.clip(lo - x, 0, None) ** 2 + np.clip(x - hi, 0, None) ** 2).sum(0)


def orient_by_prior(X: torch.Tensor, own: torch.Tensor, shape: tuple, box, max_dim: int = MAX_DIM,
                    prior=None) -> torch.Tensor:
    """``X`` (n×d, normalised units) with each pixel's global sign chosen as in the module docstring; ``own``: the
    attacker's images in the same units (m×d); ``box``: (lo, hi), the pixel range in those units; ``prior``: their
    ``own_prior`` when already computed."""
    x = X.detach().to(torch.float64).numpy()
    tree = tree_signs(x, shape)
    if x.shape[1] > max_dim:
        s = tree
        mu = own.detach().to(torch.float64).mean(0).numpy()
    else:
        mu, P = (v.numpy() for v in (prior if prior is not None else own_prior(own)))
        # the range term: Σ_i P_pp·excess(s_p x_ip)², linear in s_p (excess of the column as it is, and negated)
        kept, negated = column_excess(x, box), column_excess(-x, box)
        Q, h = P * (x.T @ x), (P @ mu) * x.sum(0) - np.diag(P) * (kept - negated) / 4
        best = None
        for start in (np.ones(x.shape[1]), tree, -tree):
            s = descend_signs(start, Q, h)
            value = float(s @ Q @ s - 2 * h @ s)
            if best is None or value < best[0] - 1e-9:
                best = (value, s)
        s = best[1]
    # the one global sign: the images that stay inside the pixel range (natural images' normalised mean is near 0,
    # so the prior's mean term barely tells x from −x; a range asymmetric about the mean does); on a tie, the mean
    over, under = column_excess(x * s, box).sum(), column_excess(-x * s, box).sum()
    if under < over or (under == over and (x * s).sum(0) @ mu < 0):
        s = -s
    return X * torch.as_tensor(s, dtype=X.dtype)


SIGN_FLOOR = 0.2  # sign_information below it: the prior mean leaves most pixels' signs to a coin flip


def sign_information(own: torch.Tensor) -> float:
    """How much the attacker's prior mean tells each pixel's sign: the median over pixels of |μ_p| / σ_p, the mean
    and spread of pixel p over the attacker's own images in the scheme's normalised units (m×d). Measured with
    ``InstaHide.channel_stats``: scikit-learn digits 1.04, Fashion-MNIST 0.53 (its dark background), RGB crops of
    scikit-image's photographs 0.025 (natural images: the channel's mean sits mid-spread at every pixel). Below
    :data:`SIGN_FLOOR` cross mode has recovered little (README, "Where it stands": 32×32 crops, cross k = 6)."""
    z = own.detach().to(torch.float64).reshape(len(own), -1)
    if len(z) < 2:
        raise ParameterError(f"the attacker's own images give no spread: {len(z)} image(s); give at least two.")
    return float((z.mean(0).abs() / z.std(0).clamp_min(1e-12)).median())


def own_prior(own: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(μ, P)``: the mean and Ledoit–Wolf precision of the attacker's own images (m×d, normalised units; shrunk, so
    positive definite). ``np.linalg.inv``: sklearn's ``precision_`` is a pseudo-inverse by eigendecomposition, 14.7 s
    vs 2.6 s at 3×32×32."""
    from sklearn.covariance import LedoitWolf

    z = own.detach().to(torch.float64).numpy()
    cov = LedoitWolf(store_precision=False).fit(z).covariance_
    return torch.as_tensor(z.mean(0)), torch.as_tensor(np.linalg.inv(cov))


def match_contrast(X: torch.Tensor, own: torch.Tensor, box) -> torch.Tensor:
    """Each image's deviations from its own mean scaled by s = (mean per-image standard deviation of the attacker's own
    images ``own``) / (that of ``X``), kept in ``box``, when s > 1: the recovered set is given its kind's contrast back.
    Cross mode's images come out with less contrast than their truth — a slot fitted to a few wrong encryptions (a
    blend's) averages towards the mean, and a least-squares fit under the public part's noise shrinks — which moves
    them nearer to dimmer images of other people: plain nearest neighbour misses them. Measured (cross k = 6,
    n = 100, T = 50, labels; recoveries saved before this step, scored again): Fashion-MNIST s = 1.10, identified by
    plain NN 0.77 → 0.79, 1-to-1 SSIM 0.773 → 0.782; an earlier version's recovery s = 1.28, 0.71 → 0.85, SSIM
    0.776 → 0.816 (identified by standardised NN unchanged: it ignores contrast). One number for the whole set, so
    the images' relative contrast is the fit's; s ≤ 1 (a set already as contrasted as its kind, or noisier) is left as
    the fit made it."""
    spread = float(own.to(X.dtype).std(1).mean()) / max(float(X.std(1).mean()), 1e-12)
    if spread <= 1.0:
        return X
    centre = X.mean(1, keepdim=True)
    return torch.maximum(torch.minimum(centre + spread * (X - centre), box[1]), box[0])


def settle(X, A, B, noise, box, own, shape: tuple, orient: bool = True, moves: int = 8, seed: int = 0,
           refit: int = 0, max_dim: int = MAX_DIM, fitted_signs: bool = True):
    """``(X, X before the refit and the moves)`` after the attack: each pixel's global sign by ``orient_by_prior``
    (``orient``) — with ``fitted_signs`` (X's signs came from a fit to the amplitudes, which cross mode's public mean
    can inform) kept only where the encryptions fit it no more than 1 % worse than X's; then (cross mode) ``refit`` Adam steps
    on the amplitudes' error under ``carlini_model.expected``, the unbiased model of E|x̃| (the search's RMS model
    shrinks contrast); then ``moves`` rounds of ``prior_moves`` under the same model (d ≤ ``max_dim``: the precision
    is d×d); cross mode (``refit``) ends with ``match_contrast``. ``fitted_signs=False`` (``carlini_sync``: X's one
    global sign is its pixel tree's root's, +1, no fit's): the prior decides alone, so the result does not depend on
    that arbitrary sign. With the check there, a fresh crops challenge (cross k = 6, seed 12) whose X came out globally
    negated and whose public mean was modelled under the wrong convention kept X's sign on 63 % of the pixels —
    identified 0.07; the same recovery with the prior's orientation throughout: 0.89 before the last steps (README)."""
    from .carlini_model import descend, expected, predict

    prior = own_prior(own) if (orient or moves) and X.shape[1] <= max_dim else None
    if orient:
        signed = orient_by_prior(X, own, shape, box, max_dim, prior)
        if fitted_signs:
            err, err_signed = (((predict(A, Z, *noise) - B) ** 2).sum(0) for Z in (X, signed))
            signed = torch.where(err_signed > err * 1.01, X, signed)
        X = signed
    before = X
    if refit and noise[0] is not None:
        X = descend(X, B, refit, 0.02, lambda: A, noise, box, model=expected)[1]
    if moves and prior is not None:
        X = prior_moves(X, A, B, noise, box, prior, moves, seed)
    if refit and noise[0] is not None:
        X = match_contrast(X, own, box)
    return X, before


def prior_moves(X, A, B, noise, box, prior, rounds: int = 8, seed: int = 0) -> torch.Tensor:
    """Per image and pixel, the move among {−x, the box's low end, its high end} that most lowers the posterior energy
    ``Σ_t (E|a_t X + w| − b_t)² / (2σ²) + ½ Σ_i (x_i − μ)ᵀ P (x_i − μ)`` (``carlini_model.mean_link``; σ² the mean
    squared residual, ``prior`` = (μ, P) from ``own_prior``), taken where it lowers it, ``rounds`` times, on a random
    half of the pixels per round: ``carlini_model.flip_signs`` with the prior's term. Single pixels whose sign the fit
    leaves wrong (colour speckle on natural images) are pulled back by their neighbours."""
    from .carlini_model import flip_signs

    return flip_signs(X, A, B, noise, box, rounds, prior, seed)
