"""Split networks: the first stages of a backbone, then a compression block that sets the embedding
size m (spectral-bounds paper, section 6.1, appendix A.1.1). ``downstream()`` is the decompression
block plus the rest of the backbone and its head, for training the encoder on the task.

* ``SplitCNN``: the 3-block MNIST CNN; early / middle / late = after block 0 / 1 / 2.
* ``SplitResNet18``: ResNet-18 (32×32); early = after the first conv, middle = after BasicBlock 4,
  late = after BasicBlock 6; optionally from a local torchvision-format state dict.
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

from ..errors import ShapeError, UnknownOptionError
from ..nn import CompressionBlock, DecompressionBlock, compression_plan, mnist_cnn_blocks, seeded
from ..nn.resnet import ResNet18, load_torchvision_weights


class SplitNet(nn.Module):
    """``N×C×H×W`` (or ``N×d``, reshaped to ``in_shape``) → ``N×m``.

    ``stages`` is the backbone as a list of modules and ``head`` what follows the last stage; the
    encoder owns ``stages[:cut]`` and the compression block, ``downstream()`` the rest.
    """

    splits: dict[str, int] = {}

    def __init__(self, stages: list[nn.Module], head: nn.Module, split: str, m: int,
                 in_shape: tuple[int, int, int], seed: int | None = 0):
        super().__init__()
        if split not in self.splits:
            raise UnknownOptionError(f"split must be one of {sorted(self.splits)}, got {split!r}.")
        self.split, self.m, self.in_shape, self.seed = split, int(m), tuple(in_shape), seed
        cut = self.splits[split]
        self.blocks = nn.Sequential(*stages[:cut])
        self._rest = (nn.Sequential(*stages[cut:]), head)  # a tuple: not parameters of the encoder
        self._downstream = None
        with torch.no_grad():
            was = self.blocks.training
            self.blocks.eval()
            c, h, w = self.blocks(torch.zeros(1, *self.in_shape)).shape[1:]
            self.blocks.train(was)
        self._feature_shape = (c, h, w)
        c_out, pool = compression_plan(self.m, c, h, w)
        with seeded(seed):
            self.compress = CompressionBlock(c, c_out, pool)
        self._pooled = (pool, pool) if pool else (h, w)

    @property
    def in_dim(self) -> int:
        c, h, w = self.in_shape
        return c * h * w

    @property
    def out_dim(self) -> int:
        return self.m

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.ndim == 2:
            if x.shape[1] != self.in_dim:
                raise ShapeError(f"{type(self).__name__} expects d={self.in_dim} (shape {self.in_shape}), "
                                 f"got {x.shape[1]}.")
            x = x.reshape(x.shape[0], *self.in_shape)
        if tuple(x.shape[1:]) != self.in_shape:
            raise ShapeError(f"{type(self).__name__} expects inputs of shape N×{'×'.join(map(str, self.in_shape))}, "
                             f"got {tuple(x.shape)}.")
        return self.compress(self.blocks(x)).flatten(1)

    def downstream(self) -> nn.Module:
        """Decompression + the rest of the backbone + head: ``N×m`` embeddings → logits (built once)."""
        if self._downstream is None:
            c, h, w = self._feature_shape
            c_out = self.compress.conv.out_channels
            with seeded(None if self.seed is None else self.seed + 1):
                decompress = DecompressionBlock(c_out, c, (h, w))
            rest, head = self._rest
            self._downstream = (nn.Sequential(nn.Unflatten(1, (c_out, *self._pooled)), decompress, rest, head),)
        return self._downstream[0]

    def extra_repr(self) -> str:
        return f"split={self.split!r}, m={self.m}, in_shape={self.in_shape}"


class SplitCNN(SplitNet):
    """The MNIST 3-block CNN (GELU, AvgPool) split early / middle / late."""

    splits = {"early": 1, "middle": 2, "late": 3}

    def __init__(self, split: str = "middle", m: int = 64, in_shape: tuple[int, int, int] = (1, 28, 28),
                 num_classes: int = 10, seed: int | None = 0):
        with seeded(seed):
            stages = list(mnist_cnn_blocks(in_shape[0]))
            with torch.no_grad():
                feat = nn.Sequential(*stages)(torch.zeros(1, *in_shape)).numel()
            head = nn.Sequential(nn.Flatten(1), nn.Linear(feat, num_classes))
        super().__init__(stages, head, split, m, in_shape, seed)


class SplitResNet18(SplitNet):
    """ResNet-18 (GELU, AvgPool) split early (after conv1) / middle (after block 4) / late (after block 6)."""

    splits = {"early": 1, "middle": 5, "late": 7}

    def __init__(self, split: str = "middle", m: int = 64, in_shape: tuple[int, int, int] = (3, 32, 32),
                 num_classes: int = 10, seed: int | None = 0, weights: str | Path | None = None,
                 stem: str = "cifar"):
        with seeded(seed):
            backbone = ResNet18(num_classes, in_shape[0], stem)
        if weights is not None:
            load_torchvision_weights(backbone, weights)
        super().__init__(backbone.stages(), backbone.head(), split, m, in_shape, seed)
        self.weights = str(weights) if weights is not None else "random"
        self.backbone_ref = (backbone,)


ENCODER_CLASSES = {"splitcnn": SplitCNN, "resnet18": SplitResNet18}


def save_encoder(encoder: SplitNet, path: str | Path) -> Path:
    """Save a split encoder (config + state dict; loads with ``weights_only=True``)."""
    from ..io import save_torch_atomic

    family = {SplitCNN: "splitcnn", SplitResNet18: "resnet18"}.get(type(encoder))
    if family is None:
        raise UnknownOptionError(f"save_encoder handles SplitCNN / SplitResNet18, not {type(encoder).__name__}.")
    config = {"family": family, "split": encoder.split, "m": encoder.m, "in_shape": list(encoder.in_shape)}
    return save_torch_atomic(path, {"kind": "reconguard-encoder", "config": config,
                                    "state_dict": encoder.state_dict()})


def load_encoder(path: str | Path) -> SplitNet:
    """Load what ``save_encoder`` wrote (``reconguard train-encoder``)."""
    from ..errors import CorruptDataError, DataFileNotFoundError

    path = Path(path)
    if not path.is_file():
        raise DataFileNotFoundError(f"encoder file {path} does not exist; train one with `reconguard train-encoder`.")
    try:
        blob = torch.load(path, map_location="cpu", weights_only=True)
        cfg = blob["config"]
        enc = ENCODER_CLASSES[cfg["family"]](cfg["split"], cfg["m"], tuple(cfg["in_shape"]), seed=None)
        enc.load_state_dict(blob["state_dict"])
    except Exception as exc:  # noqa: BLE001 — unpickling, truncation, wrong keys: one clear error
        raise CorruptDataError(f"{path}: not a reconguard encoder file (torch.load with weights_only=True refused it: "
                               f"{type(exc).__name__}; the file is corrupt, truncated or of another kind).") from exc
    return enc.eval()
