"""DP-SGD through Opacus, as a ``fit`` defense (the InstaHide paper's section 5.2 baseline).

``DPSGD(target_epsilon=8, delta=1e-5, max_grad_norm=1.0)`` picks the noise multiplier with Opacus'
accountant for the target ε at the sampling rate of the loader ``fit`` really uses — as Opacus'
``make_private`` does, ``sample_rate = 1 / len(data_loader)`` with fit's ``batch_size`` and ``epochs``
(given to DPSGD as well, they must agree with fit's: a mismatch would misreport ε) — wraps the model
and optimiser (``GradSampleModule`` + ``DPOptimizer``, Opacus' ``ModuleValidator`` first), samples
batches by Poisson sampling every epoch (``DPDataLoader``, which refuses a loader of another batch
size), and records the ε spent so far (Opacus' RDP accountant) in each epoch's history.
"""

from __future__ import annotations

import math

from ..errors import ParameterError
from .base import Defense


class DPSGD(Defense):
    checkpoints = False  # Opacus' privacy accountant is not restored from a checkpoint
    def __init__(self, target_epsilon: float = 8.0, delta: float = 1e-5, max_grad_norm: float = 1.0,
                 epochs: int | None = None, batch_size: int | None = None, seed: int = 0):
        try:
            import opacus  # noqa: F401
        except ImportError as exc:  # pragma: no cover — opacus is in the test extra
            raise ImportError("DP-SGD needs opacus: pip install 'reconguard[dp]'") from exc
        if target_epsilon <= 0 or not 0 < delta < 1:
            raise ParameterError("DP-SGD needs target_epsilon > 0 and 0 < delta < 1.")
        self.target_epsilon, self.delta, self.max_grad_norm = float(target_epsilon), float(delta), float(max_grad_norm)
        self.epochs = None if epochs is None else int(epochs)
        self.batch_size = None if batch_size is None else int(batch_size)
        self.seed = seed
        self.engine = None
        self.noise_multiplier = None
        self.sample_rate = None

    @staticmethod
    def _agree(name: str, own, fit_value):
        if own is not None and fit_value is not None and own != fit_value:
            raise ParameterError(f"DPSGD({name}={own}) but fit trains with {name}={fit_value}: the privacy accountant "
                                 f"would report a wrong ε. Leave DPSGD's {name} unset (it takes fit's) or make them equal.")
        value = fit_value if fit_value is not None else own
        if value is None:
            raise ParameterError(f"DP-SGD needs {name}: pass it to fit (or to DPSGD).")
        return int(value)

    def wrap_model(self, model, optimizer, train, batch_size: int | None = None, epochs: int | None = None):
        from opacus import PrivacyEngine
        from opacus.accountants.utils import get_noise_multiplier
        from opacus.validators import ModuleValidator

        errors = ModuleValidator.validate(model, strict=False)
        if errors:
            raise ParameterError(f"this model cannot be trained with DP-SGD: {errors[0]} "
                                 "(replace BatchNorm by GroupNorm, e.g. opacus.validators.ModuleValidator.fix).")
        self.batch_size = self._agree("batch_size", self.batch_size, batch_size)
        self.epochs = self._agree("epochs", self.epochs, epochs)
        batches = math.ceil(len(train) / self.batch_size)
        sample_rate = 1.0 / batches  # Opacus' make_private: 1 / len(data_loader)
        steps = self.epochs * batches  # what DPDataLoader will take
        self.noise_multiplier = get_noise_multiplier(target_epsilon=self.target_epsilon, target_delta=self.delta,
                                                     sample_rate=sample_rate, steps=steps, accountant="rdp")
        self.engine = PrivacyEngine(accountant="rdp")
        self.sample_rate = sample_rate
        from opacus.optimizers import DPOptimizer
        from opacus import GradSampleModule

        gs_model = GradSampleModule(model)
        dp_opt = DPOptimizer(optimizer, noise_multiplier=self.noise_multiplier, max_grad_norm=self.max_grad_norm,
                             expected_batch_size=self.batch_size)
        dp_opt.attach_step_hook(self.engine.accountant.get_optimizer_hook_fn(sample_rate=sample_rate))
        return gs_model, dp_opt

    def wrap_loader(self, loader, epoch: int):
        from opacus.data_loader import DPDataLoader

        if loader.batch_size != self.batch_size:
            raise ParameterError(f"DP-SGD was set up for batch_size={self.batch_size}, but the loader has "
                                 f"{loader.batch_size}: ε would be misreported.")
        return DPDataLoader.from_data_loader(loader, generator=loader.generator)

    def after_epoch(self, epoch: int, record: dict) -> None:
        record["epsilon"] = float(self.engine.accountant.get_epsilon(delta=self.delta))
        record["noise_multiplier"] = float(self.noise_multiplier)
