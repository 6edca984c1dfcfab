"""The learned-decoder attack (spectral-bounds paper, section 6.1 and appendix A.1.2, after [32]):
a network trained on (embedding, image) pairs of prior samples maps embeddings back to images.

    Linear(m → 1024) + LeakyReLU(0.2) + Linear(1024 → 128·h²) + reshape (128, h, h)
    3 × [Conv2d(128 → 128, k=3, pad=1) + LeakyReLU(0.2)]
    ConvTranspose2d(128 → 128, k=3, s=2, pad=1, out_pad=1) + LeakyReLU(0.2)
    ConvTranspose2d(128 → C, k=3, s=2, pad=1, out_pad=1)            (then cropped to H×W)

h = 7 for 28×28 and 9 for 32×32 (the paper's values; 4h ≥ H, the output is centre-cropped), else
⌈H/4⌉. Training: Adam with OneCycle (max_lr 2e−3, pct_start 0.3), MSE, grad-norm clip 0.1, batch 256;
embeddings are divided by their RMS over 512 training embeddings.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
from torch import nn

from ...checks import as_samples, check_positive_int
from ...encoders.noisy import split_noise
from ...errors import ShapeError
from ...nn.init import seeded
from ...progress import progress as progress_bar
from ...results import Result
from ..base import Attack, Reconstruction

PAPER_H = {28: 7, 32: 9}


FIRST_OUTPUTS = 2**16  # outputs of the decoder's first projection at most (1024 × 2^16 weights: 1 GiB with Adam)


class DecoderNet(nn.Module):
    def __init__(self, m: int, out_shape: tuple[int, int, int], h: int | None = None, width: int = 128):
        super().__init__()
        c, H, W = out_shape
        self.out_shape, self.h = tuple(out_shape), int(h or PAPER_H.get(H, math.ceil(max(H, W) / 4)))
        if 4 * self.h < max(H, W):
            raise ShapeError(f"decoder h={self.h} gives {4 * self.h}×{4 * self.h} < the image {H}×{W}.")
        act = nn.LeakyReLU(0.2)
        # the projection's outputs capped at FIRST_OUTPUTS (then a 1×1 conv to ``width``): at 224×224 (h = 56) the
        # full Linear(1024, 128·56²) alone would be 411 M parameters, 6.6 GB with Adam; images up to 88×88 keep it
        self.first_channels = min(width, max(8, FIRST_OUTPUTS // (self.h * self.h)))
        widen = [nn.Conv2d(self.first_channels, width, 1), act] if self.first_channels < width else []
        self.first = nn.Sequential(nn.Linear(m, 1024), act, nn.Linear(1024, self.first_channels * self.h * self.h))
        self.widen = nn.Sequential(*widen)
        self.width = width
        self.body = nn.Sequential(*[m_ for _ in range(3) for m_ in (nn.Conv2d(width, width, 3, padding=1), act)])
        self.last = nn.Sequential(nn.ConvTranspose2d(width, width, 3, 2, 1, 1), act,
                                  nn.ConvTranspose2d(width, c, 3, 2, 1, 1))

    def forward(self, e):
        x = self.widen(self.first(e).reshape(e.shape[0], self.first_channels, self.h, self.h))
        x = self.last(self.body(x))
        _, H, W = self.out_shape
        top, left = (x.shape[2] - H) // 2, (x.shape[3] - W) // 2
        return x[:, :, top:top + H, left:left + W]


@dataclass(frozen=True)
class DecoderHistory(Result):
    losses: list = field(default_factory=list)  # mean training MSE per epoch
    rms: float = 1.0


class DecoderAttack(Attack):
    """The learned-decoder attack (spectral-bounds paper A.1.2): a network trained to map ``Enc(x) (+ noise)``
    back to ``x`` on the attacker's own images.

    Args:
        encoder: the target ``nn.Module`` (a ``Noisy`` wrapper's σ is simulated while training).
        in_shape: the image shape ``(C, H, W)`` (default ``encoder.in_shape``).
        epochs, batch_size, max_lr, clip: OneCycle (``max_lr`` 2e−3, warm-up 0.3), MSE, gradient clip 0.1.
        sigma: the release's noise std (default: the ``Noisy`` encoder's).

    ``fit(train_images)`` trains it; ``run(embeddings)`` returns a :class:`Reconstruction` (``N×d`` images).

    Example::

        dec = DecoderAttack(enc, (1, 8, 8), epochs=15); dec.fit(train)
        x_hat = dec.run(enc(x)).images
    """

    name = "decoder"

    def __init__(self, encoder: nn.Module, in_shape: tuple[int, int, int] | None = None, *, h: int | None = None,
                 epochs: int = 40, batch_size: int = 256, max_lr: float = 2e-3, clip: float = 0.1,
                 sigma: float | None = None, seed: int = 0, device=None, width: int = 128):
        super().__init__(split_noise(encoder)[0], device=device)
        self.encoder, enc_sigma = encoder, split_noise(encoder)[1]
        self.sigma = enc_sigma if sigma is None else float(sigma)
        self.in_shape = tuple(in_shape or getattr(split_noise(encoder)[0], "in_shape", ()))
        if len(self.in_shape) != 3:
            raise ShapeError("DecoderAttack needs the image shape (C, H, W): pass in_shape.")
        self.h, self.epochs, self.batch_size = h, check_positive_int(epochs, "epochs"), batch_size
        self.max_lr, self.clip, self.seed, self.device, self.width = max_lr, clip, seed, device, int(width)
        self.net: DecoderNet | None = None
        self.rms = 1.0

    def _embed(self, x: torch.Tensor, g: torch.Generator) -> torch.Tensor:
        enc, _ = split_noise(self.encoder)
        p = next(iter(list(enc.parameters()) + list(enc.buffers())), None)
        with torch.no_grad():
            xe = x.reshape(x.shape[0], *self.in_shape)
            e = enc(xe.to(p.device) if p is not None else xe).reshape(x.shape[0], -1).float().cpu()
        if self.sigma > 0:  # the attacker simulates the release it will see
            e = e + self.sigma * torch.randn(e.shape, generator=g).to(e)
        return e

    def fit(self, train, progress: bool = False) -> DecoderHistory:
        x = as_samples(train, "train").to(torch.float32)
        x = x.reshape(x.shape[0], *self.in_shape)
        g = torch.Generator().manual_seed(self.seed)
        enc, _ = split_noise(self.encoder)
        was = enc.training
        enc.eval()
        e_probe = self._embed(x[torch.randperm(x.shape[0], generator=g)[:512]], g)
        self.rms = float(e_probe.pow(2).mean().sqrt()) or 1.0
        with seeded(self.seed):
            self.net = DecoderNet(e_probe.shape[1], self.in_shape, self.h, self.width)
        device = torch.device(self.device) if self.device else torch.device("cpu")
        net = self.net.to(device)
        steps = self.epochs * math.ceil(x.shape[0] / self.batch_size)
        opt = torch.optim.Adam(net.parameters(), lr=self.max_lr)
        sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=self.max_lr, total_steps=steps, pct_start=0.3)
        losses = []
        for _ in progress_bar(range(self.epochs), "decoder attack", enabled=progress):
            perm, total = torch.randperm(x.shape[0], generator=g), 0.0
            for idx in perm.split(self.batch_size):
                xb = x[idx]
                eb = (self._embed(xb, g) / self.rms).to(device)
                loss = nn.functional.mse_loss(net(eb), xb.to(device))
                opt.zero_grad(set_to_none=True)
                loss.backward()
                nn.utils.clip_grad_norm_(net.parameters(), self.clip)
                opt.step()
                sched.step()
                total += float(loss.detach()) * xb.shape[0]
            losses.append(total / x.shape[0])
        enc.train(was)
        net.eval()
        return DecoderHistory(losses, self.rms)

    def run(self, embeddings: torch.Tensor) -> Reconstruction:
        if self.net is None:
            raise RuntimeError("DecoderAttack.fit(...) must run before run(...).")
        p = next(self.net.parameters())
        with torch.no_grad():
            out = self.net(torch.as_tensor(embeddings).detach().to(p.device, torch.float32) / self.rms)
        return Reconstruction(out.reshape(out.shape[0], -1).cpu(), self.name)
