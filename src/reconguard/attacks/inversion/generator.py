"""The attacker's generative prior, trained on PUBLIC data only (AT-AT paper appendix A.5 / C.2).

At paper scale PPA uses a StyleGAN2 trained on FFHQ (load your own, any ``nn.Module`` mapping latents
to [0, 1] images with a ``latent_dim`` attribute works). At small scale: :class:`VAEGenerator`, a small
convolutional VAE whose decoder maps ``z ~ N(0, I)`` to images, trained on the public split
(digits 5–9) with :func:`train_generator` — it never sees a private class.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from ...checks import check_positive_int
from ...progress import progress as progress_bar


class VAEGenerator(nn.Module):
    """Decoder ``z → image`` (the generator) plus the encoder used to train it."""

    def __init__(self, shape=(1, 16, 16), latent_dim: int = 16, width: int = 32):
        super().__init__()
        c, h, w = shape
        if h % 4 or w % 4:
            raise ValueError("VAEGenerator needs image sides divisible by 4")
        self.shape, self.latent_dim = tuple(shape), check_positive_int(latent_dim, "latent_dim")
        self.encoder = nn.Sequential(
            nn.Conv2d(c, width, 4, 2, 1), nn.LeakyReLU(0.2), nn.Conv2d(width, 2 * width, 4, 2, 1), nn.LeakyReLU(0.2),
            nn.Flatten(1), nn.Linear(2 * width * (h // 4) * (w // 4), 2 * latent_dim))
        self.fc = nn.Linear(latent_dim, 2 * width * (h // 4) * (w // 4))
        self.decoder = nn.Sequential(
            nn.Unflatten(1, (2 * width, h // 4, w // 4)), nn.ReLU(), nn.ConvTranspose2d(2 * width, width, 4, 2, 1),
            nn.ReLU(), nn.ConvTranspose2d(width, c, 4, 2, 1), nn.Sigmoid())

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return self.render(self.features(z))

    def features(self, z: torch.Tensor) -> torch.Tensor:
        """The intermediate features (the decoder's input) of latents z."""
        return self.fc(z)

    def render(self, h: torch.Tensor) -> torch.Tensor:
        """Images from intermediate features."""
        return self.decoder(h)

    def encode(self, x):
        stats = self.encoder(x)
        return stats[:, :self.latent_dim], stats[:, self.latent_dim:].clamp(-8, 8)


def train_generator(public, latent_dim: int = 16, epochs: int = 60, batch_size: int = 64, lr: float = 2e-3,
                    beta: float = 1.0, seed: int = 0, device=None, progress: bool = False) -> VAEGenerator:
    """A VAE on the public images (ELBO with a Bernoulli-style BCE reconstruction term)."""
    from torch.utils.data import DataLoader

    images = public.images if hasattr(public, "images") else torch.stack([public[i][0] for i in range(len(public))])
    torch.manual_seed(seed)
    gen = VAEGenerator(tuple(images.shape[1:]), latent_dim).to(device or "cpu")
    opt = torch.optim.Adam(gen.parameters(), lr=lr)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, epochs)
    g = torch.Generator().manual_seed(seed)
    for _ in progress_bar(range(epochs), "generator", enabled=progress, unit="epoch"):
        for (x,) in DataLoader(torch.utils.data.TensorDataset(images), batch_size=batch_size, shuffle=True, generator=g):
            x = x.to(next(gen.parameters()).device)
            mu, logvar = gen.encode(x)
            z = mu + torch.randn_like(mu) * torch.exp(0.5 * logvar)
            rec = gen(z)
            bce = nn.functional.binary_cross_entropy(rec, x, reduction="sum") / len(x)
            kl = -0.5 * (1 + logvar - mu ** 2 - logvar.exp()).sum() / len(x)
            loss = bce + beta * kl
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        sched.step()
        if not math.isfinite(float(loss.detach())):
            raise RuntimeError("generator training diverged; lower lr")
    return gen.eval()
