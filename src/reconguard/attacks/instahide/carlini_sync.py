"""Cross mode with labels on images whose prior mean tells no pixel's sign (natural images): a clustered start and a
sign-synchronising X-step (issue 31; README, "A sign-synchronising X-step, and the start it needs").

With the public part's mean ≈ 0 and natural images' normalised pixel mean ≈ 0 (``carlini_signs.sign_information``
below ``SIGN_FLOOR``), the amplitude descent of ``carlini_model`` recovers nothing of RGB 32×32 photograph crops even
*given the true rows* (median correlation 0.13): nothing tells one image's sign at a pixel from another's. Given
rows A (N×n) this X-step solves that part in closed form:

1. *energies* (:func:`energies`): per pixel, the least-squares e ≥ 0 of |x̃_t|² − (1 − s_t)²(μ² + v) ≈ Σ_i a_ti² e_i,
   then u_i = √e_i (the public part: mean (1 − s_t) μ, variance (1 − s_t)² v — ``carlini_model.public_noise``);
2. *relative signs* (:func:`sync_signs`): each encryption with two private members i, j votes, per pixel, for "same
   sign" by how much better √((a_i u_i + a_j u_j)² + v_t) fits |x̃_t| than √((a_i u_i − a_j u_j)² + v_t); per pixel
   the n images' signs are the leading eigenvector of the votes' n×n matrix;
3. *pixels' signs* (``carlini_signs.tree_signs``): each pixel's sign relative to its neighbours by the maximum
   spanning tree of the pixel graph; the one sign left is ``carlini_signs.settle``'s.

At the true rows: median correlation 0.93 with the truth (seed 0). The start (:func:`kmeans_start`): per class, the
class's two-class encryptions' energies |x̃|², whitened by all encryptions' covariance (eigenvalues floored at
``eps`` of the largest: the public part's smooth texture no longer outweighs the rest), clustered by a weighted
spherical k-means (weights the labels' mass⁴; ``restarts`` k-means++ runs) into as many clusters as the class has
images, the runs combined by their co-association (:func:`consensus`) — about 0.8 of the members of coefficient
≥ 0.2 placed (the best single run: 0.7). The rounds
(:func:`sync_search`): the X-step from the rows, then each encryption's nearest option (one image of each labelled
class, the labels' masses) under the model √((a X + (1 − s) μ)² + (1 − s)² v) *with its clustered member pinned*
where that class's mass is ≥ ``pin`` — the clustering places those members better than the fit to a half-recovered
X does (pinned: 0.43 of the images above correlation 0.8 after 10 rounds; the fit's free choice: 0.24–0.31).
Encryptions of one class only (both private images in it) are left out of the X-step: their rows are not
clustered. ``benchmarks/carlini_sync.py`` measures the steps one by one.

*Several starts* (:func:`combine`): the start and rounds run from ``SYNC_STARTS`` k-means seeds; each start's X is
put on the first's slots and pixel signs (:func:`align`), and each image is the mean of its two most correlated
recoveries. The images a start leaves stuck are mostly the same in every start (those of little energy in the
encryptions: on one captured challenge 0.52 of the images above correlation 0.8 in the best start per image against
0.48–0.52 in each), so picking the best start per image gains little; the agreeing pair's mean halves the variance
of the noise of the images in between (README, "Several starts, joined").
"""

from __future__ import annotations

import torch

from ...errors import ParameterError, UnknownOptionError
from ...progress import progress
from .measure import standardise

PRESENT = 1e-4  # a class's label mass above it: the class is in the mix (as ``class_members``'s tolerance)
SYNC_STARTS = 5  # k-means seeds whose recoveries :func:`combine` joins


def check_sign_sync(setting):
    """``CarliniAttack(sign_sync=…)``: "auto", True or False."""
    if not any(setting is v for v in (True, False)) and setting != "auto":
        raise UnknownOptionError(f"sign_sync must be 'auto', True or False, got {setting!r}.")
    return setting


def wants_sync(setting, mode: str, labels, own: torch.Tensor) -> bool:
    """Whether :func:`sync_search` replaces the attack's alternation: cross mode with labels, and ``setting`` True, or
    "auto" with the attacker's own normalised images' ``sign_information`` below ``SIGN_FLOOR`` (natural images)."""
    from .carlini_signs import SIGN_FLOOR, sign_information

    if mode != "cross" or labels is None:
        if setting is True:
            raise ParameterError("sign_sync=True needs cross mode and the encryptions' soft labels (it clusters each "
                                 "class's encryptions); leave it 'auto' or False here.")
        return False
    two = float(((torch.as_tensor(labels) > PRESENT).sum(1) == 2).double().mean())  # the rows it clusters and votes on
    if setting is True and two == 0:
        raise ParameterError("sign_sync=True needs encryptions whose labels name two classes (its votes come from "
                             "those); here every one names one: leave it 'auto' or False.")
    return setting is True or (setting == "auto" and two >= 0.5 and sign_information(own) < SIGN_FLOOR)


def energies(A: torch.Tensor, B: torch.Tensor, pub_mean: torch.Tensor, pub_var: torch.Tensor) -> torch.Tensor:
    """u (n×d ≥ 0): per pixel, the least-squares e in |x̃|² − μ_t² − v_t ≈ (A∘A) e, then √e (μ_t, v_t: each
    encryption's public mean and variance, N×d or broadcastable)."""
    A2 = A ** 2
    rhs = B ** 2 - pub_mean ** 2 - pub_var
    e = torch.linalg.solve(A2.T @ A2 + 1e-6 * torch.eye(A.shape[1], dtype=A.dtype), A2.T @ rhs)
    return e.clamp_min(0).sqrt()


def sync_signs(A: torch.Tensor, B: torch.Tensor, u: torch.Tensor, pub_var: torch.Tensor, block: int = 256) -> torch.Tensor:
    """Signs (n×d, ±1) of every image at every pixel up to one sign per pixel: the leading eigenvector of the
    encryptions' pair votes (module docstring, step 2), ``block`` pixels at a time. Rows with other than two
    members do not vote."""
    n, d = u.shape
    rows = torch.nonzero((A > 0).sum(1) == 2).squeeze(1)
    members = torch.nonzero(A[rows] > 0)[:, 1].reshape(-1, 2)
    I, J = members[:, 0], members[:, 1]
    li, lj = A[rows, I][:, None], A[rows, J][:, None]
    pub_var = pub_var.expand(len(A), d)
    out = torch.empty(n, d, dtype=torch.float64)
    for p0 in range(0, d, block):
        sl = slice(p0, min(p0 + block, d))
        b, v, ui, uj = B[rows, sl], pub_var[rows, sl], u[I, sl], u[J, sl]
        vote = (b - ((li * ui - lj * uj) ** 2 + v).sqrt()) ** 2 - (b - ((li * ui + lj * uj) ** 2 + v).sqrt()) ** 2
        V = torch.zeros(sl.stop - p0, n, n, dtype=torch.float64)
        pix = torch.arange(sl.stop - p0)
        V.index_put_((pix.repeat(len(rows)), I.repeat_interleave(len(pix)), J.repeat_interleave(len(pix))),
                     vote.reshape(-1).double(), accumulate=True)
        lead = torch.linalg.eigh(V + V.transpose(1, 2)).eigenvectors[:, :, -1]
        out[:, sl] = torch.where(lead.T < 0, -1.0, 1.0)
    return out


def sync_step(A: torch.Tensor, B: torch.Tensor, pub_mean: torch.Tensor, pub_var: torch.Tensor, shape: tuple) -> torch.Tensor:
    """X (n×d, normalised units) from rows A: energies, pair-vote signs, the tree's pixel signs."""
    from .carlini_signs import tree_signs

    X = sync_signs(A, B, u := energies(A, B, pub_mean, pub_var), pub_var) * u
    return X * torch.as_tensor(tree_signs(X.numpy(), shape))


def whiten(F: torch.Tensor, eps: float) -> torch.Tensor:
    """F centred and multiplied by C^(−1/2), C the rows' covariance with its eigenvalues floored at eps·max."""
    F = F - F.mean(0)
    w, V = torch.linalg.eigh(F.T @ F / len(F))
    return F @ (V * (w.clamp_min(0) + eps * w.max()).rsqrt()) @ V.T


def unit_rows(g: torch.Tensor) -> torch.Tensor:
    """g's rows centred over the rows, then scaled to unit norm."""
    g = g - g.mean(0)
    return g / g.norm(dim=1, keepdim=True).clamp_min(1e-12)


def kmeans_runs(f: torch.Tensor, weight: torch.Tensor, K: int, seeds: torch.Tensor, restarts: int,
                generator: torch.Generator, iterations: int = 50) -> list[tuple[float, torch.Tensor]]:
    """``restarts`` weighted spherical k-means runs on the unit rows f (centroid = normalised weighted sum), each
    seeded by k-means++ among the rows ``seeds``: (Σ weight · cosine to its centroid, cluster labels) per run."""
    runs = []
    for _ in range(restarts):
        pick = [int(seeds[torch.randint(len(seeds), (1,), generator=generator)])]
        for _ in range(K - 1):
            near = (f[seeds] @ f[pick].T).max(1).values
            pick.append(int(seeds[torch.multinomial((1 - near).clamp_min(1e-9) ** 2, 1, generator=generator)]))
        M = f[pick]
        for _ in range(iterations):
            labels = (f @ M.T).argmax(1)
            new = torch.zeros_like(M).index_add_(0, labels, f * weight[:, None])
            new = new / new.norm(dim=1, keepdim=True).clamp_min(1e-12)
            if torch.allclose(new, M):
                break
            M = new
        runs.append((float((weight * (f @ M.T).max(1).values).sum()), labels))
    return runs


def kmeans(f: torch.Tensor, weight: torch.Tensor, K: int, seeds: torch.Tensor, restarts: int,
           generator: torch.Generator, iterations: int = 50) -> torch.Tensor:
    """Cluster labels of the unit rows f: of :func:`kmeans_runs`' runs the one of largest score."""
    return max(kmeans_runs(f, weight, K, seeds, restarts, generator, iterations), key=lambda run: run[0])[1]


def consensus(f: torch.Tensor, weight: torch.Tensor, K: int, seeds: torch.Tensor, restarts: int,
              generator: torch.Generator) -> torch.Tensor:
    """Cluster labels agreed by all of :func:`kmeans_runs`' runs (evidence accumulation): H (rows × runs·K) marks
    each row's cluster in each run, so (H Hᵀ)_st counts the runs that put rows s and t together; the rows of
    H's K leading left singular vectors (the co-association matrix's leading eigenvectors) are clustered by
    :func:`kmeans`. On crops cross k = 6 (two captured challenges) the rows of mass ≥ 0.2 placed rise from 0.77 /
    0.69 (the best single run of 30) to 0.84 / 0.81 at the same cost (README, "A consensus start")."""
    runs = kmeans_runs(f, weight, K, seeds, restarts, generator)
    H = torch.zeros(len(f), len(runs) * K, dtype=torch.float64)
    for r, (_, labels) in enumerate(runs):
        H[torch.arange(len(f)), r * K + labels] = 1.0
    U = torch.linalg.svd(H, full_matrices=False).U[:, :K]
    return kmeans(unit_rows(U), weight, K, seeds, restarts, generator)


def kmeans_start(B: torch.Tensor, labels: torch.Tensor, classes, generator: torch.Generator, power: float = 2.0,
                 eps: float = 3e-4, restarts: int = 30, seed_mass: float = 0.35) -> torch.Tensor:
    """Rows A (N×n, float64) from the clustering of the module docstring; one-class rows: two random members of their
    class with half its mass each. ``labels``: N×C, each class's private mass."""
    cls = torch.as_tensor(classes)
    F, A = whiten(B.double() ** power, eps), torch.zeros(len(B), len(cls), dtype=torch.float64)
    present = labels > PRESENT
    two = present.sum(1) == 2
    for c in cls.unique().tolist():
        slots = torch.nonzero(cls == c).squeeze(1)
        rows = torch.nonzero(two & present[:, c]).squeeze(1)
        mass = labels[rows, c]
        if len(slots) == 1 or len(rows) < len(slots):
            A[rows[:, None], slots[None]] = (mass / len(slots))[:, None]
        else:
            seeds = torch.nonzero(mass >= seed_mass).squeeze(1)
            seeds = seeds if len(seeds) >= len(slots) else torch.arange(len(rows))
            A[rows, slots[consensus(unit_rows(F[rows]), mass ** 4, len(slots), seeds, restarts, generator)]] = mass
        for t in torch.nonzero(~two & present[:, c]).squeeze(1).tolist():
            pick = slots[torch.randperm(len(slots), generator=generator)[:2]]
            A[t, pick] = labels[t, c] / len(pick)
    return A


def pinned_rows(X, A, start, B, labels, classes, pub_mean, pub_var, pin: float) -> torch.Tensor:
    """Each two-class encryption's option (one image of each labelled class, the labels' masses) nearest |x̃_t| under
    √((a X + μ_t)² + v_t), its class-c member kept as in ``start`` where c's mass is ≥ ``pin``; other rows kept."""
    cls = torch.as_tensor(classes)
    out = A.clone()
    slots = {c: torch.nonzero(cls == c).squeeze(1) for c in cls.unique().tolist()}
    pub_var = pub_var.expand(len(A), -1)
    for t in range(len(A)):
        cs = torch.nonzero(labels[t] > PRESENT).squeeze(1).tolist()
        if len(cs) != 2:
            continue
        S = [slots[c][start[t, slots[c]] > 0] if labels[t, c] >= pin else slots[c] for c in cs]
        S = [s if len(s) else slots[c] for s, c in zip(S, cs)]
        P = (labels[t, cs[0]] * X[S[0]])[:, None] + (labels[t, cs[1]] * X[S[1]])[None] + pub_mean[t]
        k = int(((B[t] - (P ** 2 + pub_var[t]).sqrt()) ** 2).sum(-1).argmin())
        out[t] = 0
        out[t, S[0][k // len(S[1])]], out[t, S[1][k % len(S[1])]] = labels[t, cs[0]], labels[t, cs[1]]
    return out


def sync_run(B, labels, classes, pub_mean, pub_var, shape: tuple, rounds: int, pin: float,
             seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """One start's ``(A, X)``: :func:`kmeans_start` (k-means seed ``seed``), then ``rounds`` of :func:`sync_step` on
    the two-class encryptions and :func:`pinned_rows`, stopped early when no row changes."""
    two = (labels > PRESENT).sum(1) == 2
    start = A = kmeans_start(B, labels, classes, torch.Generator().manual_seed(seed))
    X = None
    for _ in range(rounds):  # the starts' progress is sync_search's
        X = sync_step(A[two], B[two], pub_mean[two], pub_var[two], shape)  # pub_*: N×d
        new = pinned_rows(X, A, start, B, labels, classes, pub_mean, pub_var, pin)
        if torch.equal(new, A):
            break
        A = new
    return A, X


def align(X0: torch.Tensor, X: torch.Tensor, classes) -> torch.Tensor:
    """Another start's X put on ``X0``'s slots and signs: within each class its rows matched to X0's by the largest
    total correlation of |x| (slots of a class are exchangeable; scipy's ``linear_sum_assignment``), then each pixel's
    column negated where its inner product with X0's column is negative (the sync leaves one sign per pixel)."""
    from scipy.optimize import linear_sum_assignment

    cls, out = torch.as_tensor(classes), X.clone()
    for c in cls.unique().tolist():
        slots = torch.nonzero(cls == c).squeeze(1)
        C = standardise(X0[slots].abs()) @ standardise(X[slots].abs()).T
        r, k = linear_sum_assignment(-C.numpy())
        out[slots[torch.as_tensor(r)]] = X[slots[torch.as_tensor(k)]]
    return out * torch.where((X0 * out).sum(0) < 0, -1.0, 1.0).to(X.dtype)


def combine(runs: list, classes) -> torch.Tensor:
    """One X from several starts' (each put on the first's slots by :func:`align`): each image the mean of its two
    most correlated recoveries. An image the sync recovers is recovered alike from different starts, a stuck one is
    not, and the mean of an agreeing pair halves the variance of their independent noise. On crops cross k = 6 (two
    captured challenges, n = 100, T = 50), five starts against one: identified 0.83 / 0.78 → 0.86 / 0.83, plain
    0.81 / 0.69 → 0.85 / 0.79 (the mean of all five: 0.85 / 0.81, plain 0.83 / 0.76)."""
    if len(runs) == 1:
        return runs[0]
    Xs = torch.stack([runs[0]] + [align(runs[0], X, classes) for X in runs[1:]])  # R×n×d
    U = standardise(Xs.reshape(-1, Xs.shape[2])).reshape(Xs.shape)
    R = len(runs)
    pairs = [(a, b) for a in range(R) for b in range(a + 1, R)]
    agree = torch.stack([(U[a] * U[b]).sum(1) for a, b in pairs])  # pairs×n
    best = torch.as_tensor(pairs)[agree.argmax(0)]  # n×2
    rows = torch.arange(Xs.shape[1])
    return (Xs[best[:, 0], rows] + Xs[best[:, 1], rows]) / 2


def sync_search(B: torch.Tensor, labels: torch.Tensor, classes, noise: tuple, shape: tuple, rounds: int = 10,
                pin: float = 0.2, seed: int = 0, starts: int = SYNC_STARTS,
                show: bool = False) -> tuple[torch.Tensor, torch.Tensor, list]:
    """``(A, X, residuals)``: :func:`sync_run` from ``starts`` k-means seeds (``seed``, ``seed`` + 1, …), their X
    joined by :func:`combine`; A is the first start's (X's slots are its), ``residuals`` each start's Σ (|a X + μ| model −
    |x̃|)². ``noise``: (μ, v) per unit of public mass (``carlini_model.public_noise``; v per pixel, or one row per
    encryption)."""
    from .carlini_model import predict

    if not isinstance(starts, int) or isinstance(starts, bool) or starts < 1:
        raise ParameterError(f"the sign-synchronising path needs starts ≥ 1 (an integer), got {starts!r}.")
    B, labels = B.double(), labels.double()
    mu, var = noise
    rest = 1.0 - labels.sum(1, keepdim=True)
    pub_mean, pub_var = rest * mu, rest ** 2 * var
    runs = [sync_run(B, labels, classes, pub_mean, pub_var, shape, rounds, pin, seed + r)
            for r in progress(range(starts), "sign-synchronising starts", enabled=show)]
    residuals = [float(((predict(A, X, mu, var) - B) ** 2).sum()) for A, X in runs]
    return runs[0][0], combine([X for _, X in runs], classes), residuals
