"""Hostile round 55b: the functional transforms (grad, jvp, vjp, Jacobians, vmap, jit,
custom rules) against JAX, finite differences and their own error contract."""

from __future__ import annotations

import numpy as np
import pytest

import tidu
from primitives import tensor as tnp


@pytest.mark.parametrize("transform", [tnp.grad, tnp.value_and_grad])
@pytest.mark.parametrize("result", [
    lambda a: (tnp.sum(a), a),          # forgot has_aux=True
    lambda a: [tnp.sum(a)],
    lambda a: {"loss": tnp.sum(a)},
])
def test_grad_of_a_container_output_names_grad(transform, result) -> None:
    # grad of f returning a ragged tuple raised NumPy's ValueError ("setting an array
    # element with a sequence") from np.shape: no TiduError, no name of grad or f
    with pytest.raises(tidu.TiduError, match="grad: .* must return a real floating point "
                                             "scalar; it returned a (tuple|list|dict)"):
        transform(result)(np.arange(3.0))
