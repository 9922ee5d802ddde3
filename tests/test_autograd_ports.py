"""Programs written for HIPS autograd run on tidu with only their imports changed, and give
autograd's numbers.

Each program below is autograd code (``import autograd.numpy as np``, ``autograd.scipy``,
``autograd.misc.optimizers``, ``from autograd import grad``), written for this test (not
copied from autograd's examples), covering one kind of model each: logistic regression
trained with Adam, a Gaussian-process marginal likelihood, a Gaussian mixture, a small RNN,
black-box variational inference, and an ODE model. The test runs it as written under
autograd (when installed) and with :data:`IMPORTS` swapped to tidu's modules, and compares
what it computes.
"""

from __future__ import annotations

import numpy as np
import pytest

IMPORTS = [                                  # autograd's module -> tidu's, longest first
    ("autograd.numpy.random", "primitives.tensor.random"),
    ("autograd.numpy", "primitives.tensor"),
    ("autograd.scipy", "primitives.tensor.scipy"),
    ("autograd.misc.optimizers", "primitives.tensor.misc.optimizers"),
    ("autograd.misc", "primitives.tensor.misc"),
    ("autograd.builtins", "primitives.tensor.builtins"),
    ("from autograd import", "from primitives.tensor import"),
]

LOGISTIC_REGRESSION = """
import autograd.numpy as np
import autograd.numpy.random as npr
from autograd import grad
from autograd.misc.optimizers import adam

npr.seed(0)
X = npr.randn(40, 3)
y = (X @ np.array([1.5, -2.0, 0.5]) + 0.3 * npr.randn(40) > 0).astype(float)

def loss(params, i):
    logits = X @ params["w"] + params["b"]
    return np.mean(np.logaddexp(0.0, logits) - y * logits) + 0.01 * np.sum(params["w"] ** 2)

params = adam(grad(loss), {"w": np.zeros(3), "b": np.array(0.0)}, num_iters=150,
              step_size=0.05)
result = [params["w"], params["b"], loss(params, 0)]
"""

GAUSSIAN_PROCESS = """
import autograd.numpy as np
import autograd.numpy.random as npr
from autograd import grad
from autograd.scipy.stats import multivariate_normal

npr.seed(1)
X = npr.rand(12, 1) * 4
y = np.sin(X[:, 0]) + 0.1 * npr.randn(12)

def neg_log_marginal(params):
    log_amp, log_len, log_noise = params
    d2 = (X - X.T) ** 2
    K = np.exp(2 * log_amp) * np.exp(-0.5 * d2 / np.exp(2 * log_len)) \\
        + (np.exp(2 * log_noise) + 1e-6) * np.eye(len(X))
    return -multivariate_normal.logpdf(y, np.zeros(len(X)), K)

p0 = np.array([0.1, -0.2, -1.0])
result = [neg_log_marginal(p0), grad(neg_log_marginal)(p0)]
"""

GAUSSIAN_MIXTURE = """
import autograd.numpy as np
import autograd.numpy.random as npr
from autograd import grad
from autograd.scipy.special import logsumexp
from autograd.scipy.stats import norm
from autograd.misc import flatten

npr.seed(2)
data = np.concatenate([npr.randn(30) - 2, npr.randn(20) * 0.5 + 1.5])

def log_likelihood(params):
    log_weights = params["logits"] - logsumexp(params["logits"])
    scales = np.exp(params["log_scales"])
    per_point = norm.logpdf(data[:, None], params["means"], scales) + log_weights
    return np.sum(logsumexp(per_point, axis=1))

params = {"logits": np.zeros(2), "means": np.array([-1.0, 1.0]),
          "log_scales": np.zeros(2)}
flat, unflatten = flatten(params)
result = [log_likelihood(params), grad(lambda v: log_likelihood(unflatten(v)))(flat)]
"""

RNN = """
import autograd.numpy as np
import autograd.numpy.random as npr
from autograd import grad
from autograd.scipy.special import logsumexp

npr.seed(3)
sequence = npr.randint(0, 4, size=8)
inputs = np.eye(4)[sequence]

def neg_log_likelihood(params):
    hidden = np.zeros(5)
    total = 0.0
    for t in range(len(sequence) - 1):
        hidden = np.tanh(inputs[t] @ params["w_in"] + hidden @ params["w_h"] + params["b"])
        logits = hidden @ params["w_out"]
        total = total - (logits[sequence[t + 1]] - logsumexp(logits))
    return total

params = {"w_in": 0.3 * npr.randn(4, 5), "w_h": 0.3 * npr.randn(5, 5), "b": np.zeros(5),
          "w_out": 0.3 * npr.randn(5, 4)}
g = grad(neg_log_likelihood)(params)
result = [neg_log_likelihood(params), g["w_in"], g["w_h"], g["b"], g["w_out"]]
"""

BLACK_BOX_VI = """
import autograd.numpy as np
import autograd.numpy.random as npr
from autograd import grad
from autograd.scipy.stats import norm, t

def log_density(z):
    return t.logpdf(z[:, 0], 3.0, 1.0, 0.5) + norm.logpdf(z[:, 1], z[:, 0] * 0.5, 1.0)

def elbo(params, eps):
    mean, log_std = params[:2], params[2:]
    z = mean + np.exp(log_std) * eps
    entropy = np.sum(log_std) + np.log(2 * np.pi * np.e)
    return np.mean(log_density(z)) + entropy

npr.seed(4)
eps = npr.randn(64, 2)
params = np.array([0.5, -0.5, -0.3, 0.1])
result = [elbo(params, eps), grad(elbo)(params, eps)]
"""

ODE_MODEL = """
import autograd.numpy as np
from autograd import grad
from autograd.builtins import tuple
from autograd.scipy.integrate import odeint

times = np.linspace(0.0, 2.0, 5)
observed = np.exp(-0.7 * times) * 2.0

def dynamics(y, time, rate):
    return -rate * y

def loss(rate):
    predicted = odeint(dynamics, np.array([2.0]), times, tuple((rate,)))[:, 0]
    return np.sum((predicted - observed) ** 2)

result = [loss(np.array(0.4)), grad(loss)(np.array(0.4))]
"""

PROGRAMS = {"logistic regression (adam)": LOGISTIC_REGRESSION,
            "gaussian process": GAUSSIAN_PROCESS, "gaussian mixture": GAUSSIAN_MIXTURE,
            "rnn": RNN, "black-box vi": BLACK_BOX_VI, "ode model": ODE_MODEL}


# SciPy's LSODA (autograd's odeint) and tidu's Dormand-Prince agree to their tolerances only
RTOL = {"ode model": 1e-6}


def ported(source: str) -> str:
    for theirs, ours in IMPORTS:
        source = source.replace(theirs, ours)
    return source


def run(source: str) -> list:
    namespace: dict = {}
    exec(compile(source, "<program>", "exec"), namespace)           # noqa: S102
    return [np.asarray(value, dtype=float) for value in namespace["result"]]


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_an_autograd_program_with_its_imports_swapped_gives_autograd_numbers(name):
    source = PROGRAMS[name]
    ours = run(ported(source))
    assert all(np.isfinite(value).all() for value in ours)
    pytest.importorskip("autograd", reason="autograd is the oracle: pip install autograd")
    theirs = run(source)
    assert len(ours) == len(theirs)
    for mine, reference in zip(ours, theirs):
        np.testing.assert_allclose(mine, reference, rtol=RTOL.get(name, 1e-9), atol=1e-11,
                                   err_msg=name)


def test_the_swap_changes_only_imports():
    for source in PROGRAMS.values():
        swapped = ported(source)
        changed = [(a, b) for a, b in zip(source.splitlines(), swapped.splitlines()) if a != b]
        assert changed and all(a.startswith(("import ", "from ")) for a, _ in changed)
        assert "autograd" not in swapped
