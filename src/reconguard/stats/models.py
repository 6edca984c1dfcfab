"""OLS with robust errors, Beta regression, Wilson intervals, cost of privacy, treatment effects — a thin
layer over statsmodels (``OLS(...).fit(cov_type, use_t=True)``, ``othermod.betareg.BetaModel``,
``proportion_confint(method="wilson")``): the input checks, the names and the result dataclasses are
reconguard's; the estimates are statsmodels'. A design that already has a constant column (statsmodels
users pass ``add_constant(X)``) is accepted as it is."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy import special, stats

from ..errors import ParameterError, ShapeError, UnknownOptionError
from ..results import Result


def _design(y, X, constant: bool, names):
    y = np.asarray(y, dtype=np.float64).reshape(-1)
    X = np.asarray(X, dtype=np.float64)
    if X.ndim == 1:
        X = X[:, None]
    if X.shape[0] != y.shape[0]:
        raise ShapeError(f"{y.shape[0]} responses but {X.shape[0]} rows of X.")
    if not (np.isfinite(y).all() and np.isfinite(X).all()):
        raise ParameterError("y and X must be finite (no NaN / inf).")
    names = list(names) if names is not None else [f"x{i + 1}" for i in range(X.shape[1])]
    if len(names) != X.shape[1]:
        raise ShapeError(f"{len(names)} names for {X.shape[1]} columns of X.")
    # add_constant(X): a column of ones beside real predictors (a lone constant column is a mistake, and
    # with the intercept added it is reported as rank deficient)
    has_const = X.shape[1] >= 2 and X.shape[0] > 0 and bool(np.any(np.all(X == 1.0, axis=0)))
    if constant and not has_const:
        X = np.column_stack([np.ones(len(y)), X])
        names = ["const"] + names
    elif has_const:  # given with add_constant(X): name the constant column
        j = int(np.flatnonzero(np.all(X == 1.0, axis=0))[0])
        if names[j].startswith("x"):
            names[j] = "const"
    if X.shape[0] <= X.shape[1]:
        raise ParameterError(f"{X.shape[0]} observations cannot fit {X.shape[1]} parameters (need more rows).")
    if np.linalg.matrix_rank(X) < X.shape[1]:
        raise ParameterError("X is rank deficient (a column is constant or a combination of others).")
    return y, X, names


@dataclass(frozen=True)
class OLSResult(Result):
    names: list
    params: np.ndarray
    bse: np.ndarray
    tvalues: np.ndarray
    pvalues: np.ndarray
    ci: np.ndarray  # k×2 at `level`
    level: float
    df_resid: int
    rsquared: float
    rsquared_adj: float
    mae: float
    cov_type: str
    nobs: int
    fitted: np.ndarray = field(default=None)

    def conf_int(self, alpha: float = 0.05) -> np.ndarray:
        q = stats.t.ppf(1 - alpha / 2, self.df_resid)
        return np.column_stack([self.params - q * self.bse, self.params + q * self.bse])


def ols(y, X, cov: str = "HC2", *, constant: bool = True, names=None, level: float = 0.95) -> OLSResult:
    """OLS with robust covariance ``cov`` ∈ {nonrobust, HC0, HC1, HC2, HC3} and t-based inference."""
    import statsmodels.api as sm

    y, X, names = _design(y, X, constant, names)
    if cov not in ("nonrobust", "HC0", "HC1", "HC2", "HC3"):
        raise UnknownOptionError(f"cov must be nonrobust, HC0, HC1, HC2 or HC3; got {cov!r}.")
    fit = sm.OLS(y, X).fit(cov_type=cov, use_t=True)
    ci = fit.conf_int(alpha=1 - level)
    return OLSResult(names, fit.params, fit.bse, fit.tvalues, fit.pvalues, ci, level, int(fit.df_resid),
                     float(fit.rsquared), float(fit.rsquared_adj), float(np.abs(fit.resid).mean()), cov, int(fit.nobs),
                     fit.fittedvalues)


@dataclass(frozen=True)
class BetaResult(Result):
    names: list  # mean-model names, then "precision"
    params: np.ndarray  # β (logit scale) then log φ
    bse: np.ndarray
    zvalues: np.ndarray
    pvalues: np.ndarray
    ci: np.ndarray
    level: float
    llf: float
    pseudo_rsquared: float
    mae: float
    nobs: int
    squeezed: bool  # y had 0s or 1s and was moved inside (0, 1) by (y(n − 1) + ½)/n
    cov_params: np.ndarray = field(default=None)
    fitted: np.ndarray = field(default=None)

    def conf_int(self, alpha: float = 0.05) -> np.ndarray:
        q = stats.norm.ppf(1 - alpha / 2)
        return np.column_stack([self.params - q * self.bse, self.params + q * self.bse])

    @property
    def phi(self) -> float:
        return float(np.exp(self.params[-1]))


def beta_regression(y, X, *, constant: bool = True, names=None, level: float = 0.95) -> BetaResult:
    """Beta regression (Ferrari & Cribari-Neto 2004): logit(μ) = Xβ, log φ = γ, by maximum likelihood."""
    from statsmodels.othermod.betareg import BetaModel

    y, X, names = _design(y, X, constant, names)
    if (y < 0).any() or (y > 1).any():
        raise ParameterError("beta regression needs responses in [0, 1] (proportions such as AttAcc@1).")
    n, k = X.shape
    squeezed = bool(((y == 0) | (y == 1)).any())
    if squeezed:
        y = (y * (n - 1) + 0.5) / n  # Smithson & Verkuilen (2006)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # statsmodels' convergence chatter; checked below
        fit = BetaModel(y, X).fit(disp=0, maxiter=5000)
    theta = np.asarray(fit.params, dtype=np.float64)
    if not np.all(np.isfinite(theta)):
        raise ParameterError("the Beta regression did not converge (non-finite estimates); check the data.")
    try:
        cov = np.asarray(fit.cov_params(), dtype=np.float64)
    except (ValueError, np.linalg.LinAlgError) as exc:  # e.g. every response equal: no curvature to invert
        raise ParameterError(f"the Beta regression has no covariance for its estimates ({exc}); the responses are "
                             "too few or too alike to fit.") from None
    if not np.all(np.isfinite(cov)) or (np.diag(cov) < 0).any():
        raise ParameterError("the Beta regression's covariance is not finite; the responses are too few or too "
                             "alike to fit.")
    bse = np.sqrt(np.diag(cov))
    z = theta / bse
    q = stats.norm.ppf(0.5 + level / 2)
    eta = X @ theta[:k]
    fitted = special.expit(eta)
    pseudo = float(np.corrcoef(eta, special.logit(y))[0, 1] ** 2) if k > 1 else 0.0
    return BetaResult(names + ["precision"], theta, bse, z, 2 * stats.norm.sf(np.abs(z)),
                      np.column_stack([theta - q * bse, theta + q * bse]), level, float(fit.llf), pseudo,
                      float(np.abs(y - fitted).mean()), n, squeezed, cov, fitted)


def wilson_interval(successes: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion."""
    if n <= 0:
        raise ParameterError(f"wilson_interval needs n > 0 trials, got {n}.")
    if not 0 <= successes <= n:
        raise ParameterError(f"successes must be in [0, n={n}], got {successes}.")
    from statsmodels.stats.proportion import proportion_confint

    lo, hi = proportion_confint(successes, n, alpha=1 - level, method="wilson")
    p = successes / n
    lo = 0.0 if successes == 0 else max(0.0, min(p, float(lo)))  # exact ends at 0 / n, no rounding past p̂
    hi = 1.0 if successes == n else min(1.0, max(p, float(hi)))
    return lo, hi


@dataclass(frozen=True)
class CostOfPrivacy(Result):
    predictor: str
    gamma: float  # pp of robust accuracy per 1 pp of leakage
    se: float
    ci: tuple
    mean_leakage: float


def cost_of_privacy(result: BetaResult, predictor: str, mean_leakage: float | None = None,
                    level: float = 0.95) -> CostOfPrivacy:
    """γ = 1 / (β μ̄ (1 − μ̄)), SE by the delta method with μ̄ fixed (appendix G)."""
    if predictor not in result.names:
        raise UnknownOptionError(f"no predictor {predictor!r}; the model has {result.names[:-1]}.")
    i = result.names.index(predictor)
    mu = float(np.mean(result.fitted)) if mean_leakage is None else float(mean_leakage)
    b, se_b = float(result.params[i]), float(result.bse[i])
    s = mu * (1 - mu)
    gamma = 1 / (b * s)
    se = se_b / (b * b * s)
    q = stats.norm.ppf(0.5 + level / 2)
    return CostOfPrivacy(predictor, gamma, se, (gamma - q * se, gamma + q * se), mu)


@dataclass(frozen=True)
class TreatmentEffect(Result):
    ols_ate: float
    ols_ci: tuple
    ols_p: float
    beta_tau: float
    beta_tau_ci: tuple
    odds_ratio: float
    odds_ratio_ci: tuple
    beta_z: float
    beta_p: float
    mu_control: float
    mu_treated: float
    delta: float
    delta_ci: tuple
    n_control: int
    n_treated: int
    squeezed: bool


def treatment_effect(y, treated, level: float = 0.95) -> TreatmentEffect:
    """Appendix H: ``y = α + τ D`` by OLS (HC2, t) and by Beta regression (odds ratio, Δ by delta method)."""
    d = np.asarray(treated, dtype=np.float64).reshape(-1)
    if set(np.unique(d)) - {0.0, 1.0} or len(np.unique(d)) != 2:
        raise ParameterError("treated must be a 0/1 indicator with both groups present.")
    o = ols(y, d, "HC2", names=["treatment"], level=level)
    b = beta_regression(y, d, names=["treatment"], level=level)
    alpha, tau = b.params[0], b.params[1]
    mu0, mu1 = special.expit(alpha), special.expit(alpha + tau)
    g = np.array([mu1 * (1 - mu1) - mu0 * (1 - mu0), mu1 * (1 - mu1)])
    se_delta = float(np.sqrt(g @ b.cov_params[:2, :2] @ g))
    q = stats.norm.ppf(0.5 + level / 2)
    delta = float(mu1 - mu0)
    return TreatmentEffect(float(o.params[1]), tuple(o.ci[1]), float(o.pvalues[1]), float(tau), tuple(b.ci[1]),
                           float(np.exp(tau)), tuple(np.exp(b.ci[1])), float(b.zvalues[1]), float(b.pvalues[1]),
                           float(mu0), float(mu1), delta, (delta - q * se_delta, delta + q * se_delta),
                           int((d == 0).sum()), int((d == 1).sum()), b.squeezed)
