"""First attacks on Mixup (issue 5 groundwork): public-image uncovering and shared-image pairs."""

import pytest
import torch

from reconguard import errors
from reconguard.attacks.instahide import PairAttack, PublicUncoverAttack, uncover_public
from reconguard.data import load_digits
from reconguard.encoders import sample_coefficients
from reconguard.metrics import ssim

SMOKE_N, SMOKE_T = 20, 50  # the smoke challenge of issue 15 item 5


@pytest.fixture(scope="module")
def digits28():
    return load_digits(28)


def test_uncover_public_with_a_random_public_pool(digits28):
    """Section 2.2's setting: a private image mixed (no mask) with k − 1 random public images."""
    g = torch.Generator().manual_seed(0)
    pool = torch.rand(2000, 1, 28, 28, generator=g)
    n, k = 200, 4
    priv = digits28.images[:n]
    lam = sample_coefficients(n, k, 0.65, None, g)
    pidx = torch.stack([torch.randperm(len(pool), generator=g)[:k - 1] for _ in range(n)])
    mixed = lam[:, 0, None, None, None] * priv + (lam[:, 1:, None, None, None] * pool[pidx]).sum(1)
    r = PublicUncoverAttack(pool, k).run(mixed, pidx, priv, (1, 28, 28))
    assert r.found_all >= 0.6            # measured 0.71: a constant models the private image
    # the misses are the mixes where a public image has a tiny weight: with every public coefficient
    # ≥ 0.05 (63% of Dirichlet(1) draws here) all k − 1 are found for ≥ 90% (measured 0.953); a weight of
    # 0.02 puts the image's score at the level of the pool's largest spurious correlation with the private digit
    found = (r.indices.sort(1).values == pidx.sort(1).values).all(1)
    clear = lam[:, 1:].min(1).values >= 0.05
    assert float(found[clear].float().mean()) >= 0.9
    # … which the attacker's own digits remove: their principal subspace projected out of the matching
    ref = load_digits(28).images[300:]
    r = PublicUncoverAttack(pool, k, reference=ref).run(mixed, pidx, priv, (1, 28, 28))
    assert r.found_all >= 0.9            # measured 1.00 (rank 80; 0.90 at rank 10, 0.985 at 40)
    assert float((r.ssim >= 0.8).float().mean()) >= 0.9  # measured 0.92
    # a pool of overlapping scikit-image patches (correlated with each other): 0.17 without, 1.00 with
    from reconguard.experiments.instahide import public_pool
    store = public_pool("samples", (1, 28, 28))
    patches = torch.as_tensor(store.get(torch.arange(len(store))))
    pidx = torch.stack([torch.randperm(len(patches), generator=g)[:k - 1] for _ in range(n)])
    mixed = lam[:, 0, None, None, None] * priv + (lam[:, 1:, None, None, None] * patches[pidx]).sum(1)
    r = PublicUncoverAttack(patches, k, reference=ref).run(mixed, pidx, priv, (1, 28, 28))
    assert r.found_all >= 0.9 and float((r.ssim >= 0.8).float().mean()) >= 0.85
    with pytest.raises(errors.ShapeError):
        uncover_public(mixed, torch.rand(10, 1, 8, 8), k)


def test_pairs_sharing_an_image_score_higher(digits28):
    g = torch.Generator().manual_seed(0)
    ids = torch.arange(40).repeat_interleave(5)           # each private image mixed 5 times
    partners = torch.randint(100, len(digits28), (200,), generator=g)
    lam = sample_coefficients(200, 2, 1.0, None, g)
    mixed = lam[:, :1, None, None] * digits28.images[ids] + lam[:, 1:, None, None] * digits28.images[partners]
    share = ids[:, None] == ids[None, :]
    r = PairAttack().run(mixed, share)
    assert r.auc > 0.7                                    # measured 0.78 (the issue asks ≥ 0.95: not met yet)
    whitened = PairAttack(reference=digits28.images[300:]).run(mixed, share)
    assert whitened.auc > r.auc                           # measured 0.85
    # the hard pairs are those where the shared image has a small weight in one of the two mixes: among pairs
    # whose shared image weighs ≥ 0.2 in both (65% of sharing pairs), AUC ≥ 0.95 (measured 0.978)
    from sklearn.metrics import roc_auc_score
    w = lam[:, 0]
    off = ~torch.eye(200, dtype=torch.bool)
    sel = off & (((w[:, None] >= 0.2) & (w[None, :] >= 0.2)) | ~share)
    assert roc_auc_score(share[sel].numpy(), whitened.scores[sel].numpy()) >= 0.95
    # with the InstaHide paper's coefficient cap c1 = 0.65 (every weight in [0.35, 0.65] for k = 2): all pairs
    lam = sample_coefficients(200, 2, 0.65, None, g)
    mixed = lam[:, :1, None, None] * digits28.images[ids] + lam[:, 1:, None, None] * digits28.images[partners]
    assert PairAttack(reference=digits28.images[300:]).run(mixed, share).auc >= 0.95  # measured 0.975–0.98
    with pytest.raises(errors.ParameterError):
        PairAttack().run(mixed, torch.ones(200, 200, dtype=torch.bool))


def test_ssim_identity_and_range(digits28):
    x = digits28.images[:4]
    assert torch.allclose(ssim(x, x), torch.ones(4, dtype=torch.float64))
    assert float(ssim(x, 1 - x).max()) < 0.5


def test_ks_test_and_challenge_roundtrip(tmp_path, digits28):
    from reconguard.attacks.instahide import ks_test, make_challenge, score_challenge
    from reconguard.encoders import InstaHide
    import numpy as np

    x = digits28.images[:60]
    ih = InstaHide(k=4)
    encs = torch.stack([ih.encrypt(x, seed=s).images[:5] for s in range(4)], 1)  # 5 images × 4 encryptions
    r = ks_test(encs)
    assert 0 <= r.statistic_other <= 1 and r.n_images == 5 and r.n_encryptions == 4
    out, truth = tmp_path / "challenge", tmp_path / "truth"
    make_challenge(InstaHide(k=4, normalize="symmetric"), digits28.images, digits28.labels, n=10, T=3,
                   out=out, truth=truth)
    enc = np.load(out / "encryptions.npy")
    assert enc.shape == (30, 1, 28, 28) and np.load(out / "labels.npy").shape == (30, 10)
    assert not (out / "private.npy").exists()  # the truth stays apart
    private = np.load(truth / "private.npy")
    assert np.load(truth / "nonmembers.npy").shape == (len(digits28) - 10, 1, 28, 28)
    perfect = score_challenge(private, truth)
    assert perfect.identified == 1.0 and perfect.matched_ssim == pytest.approx(1.0)
    blank = score_challenge(np.zeros_like(private), truth)
    assert blank.matched_ssim < 0.3 and blank.identified <= 0.1
    # a recovery right up to the global sign |x̃| leaves open (the attacker's prior set it wrong: LFW faces with
    # non-face own images identified 0.175, their negatives 1.00) is flagged, never read as privacy
    assert perfect.identified_inverted <= 0.1 and perfect.inverted == "" and blank.inverted == ""
    negative = score_challenge(1.0 - private, truth)
    assert negative.identified <= 0.1 and negative.identified_inverted == 1.0
    assert "negated" in negative.inverted and "no evidence of privacy" in negative.summary()


def test_averaging_and_demasking(digits28):
    from reconguard.attacks.instahide import AveragingAttack, Demasker
    from reconguard.encoders import InstaHide, Mixup

    priv, T = digits28.images[:30], 30
    groups = torch.arange(30).repeat(T)
    mx = Mixup(4, normalize="symmetric")
    E = torch.cat([mx.encrypt(priv, digits28.labels[:30], seed=t).images for t in range(T)])
    back = lambda v: (v * 0.5 + 0.5).clamp(0, 1).float()  # noqa: E731 — undo the symmetric normalisation
    strong = AveragingAttack(strong=True).run(E, groups, k=4)
    assert float(ssim(back(strong.estimates), priv).mean()) > 0.7          # measured 0.90 (n = 50, T = 50)
    weak = AveragingAttack(strong=False, m=5).run(E, k=4)
    assert weak.estimates.shape == E.shape
    ih = InstaHide(4, normalize="symmetric")
    encs = [ih.encrypt(priv, digits28.labels[:30], seed=100 + t) for t in range(T)]
    E2 = torch.cat([e.images for e in encs])
    Z = torch.cat([ih.decrypt(e) for e in encs])
    M = torch.cat([e.key.mask for e in encs])
    dm = Demasker(1, epochs=3)
    own = Mixup(4, normalize="symmetric").encrypt(digits28.images[500:1300], digits28.labels[500:1300], seed=1).images
    hist = dm.fit(own)
    assert hist[-1] < hist[0]
    d = dm.run(E2, truth=Z, mask=M)
    assert d.sign_accuracy > 0.6 and d.flipped_recovered > 0.5             # measured 0.87 / 0.87
    with pytest.raises(errors.ParameterError):
        AveragingAttack(strong=True).run(E, None)


def _inside_challenge(tmp_path, n, T, seed):
    """A k = 4 inside challenge of n of the first 1,000 shuffled digits; the attacker's digits are the rest."""
    import numpy as np

    from reconguard.attacks.instahide import make_challenge
    from reconguard.encoders import InstaHide

    d = load_digits()
    perm = torch.randperm(len(d), generator=torch.Generator().manual_seed(3))
    private, public = perm[:1000], perm[1000:]
    make_challenge(InstaHide(k=4), d.images[private], d.labels[private], n, T, tmp_path / "c", tmp_path / "t", seed=seed,
                   key_seed=seed)
    return d, public, np.load(tmp_path / "c" / "encryptions.npy"), np.load(tmp_path / "c" / "labels.npy")


def test_carlini_attack_recovers_an_inside_challenge(tmp_path):
    """Item 3: n = 20 private digits, T = 25 encryptions each, k = 4 (inside, soft labels released).
    The attacker's public digits are disjoint from the challenge."""
    from reconguard.attacks.instahide import CarliniAttack, score_challenge
    from reconguard.encoders import InstaHide

    d, public, enc, labels = _inside_challenge(tmp_path, 20, 25, 2)
    r = CarliniAttack(4, 20).run(enc, labels, d.images[public])
    score = score_challenge(r.images, tmp_path / "t")
    assert r.images.shape == (20, 1, 8, 8)
    assert score.identified >= 0.8 and score.identified >= score.baseline.identified + 0.6  # 1.00 (0.95 before sign_prior; lift 0.75)
    assert score.matched_ssim >= 0.9 and score.matched_ssim > score.baseline.matched_ssim + 0.2  # 0.99 vs 0.69
    # with the true mixing matrix the lifting is exact
    from reconguard.attacks.instahide.carlini import lift
    x = InstaHide.normalize_images(d.images[:6], ((0.3,), (0.4,))).reshape(6, -1).double()
    A = torch.rand(40, 6, dtype=torch.float64) * (torch.rand(40, 6) < 0.6)
    prior = x.mean(0)
    assert torch.allclose(lift(A, (A @ x).abs(), prior).abs(), x.abs(), atol=1e-6)
    with pytest.raises(errors.ParameterError, match="sum to 1"):
        CarliniAttack(4, 20).run(enc, labels * 0.5, d.images[public])
    with pytest.raises(errors.ParameterError, match="needs N"):
        CarliniAttack(4, 60, solver="lift").run(enc[:100], labels[:100], d.images[public])
    with pytest.raises(errors.ParameterError, match="max_options"):
        CarliniAttack(4, 20, search="exhaustive", max_options=1000).run(enc, labels, d.images[public])
    with pytest.raises(errors.ParameterError, match="too large even for the local search"):
        CarliniAttack(4, 20, max_options=10).run(enc, labels, d.images[public])


def _pools(images):
    """The encryptor's public pool and the attacker's noise images: crops of disjoint photographs (issue 31: the same
    images on both sides flatter the attack)."""
    from reconguard.data.photos import public_pools

    return (torch.as_tensor(p, dtype=torch.float32) for p in public_pools(1000, images.shape[-1], images.shape[1]))


def _cross_challenge(tmp_path, k, seed):
    import numpy as np

    from reconguard.attacks.instahide import make_challenge
    from reconguard.encoders import InstaHide
    from reconguard.encoders.instahide import paper_c1

    d = load_digits()
    perm = torch.randperm(len(d), generator=torch.Generator().manual_seed(3))
    private, own = perm[:1000], perm[1000:]
    pool, noise = _pools(d.images)
    scheme = InstaHide(k, c1=paper_c1(k), mode="cross", public=pool)
    make_challenge(scheme, d.images[private], d.labels[private], 20, 25, tmp_path / "c", tmp_path / "t", seed=seed,
                   key_seed=seed)
    enc, labels = np.load(tmp_path / "c" / "encryptions.npy"), np.load(tmp_path / "c" / "labels.npy")
    return scheme, enc, labels, d.images[own], noise


def test_carlini_attack_cross_dataset_with_and_without_labels(tmp_path):
    """Cross-dataset InstaHide (2 private + k − 2 unknown public images per mix), n = 20, T = 25: with the
    released labels (k = 6) and without them (k = 4, the coefficients searched on a grid)."""
    from reconguard.attacks.instahide import CarliniAttack, score_challenge
    from reconguard.encoders.instahide import paper_c1

    scheme, enc, labels, own, noise = _cross_challenge(tmp_path / "k6", 6, 0)
    r = CarliniAttack(6, 20, c1=paper_c1(6), mode="cross").run(enc, labels, own, noise_images=noise)
    score = score_challenge(r.images, tmp_path / "k6" / "t")
    assert score.identified >= 0.85 and score.matched_ssim >= 0.85  # measured 0.95 / 0.947 (guess 0.05 / 0.72)
    assert score.identified >= score.baseline.identified + 0.5
    scheme, enc, labels, own, noise = _cross_challenge(tmp_path / "k4", 4, 0)
    r = CarliniAttack(4, 20, c1=paper_c1(4), mode="cross", restarts=3, anneal_restarts=0).run(
        enc, None, own, noise_images=noise)
    score = score_challenge(r.images, tmp_path / "k4" / "t")
    # label-free, the assignment search is chaotic: the same challenge gave 0.65–0.9 identified, 1-to-1 SSIM 0.67–0.79
    # (one pool for the encryptor and the attacker; with disjoint ones, one run: 0.95, SSIM 0.93)
    # over runs (thread-order round-off), so the bar is what every run met, well above the guess (0.05)
    assert score.identified >= 0.5 and score.matched_ssim >= 0.6
    assert score.identified >= score.baseline.identified + 0.4
    assert (r.classes == -1).all() and r.mixing.shape == (500, 20)
    with pytest.raises(errors.ParameterError, match="too large a search"):  # cross: no pair scores of its own
        CarliniAttack(4, 20, mode="cross", max_free_work=1e6).run(enc, None, own, noise_images=noise)
    with pytest.raises(errors.ParameterError, match="mode='cross'"):
        CarliniAttack(4, 20).run(enc, labels, own)  # cross labels do not sum to 1
    with pytest.raises(errors.ShapeError, match="similarity"):
        CarliniAttack(4, 20, mode="cross").run(enc, labels, own, similarity=torch.zeros(3, 3))


def test_similarity_network_and_clustering(tmp_path):
    """Carlini's steps (1)–(2): the clustering recovers the exact membership from exact pair scores; the
    attacker's network, trained on its own encryptions only, scores sharing pairs above chance."""
    import numpy as np
    from scipy.optimize import linear_sum_assignment

    from reconguard.attacks.instahide import SimilarityNetwork, cluster_encryptions

    g = torch.Generator().manual_seed(0)
    M = torch.zeros(300, 15)
    for t in range(300):
        M[t, torch.randperm(15, generator=g)[:2]] = 1
    Mh = cluster_encryptions(((M @ M.T) > 0).double(), 15, 2)
    assert (Mh.sum(1) == 2).all()
    C = (Mh.T @ M).numpy()
    ri, ci = linear_sum_assignment(-C)
    assert C[ri, ci].sum() == M.sum()  # every membership, up to the images' order
    scheme, enc, labels, own, noise = _cross_challenge(tmp_path, 4, 1)
    x = load_digits().images[:20]
    E, Ms = [], []
    for t in range(10):
        e = scheme.encrypt(x, seed=100 + t)
        E.append(e.images)
        Ms.append((e.key.mixing(20) > 0).float())
    M = torch.cat(Ms)
    net = SimilarityNetwork(1, steps=200, seed=0)
    net.fit(scheme, own)
    r = net.run(torch.cat(E), ((M @ M.T) > 0).numpy())
    assert r.scores.shape == (200, 200) and r.auc >= 0.65  # measured 0.701 (seed 1: 0.692; 300 steps: 0.726, 0.696; 0.5 = chance)
    with pytest.raises(errors.ParameterError, match="cannot fill a group"):
        SimilarityNetwork(1, group_n=50).fit(scheme, own[:10])
    with pytest.raises(errors.ShapeError, match="N×N"):
        cluster_encryptions(np.zeros((3, 4)), 2, 1)


def test_similarity_network_embeds_each_training_group_once_per_step(tmp_path):
    """Training costs one embedding pass per step (both sides of a pair come from the same group), not two: the
    pass was run twice per step before, which took 364 of a label-free challenge's ~1,900 CPU-seconds to do 150's work."""
    from reconguard.attacks.instahide import SimilarityNetwork

    scheme, _, _, own, _ = _cross_challenge(tmp_path, 4, 1)
    net = SimilarityNetwork(1, width=4, steps=5, group_n=6, group_T=2, groups=2, seed=0)
    calls = []
    net.net.f.register_forward_hook(lambda module, args, out: calls.append(args[0].shape[0]))
    history = net.fit(scheme, own)
    assert len(history) == 5 and all(h == h for h in history)
    assert calls == [2] + [12] * 5  # the shape check on two encryptions, then one pass of 6 × 2 per step


def test_similarity_network_draws_a_fresh_group_per_step_unless_told_to_cycle(tmp_path):
    """groups=None (the default) encrypts a new group of the attacker's images for every step; groups=G makes G up
    front and cycles them. Both refuse a group count that is not a positive integer."""
    from reconguard.attacks.instahide import SimilarityNetwork

    scheme, _, _, own, _ = _cross_challenge(tmp_path, 4, 1)
    for groups, made in ((None, 4), (2, 2)):
        net = SimilarityNetwork(1, width=4, steps=4, group_n=6, group_T=2, groups=groups, seed=0)
        drawn = []
        original = net._group
        net._group = lambda *args: drawn.append(1) or original(*args)
        net.fit(scheme, own)
        assert len(drawn) == made
    for bad in (0, 1.5):
        with pytest.raises(errors.ParameterError, match="groups"):
            SimilarityNetwork(1, groups=bad)


def test_instahide_attacks_smoke_recipe(tmp_path):
    from reconguard.report import run_to_report, summary_text

    result, out = run_to_report("instahide-attacks", "smoke", tmp_path / "ia", progress=False)
    attacks = [r.attack for r in result.rows]
    assert attacks == ["random guess", "carlini", "carlini-label-free", "averaging", "demask-averaging",
                       "ks"]  # pairs: Mixup only
    free = next(r for r in result.rows if r.attack == "carlini-label-free")
    assert "similarity_auc_same_owner" in free.extra and free.matched_ssim is not None
    demask = next(r for r in result.rows if r.attack == "demask-averaging")
    plain = next(r for r in result.rows if r.attack == "averaging")
    assert demask.matched_ssim > plain.matched_ssim  # the mask defeats plain averaging; demasking undoes it
    guess = result.rows[0]
    assert guess.attack == "random guess" and guess.identified <= 0.25  # n = 8 against 1,789 non-members
    assert (out / "report.html").is_file() and (out / "grid_0.png").is_file()
    assert "carlini" in summary_text(result, out)


def test_attack_suite_attacker_never_sees_the_encryptors_pool(monkeypatch):
    """Issue 31: in cross mode the suite's attacker models the public part with its own images, cut from photographs
    disjoint from the encryptor's pool — the noise images and the scheme it rebuilds (which trains the similarity
    network and the demasker) share no image with the pool the challenge was encrypted with."""
    from reconguard.experiments import instahide_attacks as suite
    from reconguard.experiments import run_recipe

    seen = []
    real = suite._recover

    def spy(p, c, attack):
        seen.append(c)
        return real(p, c, attack)

    monkeypatch.setitem(suite.SUITE, "carlini", spy)
    result = run_recipe("instahide-attacks", "smoke", progress=False, overrides={
        "attacks": ["carlini"], "schemes": [{"scheme": "instahide", "mode": "cross", "k": 4}]})
    assert seen and result.rows[1].identified is not None
    c = seen[0]
    pool, noise, rebuilt = (torch.as_tensor(x).flatten(1) for x in (c.scheme.public, c.noise, c.attacker.public))
    assert c.attacker is not c.scheme and c.attacker.k == c.scheme.k and c.attacker.mode == "cross"
    assert torch.equal(noise, rebuilt)
    assert not bool((torch.cdist(noise, pool).min(1).values < 1e-6).any())  # no image of the pool on the attacker's side


def test_public_search_against_randomly_cropped_patches():
    """Section 5.3: random crops defeat the alignment-based search (cosine at the centre crop); a search over
    crop positions recovers part of it, and the attacker's learned scorer (trained on its own mixes) more."""
    from reconguard.experiments.instahide_attacks import run_public_search

    rows = {r.scorer: r for r in run_public_search(k=6, steps=150, scorers=("cosine", "shift-cosine", "learned"))}
    aligned = {r.scorer: r for r in run_public_search(k=6, source_size=16, scorers=("cosine",))}
    chance = rows["cosine"].chance
    assert rows["cosine"].m == 20 and 0.15 < chance < 0.22           # 1 − C(396, 20)/C(400, 20) ≈ 0.19
    assert aligned["cosine"].hit_rate >= rows["cosine"].hit_rate + 0.1  # measured 0.61 uncropped vs 0.41
    assert rows["shift-cosine"].hit_rate > rows["cosine"].hit_rate   # measured 0.50
    assert rows["learned"].hit_rate > rows["shift-cosine"].hit_rate  # measured 0.575 (300 steps)


def test_instahide_attack_cli_end_to_end(tmp_path, capsys):
    """challenge → attack carlini (cross mode, with labels and label-free) → score; and the public search."""
    from reconguard.cli import main

    c, t = tmp_path / "c", tmp_path / "t"
    assert main(["instahide", "challenge", "--data", "digits", "--n", "10", "--T", "12", "--k", "4", "--mode", "cross",
                 "--out", str(c), "--truth", str(t)]) == 0
    for extra in ([], ["--label-free", "--restarts", "2"]):
        rec = tmp_path / f"rec{len(extra)}.npy"
        assert main(["instahide", "attack", "carlini", "--challenge", str(c), "--k", "4", "--n", "10", "--mode",
                     "cross", "--out", str(rec), "--quiet", *extra]) == 0
        assert main(["instahide", "score", "--recovered", str(rec), "--truth", str(t)]) == 0
    out = capsys.readouterr().out
    assert "label-free" in out and "identified" in out and "baseline" in out
    assert "caveat" not in out  # digits' pixels carry a sign: no natural-image warning (tests/test_carlini_caveat.py)
    assert main(["instahide", "search", "--sources", "100", "--queries", "40", "--scorers", "cosine,shift-cosine",
                 "--quiet"]) == 0
    assert "shift-cosine" in capsys.readouterr().out


def test_challenge_score_cannot_be_gamed_by_random_digits(tmp_path):
    """Random non-member digits submitted as the "recovery" used to score 97–100 % "SSIM ≥ 0.5"; now they
    identify ≤ 10 % of the private images, while the truth plus small noise identifies ≥ 95 %."""
    import numpy as np

    from reconguard.attacks.instahide import make_challenge, score_challenge
    from reconguard.encoders import InstaHide

    d = load_digits()
    make_challenge(InstaHide(k=4), d.images, d.labels, 30, 2, tmp_path / "c", tmp_path / "t", seed=1)
    private = torch.from_numpy(np.load(tmp_path / "t" / "private.npy"))
    others = torch.from_numpy(np.load(tmp_path / "t" / "nonmembers.npy"))
    assert others.shape[0] >= 1000
    g = torch.Generator().manual_seed(0)
    strangers = load_digits(None).images[torch.randperm(len(d), generator=g)[:30]]
    # digits the scorer has never seen (sklearn digits are all in the gallery, so shift them slightly)
    unseen = (strangers + 0.15 * torch.rand(strangers.shape, generator=g)).clamp(0, 1)
    guess = score_challenge(unseen, tmp_path / "t")
    assert guess.identified <= 0.1, guess
    # on 8×8 digits even a 1-to-1 matching of random digits reaches SSIM ≈ 0.7: why the baseline row is there
    assert guess.baseline.identified <= 0.1 and guess.matched_ssim < 0.8
    noisy = (private + 0.05 * torch.randn(private.shape, generator=g)).clamp(0, 1)
    good = score_challenge(noisy, tmp_path / "t")
    assert good.identified >= 0.95 and good.matched_ssim > good.baseline.matched_ssim + 0.1
    with pytest.raises(errors.DataFileNotFoundError, match="nonmembers"):
        (tmp_path / "t" / "nonmembers.npy").unlink()
        score_challenge(noisy, tmp_path / "t")


def test_attack_suite_resumes_finished_schemes(tmp_path):
    """Per-unit resume: a rerun with the units of a finished scheme loads them instead of attacking again."""
    from reconguard.experiments import run_recipe

    units = tmp_path / "units"
    first = run_recipe("instahide-attacks", "smoke", progress=False, units=units,
                       overrides={"attacks": ["averaging", "ks"]})
    assert len(list(units.glob("*.pt"))) == 1
    again = run_recipe("instahide-attacks", "smoke", progress=False, units=units,
                       overrides={"attacks": ["averaging", "ks"]})
    assert [r.to_dict() for r in again.rows] == [r.to_dict() for r in first.rows]


def _both_conventions(tmp_path, n, T, k=6, seed=0):
    """The same private digits encrypted twice, the public patches normalised with the private set's statistics
    and with their own (the reference code's convention)."""
    import numpy as np

    from reconguard.attacks.instahide import make_challenge
    from reconguard.encoders import InstaHide
    from reconguard.encoders.instahide import paper_c1

    d = load_digits()
    perm = torch.randperm(len(d), generator=torch.Generator().manual_seed(3))
    private, own = perm[:1000], perm[1000:]
    pool, noise = _pools(d.images)
    out = {}
    for convention in ("private", "own"):
        scheme = InstaHide(k, c1=paper_c1(k), mode="cross", public=pool, public_normalize=convention)
        folder = tmp_path / convention
        make_challenge(scheme, d.images[private], d.labels[private], n, T, folder / "c", folder / "t", seed=seed,
                       key_seed=seed)
        out[convention] = (np.load(folder / "c" / "encryptions.npy"), np.load(folder / "c" / "labels.npy"), folder / "t")
    return out, d.images[own], noise


def test_carlini_attack_under_either_public_normalisation(tmp_path):
    """Issue 15 item 5: the attack does not assume how the owner normalised the public images — it tells the
    convention from the encryptions (both ways) and recovers the images under the reference convention (public
    patches normalised with their own statistics) within 0.1 of the other convention and well above the random
    guess. Measured on this challenge (disjoint pools): identified 0.95 (own) vs 0.95 (private), 1-to-1 SSIM 0.97 vs
    0.95 (one pool for both sides: 0.95 vs 1.00, SSIM 0.93 vs 1.00), guess
    0.05 / 0.72. On ten challenges of this size (key seeds 0–9) the gaps are 0.05, 0.10, 0.05, 0.05, 0.05, 0.00,
    0.05, 0.00, 0.10, 0.00 (own 0.90–1.00, SSIM 0.89–0.97); n = 30, T = 30 and n = 12, T = 40 (seeds 0–2): gaps
    ≤ 0.10. Before the split move and the six starts at this size the gaps were 0.05–0.15 on seeds 0–5, and before
    the public part's smooth directions were discounted (``noise_rank=0``) 0.10–0.40 on seeds 0–3."""
    from reconguard.attacks.instahide import CarliniAttack, score_challenge
    from reconguard.attacks.instahide.carlini_model import public_convention
    from reconguard.encoders.instahide import paper_c1

    challenges, own, noise = _both_conventions(tmp_path, SMOKE_N, SMOKE_T)
    scores = {}
    for convention, (enc, labels, truth) in challenges.items():
        assert public_convention(enc, labels, own, noise, 6) == convention
        r = CarliniAttack(6, SMOKE_N, c1=paper_c1(6), mode="cross").run(enc, labels, own, noise_images=noise)
        assert r.public_normalization == convention and r.solver == "direct"
        scores[convention] = score_challenge(r.images, truth)
    own_s, private_s = scores["own"], scores["private"]
    # SSIM measured 0.950 with disjoint pools (1.00 with one pool for both sides): the bar leaves round-off room
    assert private_s.identified >= 0.95 and private_s.matched_ssim >= 0.9, private_s.summary()
    assert own_s.identified >= 0.9 and own_s.matched_ssim >= 0.85, own_s.summary()
    assert abs(own_s.identified - private_s.identified) <= 0.1 + 1e-9, (own_s.summary(), private_s.summary())
    assert own_s.identified >= own_s.baseline.identified + 0.5 and own_s.matched_ssim > own_s.baseline.matched_ssim + 0.05


def test_split_move_separates_a_blended_slot():
    """k-means' split move (``split_overloaded``): two digits of one class whose encryptions all went to one slot (the
    slot holds their blend, the class's other slot a few ill-fitting encryptions) are re-seeded as the two digits by
    a 2-means of the per-encryption estimates (the worse slot's relative error to its digit: 1.00 before, 0.06
    after); a balanced assignment proposes no split, and ``alternate`` keeps the lower-error state when a split
    ends higher."""
    from reconguard.attacks.instahide.carlini_model import alternate, split_overloaded

    d = load_digits()
    z = (d.images.reshape(len(d), -1).to(torch.float64) - 0.3) / 0.4
    zeros, rest = torch.nonzero(d.labels == 0).squeeze(1), torch.nonzero(d.labels != 0).squeeze(1)
    truth = torch.cat([z[zeros[:2]], z[rest[:4]]])           # slots 0, 1: class 0; slots 2–5: other classes
    classes = torch.tensor([0, 0, 1, 2, 3, 4])
    g = torch.Generator().manual_seed(0)
    N = 80
    a = 0.3 + 0.4 * torch.rand(N, generator=g, dtype=torch.float64)
    own, partner = (torch.arange(N) >= N // 2).long(), 2 + torch.randint(4, (N,), generator=g)
    A = torch.zeros(N, 6, dtype=torch.float64)
    A[torch.arange(N), own] += a
    A[torch.arange(N), partner] += 1 - a
    B = (A @ truth).abs()
    wrong = A.clone()                                        # every class-0 member on slot 0 but four of slot 1's
    moved = torch.nonzero(own == 1).squeeze(1)[4:]
    wrong[moved, 0], wrong[moved, 1] = wrong[moved, 1], 0.0
    X = truth.clone()
    X[0], X[1] = truth[:2].mean(0), torch.zeros_like(truth[0])
    box = (z.min(0).values, z.max(0).values)

    def pairing(Y):  # the worse of the two slots' relative errors, under the better pairing with the two digits
        err = torch.cdist(Y[:2], truth[:2]) / truth[:2].norm(dim=1)
        return float(torch.minimum(err.diagonal().max(), err.flip(1).diagonal().max()))

    split = split_overloaded(wrong, X, B, classes, (None, None), box)
    assert split is not None
    assert pairing(split) < 0.15 and pairing(X) > 0.9, (pairing(X), pairing(split))
    assert torch.equal(split[2:], X[2:])                                        # the other classes untouched
    assert split_overloaded(A, truth, B, classes, (None, None), box) is None     # balanced: no split
    # a split that ends with a higher error is undone: the first state's (error, A, X) is returned
    errors_seen = iter([1.0, 1.0, 5.0, 5.0, 5.0])  # two rounds, the split's assignment, two rounds
    out = alternate(wrong, lambda A_, X_: X if X_ is None else X_, lambda X_: (wrong, next(errors_seen)), 5, 0.0,
                    split=lambda A_, X_: X + 1.0, splits=1)
    assert out[0] == 1.0 and torch.equal(out[2], X)


@pytest.mark.parametrize("patience, best, phases", [(None, 1.0, 7), (2, 7.0, 6), (1, 8.0, 3)])
def test_split_patience_ends_the_splits_after_rejected_phases_in_a_row(patience, best, phases):
    """``alternate(patience=p)``: the split phases end after p in a row end no lower than the best so far, and the
    best state met is returned. Scripted phase errors 10, 8, 9, 7, 9, 9, 1: every split finds the last one (1.0, seven
    phases); patience 2 stops after the two 9s (7.0, six phases); patience 1 after the first 9 (8.0, three)."""
    from reconguard.attacks.instahide.carlini_model import alternate

    errors, ran = [10.0, 8.0, 9.0, 7.0, 9.0, 9.0, 1.0], set()

    def assign(X_):  # X is the phase's index; the phase converges in two rounds (equal errors, tol 0)
        ran.add(int(X_))
        return torch.zeros(1, 1), errors[int(X_)]

    out = alternate(torch.zeros(1, 1), lambda A_, X_: torch.tensor(0.0) if X_ is None else X_, assign, 5, 0.0,
                    split=lambda A_, X_: X_ + 1.0, splits=6, patience=patience)
    assert out[0] == best and float(out[2]) == errors.index(best)
    assert len(ran) == phases, sorted(ran)


@pytest.mark.parametrize("rounds, best, phases", [(None, 1.0, 7), (13, 1.0, 7), (12, 7.0, 6), (5, 8.0, 3), (1, 10.0, 1)])
def test_max_rounds_caps_the_rounds_of_all_phases_together(rounds, best, phases):
    """``alternate(rounds=r)``: at most r (solve, assign) rounds over all phases; the phase under way ends at the r-th
    and is kept if lower. The same scripted phases as above (errors 10, 8, 9, 7, 9, 9, 1; two rounds each): 13 rounds
    reach the seventh phase's first round (1.0); 12 end after six phases (7.0); 5 stop inside the third (8.0); 1 ends
    the first phase after its first round (10.0)."""
    from reconguard.attacks.instahide.carlini_model import alternate

    errors, ran, solved = [10.0, 8.0, 9.0, 7.0, 9.0, 9.0, 1.0], set(), []

    def solve(A_, X_):
        solved.append(X_)
        return torch.tensor(0.0) if X_ is None else X_

    def assign(X_):
        ran.add(int(X_))
        return torch.zeros(1, 1), errors[int(X_)]

    out = alternate(torch.zeros(1, 1), solve, assign, 5, 0.0, split=lambda A_, X_: X_ + 1.0, splits=6, rounds=rounds)
    assert out[0] == best and float(out[2]) == errors.index(best)
    assert len(ran) == phases and len(solved) == (14 if rounds is None else rounds), (sorted(ran), len(solved))


@pytest.mark.parametrize("u", [0.5, 1.0, 2.0])
def test_mean_link_fits_the_private_part_where_the_rms_model_shrinks_it(u):
    """Closed form: b = |u + w|, w ~ N(0, σ²) (the public part of a cross-mode mix, σ = 1 here); the least-squares u
    under the model ``mean_link`` (the folded normal's mean) is unbiased, under ``link`` (the RMS √(u² + σ²), what
    the search uses) it is shrunk toward 0 — by 34 % at u = σ, 12 % at 2σ (computed from the folded normal's mean)."""
    from reconguard.attacks.instahide.carlini_model import link, mean_link

    b = (u + torch.randn(50_000, 1, generator=torch.Generator().manual_seed(0), dtype=torch.float64)).abs()
    mass, mu, var = torch.zeros(1, 1, dtype=torch.float64), torch.zeros(1, dtype=torch.float64), torch.ones(1, dtype=torch.float64)
    grid = torch.linspace(0, 3, 301, dtype=torch.float64)
    fit = {f.__name__: float(grid[torch.stack([(f(torch.full_like(b, float(v)), mass, mu, var) - b).pow(2).mean()
                                               for v in grid]).argmin()]) for f in (link, mean_link)}
    assert abs(fit["mean_link"] - u) < 0.03, fit
    folded = (2 / torch.pi) ** 0.5 * torch.exp(torch.tensor(-u * u / 2)) + u * torch.erf(torch.tensor(u / 2 ** 0.5))
    assert abs(fit["link"] - float((folded ** 2 - 1).clamp_min(0).sqrt())) < 0.03, fit  # the RMS model's shrunk answer
    assert fit["link"] < u - 0.1, fit
    assert torch.equal(mean_link(b, mass, None, None), b)  # inside mode: |U|


def test_noise_metric_picks_the_true_pair_more_often():
    """The assignment's error under the public part's ``Metric`` (its dominant, smooth directions discounted,
    estimated from mixes the attacker simulates with its own digits) against plain squared error, with the *true*
    images, on a cross k = 6 challenge whose public patches are normalised with their own statistics (seeded keys,
    8×8 digits, n = 30, T = 30): the least-error label-consistent option is the true pair for 52 % of encryptions
    under ‖·‖², 63 % at rank 20 (measured; at 28×28, n = 100, T = 50: 27 % vs 44 %). Also: the shared-option path
    (``Metric.cross``) agrees with the per-row one, rank 0 is plain squared error, a negative rank is refused."""
    from reconguard.attacks.instahide import CarliniAttack
    from reconguard.attacks.instahide.carlini_metric import PLAIN
    from reconguard.attacks.instahide.carlini_model import cross_noise, predict
    from reconguard.attacks.instahide.carlini_options import Options, segment_argmin
    from reconguard.encoders import InstaHide
    from reconguard.encoders.instahide import paper_c1

    d = load_digits()
    perm = torch.randperm(len(d), generator=torch.Generator().manual_seed(3))
    n, T = 30, 30
    x, y, own = d.images[perm[:n]], d.labels[perm[:n]], d.images[perm[1000:]]
    pool, noise = _pools(d.images)
    scheme = InstaHide(6, c1=paper_c1(6), mode="cross", public=pool, public_normalize="own")
    encs = [scheme.encrypt(x, y, seed=1000 + t) for t in range(T)]
    E, L = torch.cat([e.images for e in encs]).double(), torch.cat([e.labels for e in encs]).double()
    pairs = torch.cat([e.key.partners[:, :2] for e in encs])
    order = torch.argsort(y, stable=True)  # the attack's image slots: by class
    slot = torch.empty(n, dtype=torch.long)
    slot[order] = torch.arange(n)
    members = {}
    for s_, i in enumerate(order.tolist()):
        members.setdefault(int(y[i]), []).append(s_)
    attack = CarliniAttack(6, n, c1=paper_c1(6), mode="cross")
    opts = Options([attack.grid.entries(L[t], members) for t in range(len(E))], n=n)
    stats = InstaHide(k=6).channel_stats(own)
    X = InstaHide.normalize_images(x, stats).reshape(n, -1).double()[order]
    own_z = InstaHide.normalize_images(own, stats).reshape(len(own), -1).double()
    B, truth = E.reshape(len(E), -1).abs(), slot[pairs]
    right = {}
    for rank in (0, 20):
        convention, model, metric = cross_noise(E, L, own, noise, own_z, stats, 6, 0.3, "auto", rank, 0)
        assert convention == "own" and (metric is PLAIN) == (rank == 0)
        first, _ = segment_argmin(opts.residuals(X, B, model, metric), opts.owner, len(E))
        chosen = opts.rows(first) > 0
        right[rank] = float(chosen[torch.arange(len(E))[:, None], truth].all(1).float().mean())
    assert right[20] >= right[0] + 0.06, right  # measured 0.66 vs 0.50 (one pool for both sides: 0.63 vs 0.52)
    sub = torch.arange(0, len(opts), 97)  # the sparse rows' residuals are the dense rows' (Σ_m w_m X[i_m] = a X)
    dense = metric(predict(opts.rows(sub), X, *model) - B[opts.owner[sub]])
    assert torch.allclose(opts.residuals(X, B, model, metric)[sub], dense, rtol=1e-9, atol=1e-9)
    P = predict(opts.rows(torch.arange(50)), X, *model)
    assert torch.allclose(metric.cross(B[:7], P), torch.stack([metric(P - b) for b in B[:7]]), rtol=1e-9, atol=1e-6)
    assert torch.allclose(PLAIN(P - B[0]), (P - B[0]).pow(2).sum(1))
    for m in (metric, PLAIN):  # the fused float32 minimum of the label-free search: the float64 minimum, up to
        full = m.cross(B, P)   # float32's precision of the terms (measured: 1 near-tie of 500 apart by 2e-8)
        low, idx = full.min(1)
        fused, err = m.nearest(B, P, block=256 * 7)  # 7 options at a time
        assert torch.allclose(err, full.gather(1, fused[:, None])[:, 0], rtol=1e-9, atol=1e-9)
        assert bool((err <= low + 1e-6 * (B ** 2).sum(1)).all()) and float((fused == idx).float().mean()) >= 0.99
    with pytest.raises(errors.ParameterError, match="noise_rank"):
        CarliniAttack(6, n, mode="cross", noise_rank=-1)


def test_carlini_attack_without_co_occurring_pairs(tmp_path):
    """Issue 15 item 1 at smoke size: N = 400 < n(n+1)/2 = 820 — most pairs of the 40 images never share a mix,
    which the lifting needs (it refuses) — and the direct X-step recovers them anyway."""
    from reconguard.attacks.instahide import CarliniAttack, score_challenge
    from reconguard.encoders.instahide import paper_c1

    challenges, own, noise = _both_conventions(tmp_path, 40, 10)
    enc, labels, truth = challenges["private"]
    with pytest.raises(errors.ParameterError, match="solver='direct'"):
        CarliniAttack(6, 40, c1=paper_c1(6), mode="cross", solver="lift").run(enc, labels, own, noise_images=noise)
    r = CarliniAttack(6, 40, c1=paper_c1(6), mode="cross").run(enc, labels, own, noise_images=noise)
    s = score_challenge(r.images, truth)
    assert r.solver == "direct" and r.images.shape == (40, 1, 8, 8)
    assert s.identified >= s.baseline.identified + 0.5 and s.matched_ssim > s.baseline.matched_ssim + 0.1, s.summary()


def test_clustering_scales_past_the_exact_assignment():
    """The greedy balanced assignment (used above ``exact_limit`` memberships, e.g. the published 10,000) recovers
    most of the membership from exact pair scores: measured 1,103 of 1,200 (the NMF lost one of the 30 images; the
    exact assignment, below the limit, recovers all of it — test above)."""
    from scipy.optimize import linear_sum_assignment

    from reconguard.attacks.instahide import cluster_encryptions

    g = torch.Generator().manual_seed(1)
    M = torch.zeros(600, 30)
    for t in range(600):
        M[t, torch.randperm(30, generator=g)[:2]] = 1
    Mh = cluster_encryptions(((M @ M.T) > 0).double(), 30, 2, exact_limit=0)
    assert (Mh.sum(1) == 2).all()
    C = (Mh.T @ M).numpy()
    ri, ci = linear_sum_assignment(-C)
    assert C[ri, ci].sum() >= 0.9 * M.sum()


def test_carlini_local_search_past_the_option_limit(tmp_path):
    """Issue 15 item 4 at smoke size: when the label-consistent assignments outnumber ``max_options`` (inside k = 4
    at n = 100: ~5·10⁷) the attack changes one class's members at a time instead of listing them. The rows stay
    label-consistent, no sweep raises the error for a fixed X, and it recovers what the exhaustive list recovers
    (n = 30, T = 25: 738,608 rows listed, 60,781 components searched; one random start each, not the default five:
    the comparison, not the restarts, is what this test is about; measured: identified 1.00 by all three, as with two
    starts, at 33 CPU-s instead of 62)."""
    from reconguard.attacks.instahide import CarliniAttack, score_challenge
    from reconguard.attacks.instahide.carlini_local import LocalOptions
    from reconguard.attacks.instahide.carlini_model import predict

    d, public, enc, labels = _inside_challenge(tmp_path, 30, 25, 5)
    with pytest.raises(errors.ParameterError, match="search='exact' or 'local'"):
        CarliniAttack(4, 30, solver="direct", search="exhaustive", max_options=20_000).run(enc, labels, d.images[public])
    with pytest.raises(errors.ParameterError, match="needs the soft labels"):
        CarliniAttack(4, 30, search="local").run(enc, None, d.images[public])
    scores = {}
    for search, limit in (("auto", 20_000), ("local", 20_000), ("exhaustive", 2_000_000)):
        r = CarliniAttack(4, 30, solver="direct", search=search, max_options=limit, restarts=1).run(
            enc, labels, d.images[public])
        scores[r.search] = score_challenge(r.images, tmp_path / "t")
        onehot = torch.nn.functional.one_hot(r.classes, 10).double()
        assert torch.allclose(r.mixing @ onehot, torch.as_tensor(labels, dtype=torch.float64), atol=1e-9)
    local, exact, full = scores["local"], scores["exact"], scores["exhaustive"]  # auto: the exact states (carlini_exact)
    assert local.identified >= full.identified - 0.1, (local.summary(), full.summary())
    assert local.identified >= local.baseline.identified + 0.5, local.summary()
    assert exact.identified >= full.identified - 0.1, (exact.summary(), full.summary())
    # one assign call never raises the error of the states it starts from
    atk = CarliniAttack(4, 30)
    L = torch.as_tensor(labels, dtype=torch.float64)
    from reconguard.attacks.instahide.carlini_options import class_members
    classes, members = class_members(L, len(L), 30, "inside")
    opts = LocalOptions([(t, *pc) for t in range(len(L)) for pc in atk.grid.components(L[t], members)], 30, len(L))
    A = opts.random(torch.Generator().manual_seed(0))
    X = torch.randn(30, 64, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    B = torch.as_tensor(enc, dtype=torch.float64).reshape(len(L), -1).abs()
    before = float((predict(A, X, None, None) - B).pow(2).sum())
    A2, total = opts.assign(X, B, (None, None))
    assert total <= before and abs(total - float((predict(A2, X, None, None) - B).pow(2).sum())) < 1e-6 * total


def test_label_free_search_over_every_pair_with_the_split_move(tmp_path):
    """Issue 15 item 3 at smoke size: without the labels every encryption's pair is searched among all n(n − 1)/2
    pairs of images (coefficients on a grid; ``Metric.nearest``: one float32 product per chunk, no N×O matrix kept)
    and k-means' split move re-seeds a slot holding a blend of two images (label-free: any two slots). Cross k = 6,
    public patches normalised with their own statistics, 8×8 digits, n = 40, T = 25, seeded keys, one random start
    each: identified 0.725 with the split move vs 0.60 without (guess 0.025; 17 and 5 CPU-s); the default three starts
    give 0.85 vs 0.60 (52 and 12 CPU-s). At 28×28, n = 100, T = 50 the same search identified 0.80 from a random start
    (README). A search too large to run over every pair is refused with the fix, or restricted by similarity scores."""
    from reconguard.attacks.instahide import CarliniAttack, score_challenge
    from reconguard.encoders.instahide import paper_c1

    challenges, own, noise = _both_conventions(tmp_path, 40, 25)
    enc, _, truth = challenges["own"]
    scores = {}
    for splits in (0, 10):
        r = CarliniAttack(6, 40, c1=paper_c1(6), mode="cross", splits=splits, restarts=1).run(
            enc, None, own, noise_images=noise)
        assert (r.classes == -1).all() and r.mixing.shape == (1000, 40)
        scores[splits] = score_challenge(r.images, truth)
    with_split, without = scores[10], scores[0]
    assert with_split.identified >= 0.45 and with_split.identified >= without.identified + 0.05, (
        with_split.summary(), without.summary())
    assert without.identified >= without.baseline.identified + 0.25
    big = CarliniAttack(6, 400, c1=paper_c1(6), mode="cross")
    with pytest.raises(errors.ParameterError, match="max_free_work"):
        big.check_free_search(400, 20_000, 784)
    assert big.check_free_search(400, 20_000, 784, similarity=True) is False  # then each encryption's likely images
    assert big.check_free_search(100, 5_000, 784) is True                     # the published size: every pair
    with pytest.raises(errors.ParameterError, match="splits"):
        CarliniAttack(6, 40, mode="cross", splits=-1)
    with pytest.raises(errors.ParameterError, match="prior_moves"):
        CarliniAttack(6, 40, mode="cross", prior_moves=-1)


def test_carlini_attack_reads_the_owners_pixel_normalisation(tmp_path):
    """A challenge whose owner scaled pixels to [-1, 1] (``InstaHide(normalize="symmetric")``) instead of centring them
    with the private set's statistics: ``challenge.json`` says so and ``attack_challenge`` passes it to the attack.
    Measured (this challenge): two starts as here 0.95, SSIM 0.91; the default six 1.00 / 0.93; six assuming the
    default normalisation instead: 0.75 / 0.70 (guess 0.00 / 0.69). A reference-code
    encryptor's [-1, 1] challenges (inside k = 3, two seeds): 1.00 / 0.96 and 0.90 / 0.87 told, 0.70 / 0.75 and 0.45 /
    0.71 assuming the default."""
    from reconguard.attacks.instahide import make_challenge, score_challenge
    from reconguard.encoders import InstaHide
    from reconguard.experiments.challenge import attack_challenge, load_challenge

    d = load_digits()
    perm = torch.randperm(len(d), generator=torch.Generator().manual_seed(3))
    private, public = perm[:1000], perm[1000:]
    make_challenge(InstaHide(k=4, normalize="symmetric"), d.images[private], d.labels[private], 20, 25,
                   tmp_path / "c", tmp_path / "t", seed=2, key_seed=2)
    ch = load_challenge(tmp_path / "c")
    assert ch.normalization == "symmetric"
    told = score_challenge(attack_challenge(ch, "carlini", d.images[public], restarts=2).images, tmp_path / "t")
    assert told.identified >= 0.9 and told.matched_ssim >= told.baseline.matched_ssim + 0.15, told.summary()
    with pytest.raises(errors.ParameterError, match="challenge.json"):
        load_challenge(tmp_path / "c", normalization="dataset")
