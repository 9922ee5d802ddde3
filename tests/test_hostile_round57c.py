"""Hostile round 57c: the eager Tensor under mutation, aliasing and NumPy interop, each
case compared with the same PyTorch program."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from primitives.tensor import numpy as tnp
from primitives.tensor.eager.frontend import tensor
from primitives.tensor.eager.grad_mode import no_grad
from primitives.tensor.eager.strategy import checkpoint_strategy

X0 = np.linspace(0.1, 1.0, 200)          # 1600 bytes: above SMALL_BYTES, so "balanced" drops


def _write(y, how: str) -> None:
    if how == "no_grad +=":
        with no_grad():
            y += 1.0
    elif how == "data +=":
        y.data += 1.0
    elif how == "data[:] =":
        y.data[:] = y.data + 1.0
    else:
        y.data = y.data + 1.0


# Under the "balanced" strategy, an op reading a computed tensor whose values were changed
# (t.data, a no_grad update) dropped them and recomputed the old ones for backward: a
# silently wrong gradient (cos of the old y here).
@pytest.mark.parametrize("strategy", ["none", "balanced"])
@pytest.mark.parametrize("how", ["no_grad +=", "data +=", "data[:] =", "data ="])
def test_a_computed_tensor_written_before_use_is_differentiated_at_its_new_values(strategy,
                                                                                 how):
    with checkpoint_strategy(strategy):
        x = tensor(X0, requires_grad=True)
        y = x * 3.0
        _write(y, how)
        g = tnp.sum(tnp.sin(y)).backward().grad(x)
    xt = torch.tensor(X0, requires_grad=True)
    yt = xt * 3.0
    with torch.no_grad():
        yt += 1.0
    torch.sin(yt).sum().backward()
    np.testing.assert_allclose(g, xt.grad.numpy(), rtol=1e-12)
