"""Statistics of the privacy–robustness analysis (AT-AT paper section 4, appendices G, H, I.3).

* :func:`ols` — least squares with HC0–HC3 robust errors (HC2 by default: MacKinnon & White) and
  small-sample t intervals (``t_{0.975, n−p}``), adjusted R², MAE;
* :func:`beta_regression` — Beta(μφ, (1 − μ)φ) with logit link for μ and log link for φ, by maximum
  likelihood (exact gradient and Hessian by autograd), Wald z intervals, Ferrari–Cribari-Neto pseudo R²;
* :func:`wilson_interval` — the Wilson score interval of a proportion;
* :func:`cost_of_privacy` — γ_ε = 1 / (β_ε μ̄(1 − μ̄)) with its delta-method interval (appendix G);
* :func:`treatment_effect` — the randomised experiment of appendix H: OLS ATE (HC2, t) and the Beta
  odds ratio exp(τ) with Δ = μ₁ − μ₀ by the delta method.

Results carry statsmodels' names (``params``, ``bse``, ``pvalues``, ``conf_int``) as NumPy arrays in the
order of X's columns; their values equal statsmodels' (``tests/test_stats.py``).
"""

from .models import (BetaResult, CostOfPrivacy, OLSResult, TreatmentEffect, beta_regression, cost_of_privacy, ols,
                     treatment_effect, wilson_interval)

__all__ = ["OLSResult", "BetaResult", "CostOfPrivacy", "TreatmentEffect", "ols", "beta_regression", "wilson_interval",
           "cost_of_privacy", "treatment_effect"]
