"""Issue 3, item 3: the DDPM adapter is exact for a closed-form ε-model; the trained score model passes score_quality."""

from types import SimpleNamespace

import pytest
import torch
from torch import nn

from reconguard import errors
from reconguard.bounds import ddpm_score, ddpm_timestep, score_matrix, score_quality
from reconguard.data import load_digits, smoothed_empirical_prior
from reconguard.nn import ScoreModel
from reconguard.train import train_score_model

diffusers = pytest.importorskip("diffusers")  # in the test extra; optional for users


class GaussianEpsModel(nn.Module):
    """The exact ε-predictor of a DDPM whose clean data (model units) is N(mu, v·I)."""

    def __init__(self, scheduler, mu, v, shape):
        super().__init__()
        self.acp = torch.as_tensor(scheduler.alphas_cumprod, dtype=torch.float64)
        self.mu, self.v = mu, v
        self.dummy = nn.Parameter(torch.zeros(1, dtype=torch.float64))
        self.config = SimpleNamespace(in_channels=shape[0], sample_size=shape[1])

    def forward(self, sample, t):
        a = self.acp[t]
        return SimpleNamespace(sample=(1 - a) ** 0.5 * (sample - a**0.5 * self.mu) / (a * self.v + 1 - a))


def test_ddpm_adapter_is_exact_for_a_gaussian_eps_model():
    sched = diffusers.DDPMScheduler(num_train_timesteps=1000)
    mu, v, sigma_s = 0.2, 0.09, 0.1
    model = GaussianEpsModel(sched, mu, v, (1, 4, 4))
    score = ddpm_score(model, sched, sigma_s)
    t = ddpm_timestep(sched, sigma_s)
    a = float(sched.alphas_cumprod[t])
    assert score.timestep == t and abs(score.sigma_t - sigma_s) < 0.01  # the closest t on the schedule
    # pixel prior: y = 2x − 1 ~ N(mu, v + (1−ā)/ā)  ⇒  x ~ N((mu+1)/2, (v + (1−ā)/ā)/4)
    var_x = (v + (1 - a) / a) / 4
    x = torch.rand(5, 16, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    expected = -(x - (mu + 1) / 2) / var_x
    assert torch.allclose(score(x), expected, rtol=1e-10, atol=1e-10)


def test_real_unet_runs_offline_from_a_local_folder(tmp_path):
    from reconguard.nn.ddpm import load_ddpm

    unet = diffusers.UNet2DModel(sample_size=8, in_channels=1, out_channels=1, layers_per_block=1,
                                 block_out_channels=(8, 16), norm_num_groups=4,
                                 down_block_types=("DownBlock2D", "DownBlock2D"), up_block_types=("UpBlock2D", "UpBlock2D"))
    sched = diffusers.DDPMScheduler(num_train_timesteps=1000)
    unet.save_pretrained(tmp_path / "unet")
    sched.save_pretrained(tmp_path / "scheduler")
    unet2, sched2 = load_ddpm(tmp_path)
    score = ddpm_score(unet2, sched2, 0.1)
    s = score(torch.rand(3, 64))
    assert s.shape == (3, 64) and bool(torch.isfinite(s).all())
    with pytest.raises(errors.DataFileNotFoundError, match="scheduler_config.json"):
        (tmp_path / "scheduler" / "scheduler_config.json").unlink()
        load_ddpm(tmp_path)
    with pytest.raises(errors.DataFileNotFoundError, match="does not exist"):
        load_ddpm(tmp_path / "nowhere")


def test_trained_score_model_passes_score_quality(tmp_path):
    ds = load_digits()
    model, result = train_score_model(ds, 0.1, epochs=30, width=48, depth=4, progress=False)
    assert result.history[-1]["train_loss"] < result.history[0]["train_loss"]
    prior = smoothed_empirical_prior(ds, 0.1)
    x = prior.sample(20000, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        q = score_quality(score_matrix(model.score, x.float()), x)
    assert q.passes(0.95), (q.fraction_below_floor, q.min)
    # saved and loaded, the model gives the same scores
    path = model.save(tmp_path / "score.pt")
    back = ScoreModel.load(path)
    with torch.no_grad():
        assert torch.allclose(back.score(x[:5].float()), model.score(x[:5].float()))


def test_untrained_denoiser_fails_quality():
    """The check can fail: a score that is too small (a network predicting 30% of the noise) is flagged."""
    ds = load_digits()
    prior = smoothed_empirical_prior(ds, 0.1)
    x = prior.sample(20000, generator=torch.Generator().manual_seed(1))
    weak = lambda v: 0.3 * prior.score(v)  # noqa: E731
    assert not score_quality(score_matrix(weak, x), x).passes(0.95)
