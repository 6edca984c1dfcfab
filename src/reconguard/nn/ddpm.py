"""Load a DDPM (diffusers ``UNet2DModel`` + ``DDPMScheduler``) from a local folder — never from the hub."""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import CorruptDataError, DataFileNotFoundError

DDPM_FORMAT = ("a folder saved by diffusers (e.g. `DDPMPipeline.from_pretrained('google/ddpm-cifar10-32')"
               ".save_pretrained(DIR)` on a machine with internet): the UNet's config.json + weights "
               "(diffusion_pytorch_model.safetensors or .bin) at the top or in unet/, and scheduler_config.json "
               "at the top or in scheduler/")


def _require_diffusers():
    try:
        import diffusers  # noqa: F401
    except ImportError as exc:  # pragma: no cover — diffusers is in the test extra
        raise ImportError("loading a DDPM needs diffusers: pip install 'reconguard[ddpm]'") from exc
    return diffusers


def load_ddpm(folder: str | Path):
    """``(unet, scheduler)`` from a local diffusers folder, offline."""
    folder = Path(folder)
    if not folder.is_dir():
        raise DataFileNotFoundError(f"DDPM folder {folder} does not exist. Expected {DDPM_FORMAT}.")
    diffusers = _require_diffusers()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    unet_dir = folder / "unet" if (folder / "unet" / "config.json").is_file() else folder
    sched_dir = folder / "scheduler" if (folder / "scheduler" / "scheduler_config.json").is_file() else folder
    if not (unet_dir / "config.json").is_file():
        raise DataFileNotFoundError(f"no UNet config.json in {folder} or {folder / 'unet'}. Expected {DDPM_FORMAT}.")
    if not (sched_dir / "scheduler_config.json").is_file():
        raise DataFileNotFoundError(f"no scheduler_config.json in {folder} or {folder / 'scheduler'}. "
                                    f"Expected {DDPM_FORMAT}.")
    try:
        unet = diffusers.UNet2DModel.from_pretrained(str(unet_dir), local_files_only=True)
        scheduler = diffusers.DDPMScheduler.from_pretrained(str(sched_dir), local_files_only=True)
    except (OSError, ValueError, KeyError) as exc:
        raise CorruptDataError(f"{folder}: cannot load the DDPM ({exc}). Expected {DDPM_FORMAT}.") from exc
    return unet.eval(), scheduler
