"""The pieces of Carlini et al.'s attack that do not depend on how the assignment is searched
(``carlini.py``): the two X-steps, the model of |x̃| and the error.

* ``lift``: X from ``|A X| = B`` by least squares on the lifted U_p = u_p u_pᵀ (n(n+1)/2 unknowns per
  pixel, shared design): exact when A is, N ≥ n(n+1)/2 and every pair of images co-occurs. Cost
  O(N·n⁴ + d·n³) time, O(N·n²) memory: for n ≤ 40.
* ``public_noise`` / ``predict``: the model of ``|x̃_t|`` with the public part p_t (mass r_t = 1 − Σ a_t)
  as noise of per-pixel mean μ and variance v: ``√((a_t X + r_t μ)² + r_t² v)`` (inside mode: ``|a_t X|``).
* ``descend``: Adam on X (and other parameters) on that model's squared error, X kept in the box
  [(0 − mean)/std, (1 − mean)/std] that images in [0, 1] occupy once normalised. With every encryption's
  mixing row given it needs no pair to co-occur: the *direct* X-step, O(N·n·d) per step (the dense
  A X product; A has m ≤ k non-zeros per row) and O(N·d) memory.
* ``noise_metric``: the error an assignment minimises (``carlini_metric.Metric``) — squared error with the public
  part's few dominant (smooth, large-scale) directions discounted, estimated from simulated mixes.
* ``split_overloaded`` / ``alternate``: one start's alternating minimisation, with k-means' split move.

The candidate mixing rows an assignment chooses among, and the search over them, are in ``carlini_options``.
"""

from __future__ import annotations

import torch

from .carlini_metric import PLAIN, Metric
from .carlini_sparse import mix


def pair_features(A: torch.Tensor) -> torch.Tensor:
    """Rows ``a`` → the coefficients of ``aᵀ U a`` on the upper triangle of a symmetric U."""
    n = A.shape[1]
    iu = torch.triu_indices(n, n)
    return A[:, iu[0]] * A[:, iu[1]] * torch.where(iu[0] == iu[1], 1.0, 2.0).to(A.dtype)


def lift(A: torch.Tensor, B: torch.Tensor, prior_mean: torch.Tensor, W: torch.Tensor | None = None) -> torch.Tensor:
    """X (n×d) from ``|A X| = B`` by least squares on the lifted U_p = u_p u_pᵀ; signs from ``prior_mean``.
    ``W``: the rows' pair features (expected ones, under a soft assignment), instead of those of A."""
    n = A.shape[1]
    iu = torch.triu_indices(n, n)
    W = pair_features(A) if W is None else W
    # LAPACK's least squares differs between calls in the last bits (blocked, threaded); the assignment that
    # follows is discrete and chaotic, so those bits changed which local minimum a run ends in. Rounding the
    # solution to float32's precision makes a seed give the same recovery every time.
    # (A nearly rank-deficient design, e.g. an image no encryption's row uses, can give huge or non-finite
    # entries: those are clipped so that the eigendecomposition always runs.)
    V = torch.linalg.lstsq(W, B ** 2).solution.nan_to_num(0.0, 1e30, -1e30).clamp(-1e30, 1e30)
    V = V.to(torch.float32).to(torch.float64)
    U = torch.zeros(B.shape[1], n, n, dtype=A.dtype)
    U[:, iu[0], iu[1]] = V.T
    U[:, iu[1], iu[0]] = V.T
    ev, evec = torch.linalg.eigh(U)
    u = evec[:, :, -1] * ev[:, -1:].clamp_min(0).sqrt()  # d×n
    closer = ((u - prior_mean[:, None]) ** 2).sum(1) <= ((-u - prior_mean[:, None]) ** 2).sum(1)
    return (u * torch.where(closer, 1.0, -1.0).to(u.dtype)[:, None]).T


def public_noise(noise_z: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-pixel mean μ and variance v of the public part per unit of its mass, from ``noise_z``: images like the
    scheme's public pool, normalised as the owner did (flat, float64); v = σ² · 2/(k − 1) (E Σ w_j² = 2/(m + 1)
    for a Dirichlet(1) split of the public mass over m = k − 2 images)."""
    return noise_z.mean(0), noise_z.var(0) * 2.0 / (k - 1)


def scale_noise(B: torch.Tensor, labels: torch.Tensor, own_z: torch.Tensor, noise, low: float = 0.25,
                high: float = 4.0) -> tuple:
    """Cross mode with labels: the noise model (μ, v) with v scaled per encryption, ``(μ, γ_t · v)`` (one row per
    encryption). ``v`` is the public part's variance per unit of mass *on average*; one mix's is not: the Dirichlet
    split of its public mass puts Σ_j w_j² anywhere from 1/(k − 2) to 1 of (1 − s)² (mean 2/(k − 1)), and the public
    images' own contrast varies. Matching energies, ‖x̃_t‖² ≈ ‖s_t x̄ + (1 − s_t) μ‖² + Λ_t tr Σ + γ_t (1 − s_t)² Σ_p v_p
    with x̄, Σ the attacker's own normalised images' mean and covariance and Λ_t = λ_0² + λ_1² (by the labels when
    the two private images' classes differ; 2/3 · s_t² — E[u² + (1 − u)²] for the uniform split u a Dirichlet(1) row
    gives — when they share a class), gives γ_t, clipped to [``low``, ``high``]. Without it an encryption with more
    public energy than v allows is explained by a slot turned into a bright blur, which then represents no image
    (digits, cross k = 6, n = 100, T = 50: six such slots in one recovery, one with γ_t)."""
    mu, var = noise
    s = labels.sum(1)
    lam2 = torch.where((labels > 0).sum(1) == 1, s ** 2 * (2.0 / 3.0), (labels ** 2).sum(1))
    mean = own_z.mean(0)
    spread = float(((own_z - mean) ** 2).sum(1).mean())
    rest = 1.0 - s
    private = ((s[:, None] * mean + rest[:, None] * mu) ** 2).sum(1) + lam2 * spread
    gamma = ((B ** 2).sum(1) - private) / (rest ** 2 * var.sum()).clamp_min(1e-12)
    return mu, gamma.clamp(low, high)[:, None] * var


def noise_rows(noise, rows) -> tuple:
    """The noise model (μ, v) of the encryptions ``rows`` (an index): v's rows where it has one per encryption."""
    mu, var = noise
    return noise if var is None or var.ndim == 1 else (mu, var[rows])


def noise_pixels(noise, pixels) -> tuple:
    """The noise model (μ, v) on ``pixels`` only (an index or slice; v with one value per pixel or one row per
    encryption)."""
    return tuple(None if v is None else v[..., pixels] for v in noise)


def predict(A: torch.Tensor, X: torch.Tensor, mu: torch.Tensor | None, var: torch.Tensor | None) -> torch.Tensor:
    """The model of |x̃|: |A X| inside (``mu`` None); √((A X + (1 − s) μ)² + (1 − s)² v) cross, s = Σ_j A_tj."""
    return link(mix(A, X), A.sum(1, keepdim=True), mu, var)


def expected(A: torch.Tensor, X: torch.Tensor, mu: torch.Tensor | None, var: torch.Tensor | None) -> torch.Tensor:
    """E|x̃| under the noise model (``mean_link``): ``predict``'s unbiased counterpart."""
    return mean_link(mix(A, X), A.sum(1, keepdim=True), mu, var)


def link(U: torch.Tensor, mass: torch.Tensor, mu, var) -> torch.Tensor:
    """``predict`` from the private part U = A X and its mass s (a column)."""
    if mu is None:
        return U.abs()
    rest = 1.0 - mass
    return ((U + rest * mu) ** 2 + rest ** 2 * var + 1e-12).sqrt()  # (+1e-12: a finite gradient at 0)


def mean_link(U: torch.Tensor, mass: torch.Tensor, mu, var) -> torch.Tensor:
    """E|u + w| for the public part w ~ N(0, σ²) (u = U + (1 − s) μ, σ² = (1 − s)² v): the folded normal's mean
    σ√(2/π)·exp(−u²/2σ²) + u·erf(u/σ√2). ``link`` is the RMS √(u² + σ²) ≥ E|u + w| (Jensen): fitted to the amplitudes
    by least squares it shrinks |u| where u is within a few σ (u = σ: by 34 %, 2σ: 12 %), which shows as lost contrast.
    Inside (``mu`` None): |U|."""
    if mu is None:
        return U.abs()
    rest = 1.0 - mass
    u = U + rest * mu
    sigma = (rest ** 2 * var).sqrt().clamp_min(1e-9)
    return sigma * (2 / torch.pi) ** 0.5 * torch.exp(-0.5 * (u / sigma) ** 2) + u * torch.erf(u / (sigma * 2 ** 0.5))


BLOCK = 2 ** 21  # flip_signs' block: 16 MB < glibc's mmap threshold (reconguard.memory); benchmarks/carlini_blocks.py


def flip_signs(X, A, B, noise, box, rounds: int = 3, prior=None, seed: int = 0) -> torch.Tensor:
    """Local search over single pixels: moving one pixel of one image to −x (its sign flipped), to the box's low
    end or to its high end (black or white in [0, 1]) changes the error of only the encryptions that mix that
    image; take each pixel's best such move when it lowers the error, ``rounds`` times. Adam cannot cross the
    barrier between x and −x (a dark background turned grey, one image at a time, is the failure it fixes).
    With ``prior`` = (μ, P) (``carlini_signs.prior_moves``) the moves lower the posterior energy instead — the error
    under ``mean_link`` over its mean square σ², doubled, plus ½ Σ_i (x_i − μ)ᵀ P (x_i − μ) — on a random half of the
    pixels per round (neighbours' moves interact through P, so all at once can overshoot).
    O(nnz(A)·d) per round and candidate (+ O(n·d²) with a prior), ``BLOCK`` values of it at a time (same sums)."""
    model = link if prior is None else mean_link
    t, i = A.nonzero(as_tuple=True)
    a, mass = A[t, i][:, None], A.sum(1, keepdim=True)
    g, chunk = torch.Generator().manual_seed(seed), max(1, BLOCK // max(X.shape[1], 1))
    for _ in range(rounds):
        U = A @ X
        res = (model(U, mass, *noise) - B).pow(2)
        candidates = [torch.maximum(torch.minimum(-X, box[1]), box[0]), box[0].expand_as(X), box[1].expand_as(X)]
        gains = torch.zeros((len(candidates),) + tuple(X.shape), dtype=X.dtype)
        for tc, ic, ac in zip(t.split(chunk), i.split(chunk), a.split(chunk)):
            Ut, Bt, base, mass_t, noise_t = U[tc], B[tc], res[tc], mass[tc], noise_rows(noise, tc)
            for gain, c in zip(gains, candidates):
                gain.index_add_(0, ic, base - (model(Ut + ac * (c[ic] - X[ic]), mass_t, *noise_t) - Bt).pow(2))
        if prior is None:
            best, which = gains.max(0)
            better = best > 1e-9 * float(res.sum(1)[t].sum() / max(len(t), 1))
        else:
            mu, P = (v.to(X.dtype) for v in prior)
            G, s2 = (X - mu) @ P, float(res.mean()) or 1.0
            steps = torch.stack(candidates) - X
            best, which = (gains / (2 * s2) - (steps * G + 0.5 * steps ** 2 * P.diagonal())).max(0)
            better = (best > 0) & (torch.rand(X.shape, generator=g, dtype=X.dtype) < 0.5)
        if not bool(better.any()):
            break
        X = torch.where(better, torch.stack(candidates).gather(0, which[None])[0], X)
    return X


def descend(X, B, steps: int, lr: float, rows, noise=(None, None), box=None, extra=(), weights=None, model=None):
    """Adam on X (and ``extra`` parameters) for ``steps`` steps on ``‖model(A, X, μ, v) − B‖²`` (A = ``rows()``,
    ``noise`` = (μ, v); ``model`` ``predict`` by default, or ``expected``; each row's error times ``weights`` when
    given), X projected on ``box`` = (low, high) per pixel after each step; returns the last rows and X.
    Each step sums the error and its gradient over blocks of pixels of at most ``BLOCK`` values (the error is a sum
    over pixels), then takes one Adam step: the same steps (to the sums' rounding) with every temporary below glibc's
    mmap threshold (``reconguard.memory``) — RGB 32×32 crops, cross mode, N = 2,500: 61 MB arrays built and freed
    at every step otherwise (``benchmarks/carlini_blocks.py``, README)."""
    model = predict if model is None else model
    chunk = max(1, BLOCK // max(B.shape[0], 1))
    blocks = [(cols, B[:, cols].contiguous(), noise_pixels(noise, cols),
               weights if weights is None or weights.shape[-1] == 1 else weights[:, cols])  # per row, or row and pixel
              for cols in (slice(lo, lo + chunk) for lo in range(0, B.shape[1], chunk))]
    X = X.clone().requires_grad_(True)
    opt = torch.optim.Adam([*extra, X], lr=lr)
    A = rows()
    for _ in range(steps):
        opt.zero_grad()
        for cols, Bc, noise_c, w in blocks:
            A = rows()
            err = (model(A, X[:, cols], *noise_c) - Bc).pow(2)
            (err if w is None else err * w).sum().backward()
        opt.step()
        if box is not None:
            with torch.no_grad():
                X.copy_(torch.maximum(torch.minimum(X, box[1]), box[0]))
    return A.detach(), X.detach()


def simulate_mixes(private_z, noise_z, mass, k: int, c2: float, g: torch.Generator, count: int, rows=None):
    """``count`` cross-dataset mixes made of the attacker's own normalised images ``private_z`` (two per mix, private
    mass ``mass`` — one per mix, e.g. the labels' — or uniform on [c2, 1], split u : 1 − u with u on [0.2, 0.8]) and
    normalised public-like images ``noise_z`` (a Dirichlet(1) split of the rest over k − 2): the private parts, the
    public parts and the masses (a column), before the sign mask. ``rows`` (count×k, the scheme's coefficient rows,
    ``sample_coefficients``; the first two private): every coefficient from them instead."""
    if rows is not None:
        rows = torch.as_tensor(rows, dtype=torch.float64)
        s = rows[:, :2].sum(1, keepdim=True)
        pick = torch.randint(len(private_z), (count, 2), generator=g)
        private = rows[:, :1] * private_z[pick[:, 0]] + rows[:, 1:2] * private_z[pick[:, 1]]
        w = rows[:, 2:]
    else:
        s = (mass if mass is not None else c2 + (1 - c2) * torch.rand(count, generator=g, dtype=torch.float64))
        s = s.to(torch.float64)[:, None]
        u = 0.2 + 0.6 * torch.rand(count, 1, generator=g, dtype=torch.float64)
        pick = torch.randint(len(private_z), (count, 2), generator=g)
        private = s * u * private_z[pick[:, 0]] + s * (1 - u) * private_z[pick[:, 1]]
        e = -torch.log(torch.rand(count, k - 2, generator=g, dtype=torch.float64).clamp_min(1e-300))
        w = (1 - s) * e / e.sum(1, keepdim=True)
    public = (w[:, :, None] * noise_z[torch.randint(len(noise_z), (count, k - 2), generator=g)]).sum(1)
    return private, public, s


def moment_gap(B, mass, private_z, noise, stats, k: int, c2: float, g: torch.Generator, c1: float | None = None) -> float:
    """How far the per-pixel mean of |x̃|² over the encryptions ``B`` is from that of as many mixes simulated
    (``simulate_mixes``) with the attacker's own normalised images ``private_z`` and ``noise`` images normalised
    with ``stats``: the statistic that tells which normalisation the owner gave its public images. Label-free
    (``mass`` None) the mixes' coefficients are the scheme's own rows (``sample_coefficients`` with caps ``c1`` —
    ``paper_c1(k)`` when None — and ``c2``): private mass ≈ 0.45 on average at k = 6, where a uniform draw on [c2, 1]
    (0.65) over-weights the private part: own-convention crops read right 3 of 8 times with it, 5 of 8 now (the same
    encryptions; README, "Which normalisation, label-free")."""
    from ...encoders.instahide import InstaHide, paper_c1, sample_coefficients

    z = InstaHide.normalize_images(noise, stats).reshape(len(noise), -1).to(torch.float64)
    rows = None if mass is not None else sample_coefficients(B.shape[0], k, paper_c1(k) if c1 is None else c1, c2, generator=g)
    private, public, _ = simulate_mixes(private_z, z, mass, k, c2, g, B.shape[0], rows=rows)
    return float((((private + public) ** 2).mean(0) - (B ** 2).mean(0)).pow(2).mean())


def noise_metric(private_z, noise_z, mass, noise, k: int, c2: float, rank: int, g: torch.Generator,
                 samples: int = 10_000, pixels: torch.Tensor | None = None) -> Metric:
    """The ``Metric`` of the residuals of ``samples`` simulated mixes (``simulate_mixes``, the attacker's own images
    and public-like ones ``noise_z``, private masses drawn from ``mass``) under the model ``link`` with ``noise`` =
    (μ, v): their covariance's top ``rank`` eigenpairs, σ² the mean of the other eigenvalues. ``rank`` 0: the plain
    squared error. ``pixels``: the metric of those pixels only (the search's subset). O(samples·d² + d³) once."""
    if rank <= 0:
        return PLAIN
    mass = None if mass is None else mass[torch.randint(len(mass), (samples,), generator=g)]
    private, public, s = simulate_mixes(private_z, noise_z, mass, k, c2, g, samples)
    R = (private + public).abs() - link(private, s, *noise)
    R = R if pixels is None else R[:, pixels]
    R = R - R.mean(0)
    ev, V = torch.linalg.eigh(R.T @ R / samples)
    rank = min(rank, len(ev) - 1)
    sigma2 = float(ev[:-rank].mean())
    return Metric(V[:, -rank:].contiguous(), ev[-rank:] / (ev[-rank:] + sigma2))


def cross_noise(E, labels, public, noise, own_z, stats, k: int, c2: float, convention: str, rank: int, seed: int,
                normalize="dataset", pixels: torch.Tensor | None = None, c1: float | None = None):
    """Cross mode's public part: the owner's normalisation (``convention``, or ``public_convention`` when "auto";
    ``c1``: the scheme's coefficient cap), the noise model (μ, v) of ``public_noise`` and the assignment's
    ``noise_metric`` (the attacker's own normalised images ``own_z``, masses from the ``labels`` when given — label-free
    uniform on [c2, 1], as the measured rows were; ``pixels``: the metric of those pixels only)."""
    from ...encoders.instahide import InstaHide

    if convention == "auto":
        convention = public_convention(E, labels, public, noise, k, c2, seed, normalize, c1)
    st = stats if convention == "private" else InstaHide(k=k, normalize=normalize).channel_stats(noise)
    noise_z = InstaHide.normalize_images(noise, st).reshape(len(noise), -1).to(torch.float64)
    model = public_noise(noise_z, k)
    metric = noise_metric(own_z, noise_z, None if labels is None else labels.sum(1), model, k, c2, rank,
                          torch.Generator().manual_seed(seed + 1), pixels=pixels)
    return convention, model, metric


def orient(X, A, B, prior, model, box, tol: float = 0.01) -> torch.Tensor:
    """Each pixel's global sign. The model is per pixel, and with a public part of mean ≈ 0 (public images
    normalised with their own statistics) negating a pixel in every image fits almost as well: Adam cannot
    cross that barrier. Per pixel, take −X (clamped to ``box``) where it fits better by more than ``tol``
    (relative), or fits within ``tol`` and is closer to the attacker's ``prior`` mean."""
    flipped = torch.maximum(torch.minimum(-X, box[1]), box[0])
    e, ef = (model(A, X) - B).pow(2).sum(0), (model(A, flipped) - B).pow(2).sum(0)
    closer = ((flipped - prior) ** 2).sum(0) < ((X - prior) ** 2).sum(0)
    flip = (ef < e * (1 - tol)) | ((ef <= e * (1 + tol)) & closer)
    return torch.where(flip, flipped, X)


AMBIGUOUS = 2.0  # public_convention warns when its two moment gaps are closer than this ratio


def public_convention(encryptions, labels, public, noise, k: int, c2: float = 0.3, seed: int = 0,
                      normalize="dataset", c1: float | None = None) -> str:
    """``"private"`` or ``"own"``: how the owner normalised the public images of cross-dataset encryptions — with
    the private set's channel statistics (estimated from the attacker's ``public`` images of the same kind) or
    with the public pool's own (``noise``: images like it) — the one whose ``moment_gap`` is smaller
    (``normalize``: the scheme's statistics rule, ``InstaHide(normalize=…)``; ``c1``: its coefficient cap).

    A warning when the larger gap is within ``AMBIGUOUS`` × the smaller: the moments then hardly tell the two apart.
    Measured (README, "Which normalisation, label-free"; n = 100, T = 50, k = 6, disjoint pools, fixed keys; 32
    challenges — crops 32×32 seeds 10–17, digits and Fashion-MNIST 28×28 seeds 0–3, both conventions — each read
    label-free and with labels): the own convention on digits and Fashion-MNIST read right with no warning (16 of
    16); the other 48 reads are near a coin flip (crops label-free 9 of 16 right; the private convention on digits and
    Fashion-MNIST label-free 3 of 8) — the private statistics leave the encryptor's pool's own brightness in the public
    part, which no mix of the attacker's noise images reproduces — and 45 of them warned; the 3 clear ones were
    right: none of the 19 wrong reads was silent."""
    import warnings
    from ...encoders.instahide import InstaHide

    E = torch.as_tensor(encryptions, dtype=torch.float64)
    B = E.reshape(len(E), -1).abs()
    public, noise = torch.as_tensor(public, dtype=torch.float32), torch.as_tensor(noise, dtype=torch.float32)
    scheme = InstaHide(k=k, normalize=normalize)
    stats = scheme.channel_stats(public)
    own = InstaHide.normalize_images(public, stats).reshape(len(public), -1).to(torch.float64)
    mass = None if labels is None else torch.as_tensor(labels, dtype=torch.float64).sum(1)
    g = torch.Generator().manual_seed(seed)
    gaps = {name: moment_gap(B, mass, own, noise, st, k, c2, g, c1)
            for name, st in (("private", stats), ("own", scheme.channel_stats(noise)))}
    chosen = min(gaps, key=gaps.get)
    if max(gaps.values()) < AMBIGUOUS * gaps[chosen]:
        warnings.warn(f"the encryptions hardly tell how the owner normalised the public images (moment gaps: private "
                      f"{gaps['private']:.3g}, own {gaps['own']:.3g}); assuming {chosen!r}. Pass "
                      "public_normalization='own' or 'private' (CLI: --public-normalization) if you know it.", stacklevel=2)
    return chosen


def split_overloaded(A, X, B, classes, noise, box, low: float = 0.75, high: float = 1.25, iters: int = 10):
    """k-means' split move for the assignment's typical local minimum: one image's slot holds a blend of two images
    of its class (used by far more encryptions than the N·m/n each image has on average) while another slot of that
    class is left with a few ill-fitting ones. For each such pair of a class (use above ``high`` × average, below
    ``low`` ×), the overloaded slot's encryptions each give an estimate of its image — (s·|x̃_t| − the rest of the
    model) / a_tj with s the model's sign per pixel — and a 2-means of those estimates (weights a_tj², started from
    their leading principal direction) re-seeds the two slots. Returns the new X, or None when no class has such a
    pair (label-free every slot's class is −1: any two slots pair). O(Σ use_j · d · iters)."""
    use = (A > 0).sum(0).to(torch.float64)
    mean_use = float(use.mean())
    classes = torch.as_tensor(classes)
    mu, _ = noise
    X, moved = X.clone(), False
    for c in classes.unique().tolist():
        slots = torch.nonzero(classes == c).squeeze(1)
        order = slots[torch.argsort(use[slots])]
        under = [int(i) for i in order if use[i] < low * mean_use]
        over = [int(j) for j in order.flip(0) if use[j] > high * mean_use]
        for i, j in zip(under, over):
            t = torch.nonzero(A[:, j] > 0).squeeze(1)
            a = A[t, j][:, None]
            rest = A[t] @ X - a * X[j]
            if mu is not None:
                rest = rest + (1 - A[t].sum(1, keepdim=True)) * mu
            sign = torch.where(rest + a * X[j] >= 0, 1.0, -1.0).to(B.dtype)
            est = torch.maximum(torch.minimum((sign * B[t] - rest) / a, box[1]), box[0])
            w = (a[:, 0] ** 2) / (a[:, 0] ** 2).sum()
            centred = est - (w[:, None] * est).sum(0)
            v = torch.linalg.svd(centred * w[:, None].sqrt(), full_matrices=False).Vh[0]
            side = (centred @ v) > 0
            for _ in range(iters):
                if bool(side.all()) or not bool(side.any()):
                    break
                c1 = (w[side, None] * est[side]).sum(0) / w[side].sum()
                c0 = (w[~side, None] * est[~side]).sum(0) / w[~side].sum()
                side = ((est - c1) ** 2).sum(1) < ((est - c0) ** 2).sum(1)
            else:
                near = ((c1 - X[j]) ** 2).sum() < ((c0 - X[j]) ** 2).sum()
                X[j], X[i] = (c1, c0) if near else (c0, c1)
                moved = True
    return X if moved else None


def alternate(A, solve, assign, max_iter: int, tol: float, split=None, splits: int = 10, patience: int | None = None,
              rounds: int | None = None):
    """One start's alternating minimisation: X ← ``solve``(A, X), then (A, error) ← ``assign``(X), until the error's
    relative gain is at most ``tol`` (or ``max_iter`` rounds); then, while ``split``(A, X) proposes a re-seeded X
    (``split_overloaded``; at most ``splits`` times), assign from it and alternate again. Returns the lowest-error
    (error, A, X) met at convergence: a split that ends higher is undone. ``patience``: stop splitting after that many
    split phases in a row ended no lower than the best (None: every split; a label-free Fashion-MNIST challenge spent
    415 of its 1,510 CPU-s in five rejected phases after its last kept one). ``rounds``: at most that many
    (solve, assign) rounds over all phases together — the phase under way ends at the last one and is kept if lower —
    so a start's cost is capped whatever the phases need (None: no cap)."""
    X, best, rejected, used = None, None, 0, 0
    for phase in range(splits + 1):
        prev = None
        for _ in range(max_iter):
            X = solve(A, X)
            A, total = assign(X)
            used += 1
            if (prev is not None and prev - total <= tol * max(prev, 1.0)) or used == rounds:
                break
            prev = total
        if best is None or total < best[0]:
            best, rejected = (total, A, X), 0
        else:
            rejected += 1
        stop = split is None or phase == splits or (patience is not None and rejected >= patience) or used == rounds
        X = None if stop else split(A, X)
        if X is None:
            break
        A, _ = assign(X)
    return best
