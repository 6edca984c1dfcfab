"""DP-SGD through Opacus, as a ``fit`` defense (the InstaHide paper's section 5.2 baseline).

``DPSGD(target_epsilon=8, delta=1e-5, max_grad_norm=1.0, epochs=…)`` picks the noise multiplier
with Opacus' accountant for the target ε at the loader's sampling rate, wraps the model and
optimiser with ``PrivacyEngine.make_private``, samples batches by Poisson sampling every epoch, and
records the ε spent so far (Opacus' RDP accountant) in each epoch's history.
"""

from __future__ import annotations

import math

from ..errors import ParameterError


class DPSGD:
    def __init__(self, target_epsilon: float = 8.0, delta: float = 1e-5, max_grad_norm: float = 1.0,
                 epochs: int = 10, batch_size: int = 128, seed: int = 0):
        try:
            import opacus  # noqa: F401
        except ImportError as exc:  # pragma: no cover — opacus is in the test extra
            raise ImportError("DP-SGD needs opacus: pip install 'reconguard[dp]'") from exc
        if target_epsilon <= 0 or not 0 < delta < 1:
            raise ParameterError("DP-SGD needs target_epsilon > 0 and 0 < delta < 1.")
        self.target_epsilon, self.delta, self.max_grad_norm = float(target_epsilon), float(delta), float(max_grad_norm)
        self.epochs, self.batch_size, self.seed = int(epochs), int(batch_size), seed
        self.engine = None
        self.noise_multiplier = None

    def wrap_model(self, model, optimizer, train):
        from opacus import PrivacyEngine
        from opacus.accountants.utils import get_noise_multiplier
        from opacus.validators import ModuleValidator

        errors = ModuleValidator.validate(model, strict=False)
        if errors:
            raise ParameterError(f"this model cannot be trained with DP-SGD: {errors[0]} "
                                 "(replace BatchNorm by GroupNorm, e.g. opacus.validators.ModuleValidator.fix).")
        sample_rate = self.batch_size / len(train)
        steps = self.epochs * math.ceil(len(train) / self.batch_size)  # what DPDataLoader will take
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

        return DPDataLoader.from_data_loader(loader, generator=loader.generator)

    def after_epoch(self, epoch: int, record: dict) -> None:
        record["epsilon"] = float(self.engine.accountant.get_epsilon(delta=self.delta))
        record["noise_multiplier"] = float(self.noise_multiplier)
