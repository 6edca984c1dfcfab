"""A user's own model and data, as they bring them: the loading half of ``reconguard audit``.

:func:`load_model` takes ``path/to/file.py:NAME`` or ``package.module:NAME`` (a class or a zero-argument
factory returning an ``nn.Module``) or a TorchScript ``.pt``, plus optional weights (a state dict read with
``weights_only=True``, or ``.safetensors``). :func:`load_images` takes an image folder (flat, or one folder per
class), a ``.npy`` / ``.npz`` array (N×C×H×W or N×H×W, in [0, 1] or uint8) or a built-in name (``digits``).
:class:`ImageModel` wraps the module so dtype, device, shape and autograd state are the tool's business: it
takes ``N×d`` or ``N×C×H×W`` in any float dtype and returns ``N×m`` (or the logits) in float, and says clearly
when the module's output is not a tensor. Every mistake is one error naming the problem and the fix.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import sys
from pathlib import Path

import numpy as np
import torch
from torch import nn

from ..checks import channels_first
from ..errors import CorruptDataError, DataFileNotFoundError, ParameterError, ShapeError

from ..data.files import NAMED as BUILTIN_DATA


def _import_object(spec: str):
    where, _, name = spec.rpartition(":")
    if not where or not name:
        raise ParameterError(f"--model {spec!r}: give path/to/file.py:NAME, package.module:NAME or a TorchScript .pt.")
    if where.endswith(".py"):
        path = Path(where)
        if not path.is_file():
            raise DataFileNotFoundError(f"--model: {path} does not exist.")
        mod_name = f"reconguard_user_{abs(hash(str(path.resolve())))}"
        loader = importlib.util.spec_from_file_location(mod_name, path)
        module = importlib.util.module_from_spec(loader)
        sys.modules[mod_name] = module
        try:
            loader.loader.exec_module(module)
        except (Exception, SystemExit) as exc:  # noqa: BLE001 — the user's file failing to import (even by calling
            sys.modules.pop(mod_name, None)  # sys.exit) is one clear error
            raise ParameterError(f"--model {spec!r}: {path} does not import ({_what(exc)}).") from None
    else:
        try:
            module = importlib.import_module(where)
        except (Exception, SystemExit) as exc:  # noqa: BLE001
            raise ParameterError(f"--model {spec!r}: module {where!r} does not import ({_what(exc)}); "
                                 "is its package installed or on PYTHONPATH?") from None
    if not hasattr(module, name):
        found = sorted(n for n, v in vars(module).items() if not n.startswith("_") and
                       (inspect.isclass(v) and issubclass(v, nn.Module) or inspect.isfunction(v)))
        raise ParameterError(f"--model {spec!r}: {where} has no {name!r}; it defines {found}.")
    return getattr(module, name)


def _what(exc: BaseException) -> str:
    if isinstance(exc, SystemExit):
        return f"it calls sys.exit({exc.code!r})"
    return f"{type(exc).__name__}: {str(exc).splitlines()[0][:160] if str(exc) else ''}"


def _instantiate(obj, spec: str) -> nn.Module:
    if isinstance(obj, nn.Module):
        return obj
    if not callable(obj):
        raise ParameterError(f"--model {spec!r} is a {type(obj).__name__}, not a class or a factory function.")
    try:
        sig = inspect.signature(obj)
        required = [p.name for p in sig.parameters.values()
                    if p.default is inspect.Parameter.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD,
                                                                            p.KEYWORD_ONLY)]
    except (TypeError, ValueError):
        required = []
    if required:
        raise ParameterError(f"--model {spec!r} needs arguments {required}; give a class whose arguments all have "
                             "defaults, or a zero-argument factory function (def make(): return MyNet(...)).")
    try:
        model = obj()
    except (Exception, SystemExit) as exc:  # noqa: BLE001
        raise ParameterError(f"--model {spec!r}: building it failed ({_what(exc)}).") from None
    if not isinstance(model, nn.Module):
        raise ParameterError(f"--model {spec!r} returned a {type(model).__name__}, not a torch.nn.Module.")
    return model


def _load_weights(model: nn.Module, weights: str | Path) -> None:
    path = Path(weights)
    if not path.is_file():
        raise DataFileNotFoundError(f"--weights: {path} does not exist.")
    try:
        if path.suffix == ".safetensors":
            from safetensors.torch import load_file
            state = load_file(str(path))
        else:
            state = torch.load(path, map_location="cpu", weights_only=True)
    except ImportError:
        raise ParameterError("reading .safetensors needs the safetensors package (pip install safetensors).") from None
    except Exception as exc:  # noqa: BLE001
        raise CorruptDataError(f"--weights {path}: not a state dict that loads safely ({type(exc).__name__}); save it "
                               "with torch.save(model.state_dict(), path) or safetensors.") from None
    if isinstance(state, dict) and "state_dict" in state and isinstance(state["state_dict"], dict):
        state = state["state_dict"]
    if not isinstance(state, dict):
        raise CorruptDataError(f"--weights {path}: holds a {type(state).__name__}, not a state dict.")
    try:
        missing, unexpected = model.load_state_dict(state, strict=False)
    except RuntimeError as exc:
        first = str(exc).split("\n")[1:3]
        raise ParameterError(f"--weights {path} do not match the model's shapes: {' '.join(s.strip() for s in first)}") \
            from None
    if missing or unexpected:
        raise ParameterError(f"--weights {path} do not match the model: missing {list(missing)[:5]}, unexpected "
                             f"{list(unexpected)[:5]} (is it the state dict of this model class?).")


def _reconguard_file(path: Path) -> nn.Module | None:
    """The model of a file reconguard wrote (``train-encoder``, ``train``, ``score train``), or None when the file
    is not one (a TorchScript archive, say). A bare state dict is refused: it needs its builder."""
    import warnings

    try:
        with warnings.catch_warnings():  # torch's note that a TorchScript archive was handed to torch.load
            warnings.simplefilter("ignore", UserWarning)
            blob = torch.load(path, map_location="cpu", weights_only=True)
    except Exception:  # noqa: BLE001 — not a weights-only pickle: TorchScript is tried next
        return None
    if not isinstance(blob, dict):
        return None
    if blob.get("kind") == "reconguard-encoder":
        from ..encoders import load_encoder
        return load_encoder(path)
    if blob.get("format") == "reconguard-classifier-1":
        from ..classifiers import load_classifier
        return load_classifier(path)[0]
    if blob.get("kind") == "reconguard-score-model":
        from ..nn.score import ScoreModel
        return ScoreModel.load(path)
    if blob and all(isinstance(v, torch.Tensor) for v in blob.values()):
        raise ParameterError(f"--model {path}: a state dict (weights only), not a model; give the code that builds "
                             f"the model and the weights: --model path/to/file.py:NAME --weights {path}.")
    return None


def load_model(spec: str | nn.Module, weights: str | Path | None = None) -> nn.Module:
    """The user's ``nn.Module`` (eval mode), the one loader of every command that takes a model (``bound``,
    ``audit …``, ``evaluate``, ``score check``): an ``nn.Module`` as given; ``path/to/file.py:NAME`` or
    ``package.module:NAME`` (a class or a zero-argument factory) with optional ``weights`` (a state dict or
    ``.safetensors``); a file reconguard wrote (an encoder, a classifier, a score model); or TorchScript."""
    if isinstance(spec, nn.Module):
        model = spec
    elif str(spec).endswith((".pt", ".pth", ".ts")) and ":" not in str(spec):
        path = Path(spec)
        if not path.is_file():
            raise DataFileNotFoundError(f"--model: {path} does not exist.")
        model = _reconguard_file(path)
        if model is None:
            try:
                model = torch.jit.load(str(path), map_location="cpu")
            except Exception as exc:  # noqa: BLE001
                raise CorruptDataError(f"--model {path}: neither a file reconguard wrote nor TorchScript "
                                       f"({type(exc).__name__}); save one with torch.jit.script(model).save(path), or "
                                       "give file.py:NAME (and --weights).") from None
    else:
        model = _instantiate(_import_object(str(spec)), str(spec))
    if weights is not None:
        _load_weights(model, weights)
    return model.eval()


def _to_unit(arr: np.ndarray, what: str) -> torch.Tensor:
    if arr.dtype == np.uint8:
        x = torch.from_numpy(arr.astype(np.float32) / 255.0)
    elif np.issubdtype(arr.dtype, np.floating) or np.issubdtype(arr.dtype, np.integer):
        x = torch.from_numpy(arr.astype(np.float32))
        if not torch.isfinite(x).all():
            raise CorruptDataError(f"{what}: contains NaN or infinite values.")
        lo, hi = float(x.min()), float(x.max())
        if lo < -1e-6 or hi > 1 + 1e-6:
            raise ParameterError(f"{what}: pixel values in [{lo:.3g}, {hi:.3g}]; give images in [0, 1] or uint8 "
                                 "(0–255), converted once at the edge.")
    else:
        raise CorruptDataError(f"{what}: arrays of {arr.dtype} are not images.")
    if x.ndim == 3:
        x = x[:, None]
    if x.ndim != 4:
        raise ShapeError(f"{what}: images must be N×C×H×W or N×H×W, got shape {tuple(x.shape)}.")
    return channels_first(x).contiguous()  # N×H×W×C, as image libraries write them, too


def _read_folder(folder: Path, size: int | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Every image of ``folder`` (class sub-folders give labels). With ``size`` each is resized to ``size×size`` and
    grey and colour images are brought to one channel count (colour wins); without, mixed sizes are refused."""
    from ..data.folder import EXTENSIONS
    from ..data.imagefile import read_image

    classes = sorted(d for d in folder.iterdir() if d.is_dir())
    groups = [(i, sorted(f for f in c.iterdir() if f.suffix.lower() in EXTENSIONS)) for i, c in enumerate(classes)]
    flat = sorted(f for f in folder.iterdir() if f.suffix.lower() in EXTENSIONS)
    if flat or not classes:
        groups = [(-1, flat)]
    files = [(label, f) for label, fs in groups for f in fs]
    if not files:
        raise DataFileNotFoundError(f"{folder}: no images ({', '.join(EXTENSIONS)}) in it or in its class folders.")
    images, labels, shapes = [], [], {}
    for label, f in files:
        img = read_image(f)  # 8-bit RGB or greyscale, whatever the file's mode (RGBA, CMYK, palette…)
        if size is not None and img.shape[:2] != (size, size):
            from PIL import Image
            img = np.asarray(Image.fromarray(img).resize((size, size), Image.BILINEAR))
        shapes.setdefault(img.shape, f)
        images.append(img)
        labels.append(label)
    if size is not None and len({im.ndim for im in images}) > 1:  # grey beside colour: colour wins
        images = [np.stack([im] * 3, -1) if im.ndim == 2 else im for im in images]
        shapes = {im.shape: f for im, (_, f) in zip(images, files)}
    if len(shapes) > 1:
        (s1, f1), (s2, f2) = list(shapes.items())[:2]
        raise ShapeError(f"{folder}: images of mixed sizes ({f1.name}: {s1}, {f2.name}: {s2}); resize them to one "
                         "size first.")
    x = _to_unit(np.stack(images), str(folder))
    y = torch.tensor(labels) if labels[0] >= 0 else None
    return x, y


def _npz_array(blob, key: str, path: Path) -> np.ndarray:
    """One array of an ``.npz``; object arrays (pickles) and unreadable members are refused by name."""
    try:
        return blob[key]
    except (ValueError, OSError, EOFError) as exc:
        raise CorruptDataError(f"--data {path}[{key}]: not a plain numeric array ({str(exc).splitlines()[0][:100]}); "
                               "save numbers, not Python objects.") from None


def check_labels(arr, what: str, num_classes: int | None = None) -> torch.Tensor:
    """Class labels: a 1-D array of whole numbers in 0 … C−1 (``num_classes``, when known), as int64."""
    arr = np.asarray(arr)
    if arr.dtype.kind not in "iuf" or arr.ndim != 1:
        raise CorruptDataError(f"{what}: labels must be a 1-D array of class numbers, got {arr.dtype} of shape "
                               f"{arr.shape}.")
    if arr.dtype.kind == "f" and (not np.isfinite(arr).all() or (arr != np.round(arr)).any()):
        raise CorruptDataError(f"{what}: labels must be whole class numbers 0 … C−1; found {arr[arr != np.round(arr)][:3]}"
                               " (soft or fractional labels are not class labels).")
    labels = torch.as_tensor(arr.astype(np.int64))
    high = num_classes if num_classes is not None else None
    if len(labels) and (int(labels.min()) < 0 or (high is not None and int(labels.max()) >= high)):
        raise ParameterError(f"{what}: labels must lie in 0 … {'C−1' if high is None else high - 1}; found "
                             f"{int(labels.min())} … {int(labels.max())}.")
    return labels


def load_images(data, *, size: int | None = None, labels: bool = False, root=None):
    """Images ``N×C×H×W`` float32 in [0, 1] (and integer labels when ``labels``; ``None`` where there are none);
    a name of :data:`BUILTIN_DATA` loads that data set (``root``: the local folder of mnist / cifar10)."""
    if isinstance(data, torch.Tensor):
        x, y = _to_unit(data.detach().cpu().numpy(), "data"), None
    elif isinstance(data, np.ndarray):
        x, y = _to_unit(data, "data"), None
    elif str(data) in BUILTIN_DATA:
        from ..data import load_named

        d = load_named(str(data), size or 16, root)
        x, y = d.images, d.labels
    else:
        path = Path(data)
        if path.is_dir():
            x, y = _read_folder(path, size)
        elif not path.exists():
            raise DataFileNotFoundError(f"--data {path}: no such file or folder (give an image folder, a .npy / .npz "
                                        f"array, or one of {BUILTIN_DATA}).")
        elif path.suffix in (".npy", ".npz"):
            try:
                blob = np.load(path, allow_pickle=False)
            except Exception as exc:  # noqa: BLE001
                raise CorruptDataError(f"--data {path}: not a readable NumPy file ({type(exc).__name__}).") from None
            if path.suffix == ".npz":
                keys = list(blob.keys())
                key = next((k for k in ("images", "x", "X", "arr_0") if k in keys), keys[0] if keys else None)
                if key is None:
                    raise CorruptDataError(f"--data {path}: an empty .npz.")
                x = _to_unit(_npz_array(blob, key, path), f"{path}[{key}]")
                y = check_labels(_npz_array(blob, "labels", path), f"{path}[labels]") if "labels" in keys else None
            else:
                x, y = _to_unit(blob, str(path)), None
        else:
            raise ParameterError(f"--data {path}: give an image folder, a .npy / .npz array or one of {BUILTIN_DATA}.")
    if len(x) < 4:
        raise ParameterError(f"--data: {len(x)} images are too few to audit with; give at least 4.")
    if labels:
        return x, y
    return x


class ImageModel(nn.Module):
    """The user's module seen as ``N×d`` (or images) → ``N×m``: inputs cast to its dtype and device, the output
    flattened and checked. ``in_shape`` is the per-image shape it takes."""

    def __init__(self, module: nn.Module, in_shape: tuple[int, ...], flatten: bool = True):
        super().__init__()
        self.module, self.in_shape, self.flatten = module, tuple(int(v) for v in in_shape), flatten

    def _dtype_device(self):
        for t in list(self.module.parameters()) + list(self.module.buffers()):
            if t.is_floating_point():
                return t.dtype, t.device
        return torch.float32, torch.device("cpu")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        dtype, device = self._dtype_device()
        n = x.shape[0]
        x = x.reshape(n, *self.in_shape).to(device=device, dtype=dtype)
        out = self.module(x)
        if isinstance(out, (tuple, list)) and out and isinstance(out[0], torch.Tensor) and len(out) == 1:
            out = out[0]
        if not isinstance(out, torch.Tensor):
            raise ShapeError(f"the model returned a {type(out).__name__}, not a tensor; audit a module whose forward "
                             "returns the embedding (or the logits) as one tensor.")
        cut = torch.is_grad_enabled() and x.requires_grad and not out.requires_grad  # no_grad, detach, NumPy inside
        if cut or not out.is_floating_point():
            # integer codes as floats; either tied to the input with a zero derivative (what autograd says of a step
            # function) so that attacks and timings run; the path check then finds the output moving where autograd
            # sees no change, and the bounds are 0 (reconguard.bounds.differentiable)
            out = out.to(dtype) + 0.0 * x.reshape(n, -1).sum(1).reshape(n, *([1] * (out.dim() - 1)))
        return out.reshape(n, -1) if self.flatten else out


def probe(model: nn.Module, images: torch.Tensor, flatten: bool = True) -> tuple[ImageModel, int]:
    """Wrap ``model`` for ``images``' shape, run it once (clear errors for a wrong input shape or a non-tensor
    output) and return the wrapper and its output size per image ``m``."""
    wrapped = ImageModel(model, tuple(images.shape[1:]), flatten)
    try:
        with torch.no_grad():
            out = wrapped(images[:2])
    except ShapeError:
        raise
    except Exception as exc:  # noqa: BLE001 — any failure of the user's forward on these images
        raise ShapeError(f"the model does not run on images of shape {tuple(images.shape[1:])} "
                         f"({type(exc).__name__}: {str(exc).splitlines()[0][:160]}).") from None
    if not torch.isfinite(out.float()).all():
        raise CorruptDataError("the model's output has NaN or infinite values on the data.")
    return wrapped, int(out[0].numel())
