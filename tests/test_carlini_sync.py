"""``benchmarks/carlini_sync.py`` (issue 31): the sign-synchronising X-step the README's crops-cross analysis rests
on. Given the true rows of a small natural-image cross challenge its images correlate with the truth; its parts are
each needed — without the pair votes (every image's sign +1 before the tree) or from wrong rows it recovers little."""

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))


def _corr(U, V):
    """The median per-image correlation (``carlini_sync._corr``), under the one overall sign no fit can tell."""
    from carlini_sync import _corr as corr

    c = corr(U, V)
    return max(float(c.median()), float((-c).median()))


def test_sign_sync_step_recovers_natural_images_from_their_rows_only_with_its_votes():
    from carlini_basin import _challenge, _corrupt
    from carlini_sync import energies, sync_step

    from reconguard.attacks.instahide.carlini_signs import tree_signs
    from reconguard.encoders import InstaHide

    a = argparse.Namespace(data="photos", size=16, n=20, T=25, k=6, pixels=None, seed=0)
    A, X, B, L, cls, _, noise = _challenge(a, mode="cross")
    z = InstaHide.normalize_images(noise, InstaHide(6).channel_stats(noise)).reshape(len(noise), -1).double()
    m = 1 - L.sum(1, keepdim=True)
    mean, var = m * z.mean(0), m ** 2 * z.var(0) * 2 / 5
    shape = tuple(noise.shape[1:])
    right = _corr(sync_step(A, B, mean, var, shape), X)
    u = energies(A, B, mean, var)
    assert _corr(u, X.abs()) > 0.8                        # the energies alone are right (measured 0.84) …
    unsigned = _corr(u * torch.as_tensor(tree_signs(u.numpy(), shape)), X)
    wrong = _corr(sync_step(_corrupt(A, cls, 0.8, torch.Generator().manual_seed(1)), B, mean, var, shape), X)
    assert right > 0.7, right                            # measured 0.79 (32×32, n = 100: 0.93)
    assert unsigned < right - 0.3, (unsigned, right)     # … but the images need the votes' relative signs (measured 0.08)
    assert wrong < right - 0.3, (wrong, right)           # and the rows (measured 0.03)


def test_consensus_of_the_kmeans_runs_places_more_rows_than_their_best_run():
    """``carlini_sync.consensus`` against ``kmeans`` (the best of the same 30 runs by its score) on 10 clusters of 100
    unit rows, 500 dimensions, noise 6× the centres' scale: a regime where, as on the crops' whitened energies, the
    best-scored run is a poor partition. Measured (seeds 0–2): best run 0.30, 0.34, 0.35 of the rows placed; consensus 0.75,
    0.71, 0.67."""
    from scipy.optimize import linear_sum_assignment

    from reconguard.attacks.instahide.carlini_sync import consensus, kmeans, unit_rows

    def placed(labels, truth):
        C = torch.zeros(10, 10).index_put_((truth, labels), torch.ones(len(truth)), accumulate=True).numpy()
        r, c = linear_sum_assignment(-C)
        return C[r, c].sum() / len(truth)

    for seed in range(3):
        g = torch.Generator().manual_seed(seed)
        truth = torch.arange(10).repeat_interleave(100)
        centres = torch.randn(10, 500, generator=g, dtype=torch.float64)
        f = unit_rows(centres[truth] + 6.0 * torch.randn(1000, 500, generator=g, dtype=torch.float64))
        w, rows = torch.rand(1000, generator=g, dtype=torch.float64) + 0.5, torch.arange(1000)
        best = placed(kmeans(f, w, 10, rows, 30, torch.Generator().manual_seed(seed)), truth)
        agreed = placed(consensus(f, w, 10, rows, 30, torch.Generator().manual_seed(seed)), truth)
        assert agreed > best + 0.2 and agreed > 0.6, (seed, best, agreed)


def test_combine_puts_each_start_on_the_first_ones_slots_and_keeps_the_agreeing_pair_of_each_image():
    """``carlini_sync.align`` / ``combine``: three starts' recoveries of 12 images (classes of 4), noise 0.3; the second
    and third starts' slots permuted within the classes and their pixels' signs flipped at random (what another k-means
    seed and pixel tree give); the second stuck on images 0 and 5 (noise there), the third on image 9. Measured: align
    puts every other image back on its slot (correlation ≥ 0.94) with 0–0.3 % of the pixels' signs wrong; the combined
    images correlate 0.972 (worst) with the truth against the first start's 0.948, the stuck ones 0.98; the mean of
    all three starts leaves those at 0.87–0.89."""
    from reconguard.attacks.instahide.carlini_sync import align, combine
    from reconguard.attacks.instahide.measure import standardise

    g = torch.Generator().manual_seed(0)
    classes = [0] * 4 + [1] * 4 + [2] * 4
    truth = torch.randn(12, 300, generator=g, dtype=torch.float64)
    corr = lambda Z: (standardise(Z) * standardise(truth)).sum(1)  # noqa: E731

    def start(stuck=(), shuffle=True):
        X = truth + 0.3 * torch.randn(12, 300, generator=g, dtype=torch.float64)
        for i in stuck:
            X[i] = torch.randn(300, generator=g, dtype=torch.float64)
        if not shuffle:
            return X
        perm = torch.cat([c * 4 + torch.randperm(4, generator=g) for c in range(3)])
        return X[perm] * torch.where(torch.rand(300, generator=g) < 0.5, -1.0, 1.0).double()

    X0, others = start(shuffle=False), [start((0, 5)), start((9,))]
    for X, stuck in zip(others, ((0, 5), (9,))):
        back, kept = align(X0, X, classes), [i for i in range(12) if i not in stuck]
        assert float(corr(back)[kept].min()) > 0.9           # every image on its slot …
        assert float(((back * truth)[kept].sum(0) < 0).double().mean()) <= 0.01  # … and its pixels' signs
    single = corr(X0)
    joined = corr(combine([X0] + others, classes))
    mean_all = corr(torch.stack([X0] + [align(X0, X, classes) for X in others]).mean(0))
    assert float(joined.min()) > float(single.min()) + 0.01, (joined, single)
    assert float(mean_all[[0, 5, 9]].max()) < float(joined[[0, 5, 9]].min()) - 0.05, (mean_all, joined)
    assert torch.equal(combine([X0], classes), X0)           # one start: its own X
    import pytest

    from reconguard.attacks.instahide.carlini_sync import sync_search
    from reconguard.errors import ParameterError

    for bad in (0, 2.5, True):
        with pytest.raises(ParameterError, match="starts ≥ 1"):
            sync_search(torch.ones(2, 4), torch.ones(2, 2) / 4, [0, 1], (0.0, 1.0), (1, 2, 2), starts=bad)
