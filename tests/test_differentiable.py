"""Bounds on encoders autograd does not describe (``reconguard.bounds.differentiable``): a sign / rounding / integer /
detached encoder has J = 0 where its output moves, so E[G] read "nothing revealed" and every Fisher bound was the
prior's ceiling — a lower bound an attacker beats by 36× below. The path check inside the estimator (dense and
low-rank) marks such an estimate "not differentiable" and every bound on it is 0; differentiable encoders, ReLU nets
included, pass it unchanged."""

import torch
from torch import nn

from reconguard.bounds import (ceiling, estimate_fisher, maeng_bound, mse_bound, noiseless_mse_bound, psi_terms,
                               estimate_score_matrix)
from reconguard.bounds.differentiable import PATH_TOL, path_error
from reconguard.bounds.saturation import NOT_DIFFERENTIABLE
from reconguard.data.priors import gaussian_prior
from reconguard.encoders import SplitCNN

D, M, MU, ETA = 64, 1024, 0.5, 0.2


class SignCodes(nn.Module):
    """sign(W x − b): 1,024 one-bit codes of a 64-pixel image (a binary hash)."""

    def __init__(self, kind: str = "sign", m: int = M):
        super().__init__()
        g = torch.Generator().manual_seed(0)
        W = torch.randn(m, D, generator=g, dtype=torch.float64)
        b = W @ torch.full((D,), MU, dtype=torch.float64) + 0.2 * torch.randn(m, generator=g, dtype=torch.float64) * W.norm(dim=1)
        self.register_buffer("W", W)
        self.register_buffer("b", b)
        self.kind = kind

    def forward(self, x):
        h = x.reshape(len(x), -1).to(self.W.dtype) @ self.W.T - self.b
        if self.kind == "sign":
            return torch.sign(h)
        if self.kind == "round":
            return torch.round(h * 255) / 255
        if self.kind == "detach":
            half = h.shape[1] // 2
            return torch.cat([torch.tanh(h[:, :half]), torch.tanh(h[:, half:]).detach()], 1)
        return torch.tanh(h)  # "smooth"


def _prior_samples(n=400, seed=0):
    return gaussian_prior(MU, ETA, D).sample(n, generator=torch.Generator().manual_seed(seed)).float()


def test_a_sign_encoder_gets_every_bound_zero_and_an_attacker_beats_the_old_number():
    x = _prior_samples()
    prior = gaussian_prior(MU, ETA, D)
    S = estimate_score_matrix(prior, n=4000, seed=1)
    f = estimate_fisher(SignCodes(), x, k=32, seed=0)
    assert float(f.matrix.abs().max()) == 0.0  # autograd: the codes never move
    assert f.saturation.status == "not differentiable" and f.path_error > PATH_TOL
    old = ceiling(S).value  # what every Fisher bound read before: E[G] = 0, "nothing revealed"
    assert abs(old - ETA**2) < 0.004
    for b in (noiseless_mse_bound(f, S), mse_bound(f, S, 0.01), maeng_bound(f, S, 0.01),
              noiseless_mse_bound(f, S, tau=1e-4)):
        assert b.value == 0.0 and b.kind == NOT_DIFFERENTIABLE, (b.name, b.value, b.kind)
    # an attacker with the codes: MAP under the Gaussian prior with a smoothed sign likelihood
    g = torch.Generator().manual_seed(5)
    enc = SignCodes()
    truth = MU + ETA * torch.randn(100, D, generator=g, dtype=torch.float64)
    s = enc(truth)
    z = torch.full_like(truth, MU).requires_grad_(True)
    opt = torch.optim.Adam([z], lr=0.02)
    for _ in range(300):
        margin = s * (z @ enc.W.T - enc.b) / enc.W.norm(dim=1)
        loss = nn.functional.softplus(-20 * margin).sum() + ((z - MU) ** 2).sum() / (2 * ETA**2)
        opt.zero_grad()
        loss.backward()
        opt.step()
    attack = float(((z.detach() - truth) ** 2).mean())
    assert attack < old / 10, (attack, old)  # the old "lower bound" was not one


def test_low_rank_and_psi_bounds_are_zero_too():
    x = _prior_samples()
    S = estimate_score_matrix(gaussian_prior(MU, ETA, D), n=4000, seed=1)
    f = estimate_fisher(SignCodes(m=32), x, k=8, seed=0, representation="lowrank")
    assert f.saturation.status == "not differentiable"
    from reconguard.bounds import StructuredScore
    St = StructuredScore.isotropic(1 / ETA**2, D)
    assert noiseless_mse_bound(f, St).value == 0.0 and mse_bound(f, St, 0.01).value == 0.0
    assert maeng_bound(f, St, 0.01).value == 0.0
    dense = estimate_fisher(SignCodes(m=32), x, k=32, seed=0)
    terms = psi_terms(dense, lambda v: v[:, :4], x, lambda v: -(v - MU) / ETA**2, n_inputs=8, probes=4)
    assert terms.bound(0.01).value == 0.0 and terms.bound(0.0).value == 0.0
    assert terms.bound(0.0).kind == NOT_DIFFERENTIABLE
    del S


def test_the_path_check_tells_differentiable_encoders_from_the_rest():
    x = _prior_samples(8).double().reshape(8, 1, 8, 8)
    relu = nn.Sequential(nn.Flatten(), nn.Linear(D, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(),
                         nn.Linear(256, 32)).double()
    cnn = SplitCNN("middle", 32, (1, 8, 8), seed=0).double().eval()
    for enc in (SignCodes("smooth"), relu, cnn):
        assert path_error(enc, x) < PATH_TOL / 2, type(enc).__name__
    for kind in ("sign", "round", "detach"):
        assert path_error(SignCodes(kind), x) > PATH_TOL, kind
    assert path_error(SignCodes(), x[:1]) is None  # one input: nothing to check

    class NoForwardMode(torch.autograd.Function):  # reverse mode only: the check falls back to reverse-mode Jacobians
        @staticmethod
        def forward(ctx, h):
            ctx.save_for_backward(h)
            return torch.tanh(h)

        @staticmethod
        def backward(ctx, grad):
            (h,) = ctx.saved_tensors
            return grad * (1 - torch.tanh(h) ** 2)

    class Custom(SignCodes):
        def forward(self, v):
            return NoForwardMode.apply(v.reshape(len(v), -1).to(self.W.dtype) @ self.W.T - self.b)

    assert path_error(Custom(), x) < PATH_TOL / 2
    from reconguard.nn.resnet import ResNet18  # the model users bring most: ReLU kinks everywhere, still passes
    net = ResNet18(num_classes=10, in_channels=3, act="relu", width=16).double().eval()
    for p in net.parameters():
        p.requires_grad_(False)
    rgb = torch.rand(4, 3, 16, 16, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    assert path_error(net, rgb) < PATH_TOL
    smooth = estimate_fisher(SignCodes("smooth"), _prior_samples(), k=32, seed=0)
    assert smooth.saturation.status in ("saturated", "not saturated") and smooth.path_error < PATH_TOL / 2


def test_an_audit_of_integer_codes_runs_and_says_why_its_bounds_are_zero(tmp_path):
    """Integer codes crashed the audit inside autograd ("internal error"); they now run as floats with a zero
    derivative, the bounds are 0, and the audit warns that a poor attack is no evidence of privacy."""
    import numpy as np
    from sklearn.datasets import load_digits

    from reconguard.cli import main

    (tmp_path / "codes.py").write_text(
        "import torch\nfrom torch import nn\n"
        "class Codes(nn.Module):\n"
        "    in_shape = (1, 8, 8)\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.register_buffer('W', torch.randn(256, 64, generator=torch.Generator().manual_seed(0)))\n"
        "    def forward(self, x):\n"
        "        h = x.reshape(len(x), -1) @ self.W.T\n"
        "        return (h > h.mean(1, keepdim=True)).long()\n")
    np.save(tmp_path / "digits.npy", (load_digits().images[:200, None] / 16).astype("float32"))
    out = tmp_path / "audit"
    assert main(["audit", "encoder", "--model", f"{tmp_path / 'codes.py'}:Codes", "--data", str(tmp_path / "digits.npy"),
                 "--preset", "smoke", "--out", str(out), "--quiet"]) == 0
    import json
    result = json.loads((out / "results.json").read_text())
    assert all(r["bound"]["value"] == 0.0 for r in result["rows"])
    assert any("no evidence of privacy" in w and "integer" in w for w in result["warnings"])


class _Hidden(nn.Module):
    """tanh(W x) computed under ``torch.no_grad`` or through NumPy: reverse mode sees nothing, forward mode (no_grad
    only) sees all."""

    def __init__(self, m: int, how: str):
        super().__init__()
        self.l = nn.Linear(D, m, dtype=torch.float64)
        self.how = how

    def forward(self, x):
        x = x.reshape(len(x), -1).to(torch.float64)
        if self.how == "no_grad":
            with torch.no_grad():
                return torch.tanh(self.l(x))
        if self.how == "numpy":
            import numpy as np
            return torch.from_numpy(np.tanh(self.l(x).detach().numpy()))
        return torch.tanh(self.l(x))


def test_the_check_sees_the_jacobian_the_estimate_was_built_from():
    """``torch.no_grad`` inside forward hides the encoder from reverse mode (jacrev, m < d: E[G] = 0, the bound read
    the ceiling) but not from forward mode (jacfwd, m ≥ d: E[G] is right, and so is the bound); NumPy inside forward
    stopped torch.func with "Cannot access data pointer" and now falls back to the reference loop, then to 0."""
    x = _prior_samples()
    S = estimate_score_matrix(gaussian_prior(MU, ETA, D), n=4000, seed=1)
    hidden = estimate_fisher(_Hidden(16, "no_grad"), x, k=16, seed=0)
    assert hidden.method == "jacrev" and hidden.saturation.status == "not differentiable"
    assert noiseless_mse_bound(hidden, S).value == 0.0 and mse_bound(hidden, S, 0.1).value == 0.0
    numpy = estimate_fisher(_Hidden(16, "numpy"), x, k=16, seed=0)
    assert numpy.saturation.status == "not differentiable" and mse_bound(numpy, S, 0.1).value == 0.0
    wide = _Hidden(128, "no_grad")
    seen = estimate_fisher(wide, x, k=16, seed=0)
    plain = _Hidden(128, "plain")
    plain.load_state_dict(wide.state_dict())
    ref = estimate_fisher(plain, x, k=16, seed=0)
    assert seen.method == "jacfwd" and seen.saturation.status != "not differentiable"
    assert torch.allclose(seen.matrix, ref.matrix) and float(ref.matrix.trace()) > 0
    assert mse_bound(seen, S, 0.1).value == mse_bound(ref, S, 0.1).value > 0


def test_a_classifier_with_masked_gradients_is_flagged_in_its_audit(tmp_path):
    """A classifier whose forward runs under ``torch.no_grad`` gives gradient attacks nothing: robust accuracy read
    as clean accuracy at every ε. The audit now says its robust accuracy and gradient inversions are no evidence."""
    import json

    from reconguard.cli import main

    (tmp_path / "masked.py").write_text(
        "import torch\nfrom torch import nn\n"
        "class Masked(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.f = nn.Sequential(nn.Flatten(), nn.Linear(256, 64), nn.ReLU(), nn.Linear(64, 5))\n"
        "    @torch.no_grad()\n"
        "    def forward(self, x):\n"
        "        return self.f(x)\n")
    out = tmp_path / "audit"
    assert main(["audit", "classifier", "--model", f"{tmp_path / 'masked.py'}:Masked", "--preset", "smoke", "--quiet",
                 "--out", str(out)]) == 0
    res = json.loads((out / "results.json").read_text())
    assert any("masked" in w and "no evidence of robustness" in w for w in res["warnings"]), res["warnings"]
