"""PyTorch's ``torch.autograd`` functions for the eager ``Tensor``: ``grad`` and ``hvp``.

``grad`` is ``torch.autograd.grad``: the gradients of some outputs with respect
to some inputs, returned (never accumulated into ``.grad``), with
``create_graph=True`` as ``Tensor``s whose history records the backward work,
so that they can be differentiated again. ``hvp`` is a Hessian-vector product
by forward over reverse on the recorded trace (:func:`tidu.eager.try_hvp`):
one forward-mode sweep and one reverse sweep, no second recording.

>>> import numpy as np
>>> from primitives import tensor as tnp
>>> x = tnp.tensor([1.0, 2.0], requires_grad=True)
>>> loss = tnp.sum(x ** 3)
>>> (g,) = grad(loss, x, create_graph=True)        # 3 x^2, with history
>>> (h,) = grad(tnp.sum(g), x)                     # 6 x: double backward
>>> h
tensor([ 6., 12.])
>>> hvp(loss, x, np.array([1.0, -1.0]))            # diag(6 x) v
array([  6., -12.])

Complex inputs follow tidu's convention (the gradient is the adjoint under
``Re<a, b>``, as in PyTorch): for a real loss of ``z``, ``hvp`` gives the real
Hessian in ``(Re z, Im z)`` applied to ``(Re v, Im v)``, packed as complex.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from tidu.eager import try_hvp
from primitives.tensor.backends import NUMPY, library_of
from primitives.tensor.core import dtype_of, shape_of
from primitives.tensor.eager.frontend import (EXECUTOR, Tensor, backward_cotangents,
                                             in_library_of_tensor, new_tensor, reaches_a_hook,
                                             zero_gradient)
from primitives.tensor.errors import BackwardError, TensorTypeError
from primitives.tensor.transforms.fresh import fresh

__all__ = ["grad", "hvp"]


def grad(outputs: Tensor | Sequence[Tensor], inputs: Tensor | Sequence[Tensor],
         grad_outputs=None, create_graph: bool = False, retain_graph: bool | None = None,
         allow_unused: bool | None = None, only_inputs: bool = True,
         is_grads_batched: bool = False, materialize_grads: bool = False) -> tuple:
    """The gradients of ``outputs`` with respect to ``inputs``, as ``torch.autograd.grad``.

    Returns one ``Tensor`` per input: the sum over the outputs of the
    vector-Jacobian product of ``grad_outputs[i]`` (default 1, allowed for
    one-element outputs only) with ``outputs[i]``. ``inputs`` may be leaves or
    computed tensors; each must require grad. ``.grad`` is left unchanged.

    - ``create_graph=True``: the backward work is recorded, so the gradients
      are ``Tensor``s with history (differentiate them again for higher order),
      and a ``grad_outputs`` entry with history keeps it.
    - ``allow_unused=False``: an input the outputs do not depend on raises
      :class:`BackwardError`; with ``True`` its gradient is ``None``. An input
      they reach only through ops of zero derivative (``sign``, ``round``) is
      used: its gradient is zeros, as in PyTorch. One they reach only through a
      comparison (``x > 0``: a boolean, recorded as a constant) counts as unused,
      where PyTorch gives zeros in some cases (the mask in a ReLU's derivative).
    - ``materialize_grads=True``: an unused input's gradient is zeros, not ``None``
      (``allow_unused`` then defaults to ``True``; ``False`` with it is an error, as
      in PyTorch).
    - ``retain_graph`` is accepted for PyTorch compatibility: tidu's backward
      never frees the recording, so it may always run again. ``only_inputs`` too
      (PyTorch ignores it); ``is_grads_batched=True`` is refused (vmap a
      functional ``tnp.vjp`` instead).

    (Positionally the fourth argument is ``create_graph``, not PyTorch's ``retain_graph``.)
    """
    if materialize_grads and allow_unused is False:
        raise BackwardError("grad: materialize_grads=True gives zeros for unused inputs, and "
                            "allow_unused=False refuses them; pass allow_unused=True or leave it "
                            "out")
    if allow_unused is None:
        allow_unused = materialize_grads
    if is_grads_batched:
        raise BackwardError("grad: is_grads_batched=True is not supported; map tnp.vjp over the "
                            "batch of grad_outputs with tnp.vmap instead")
    outputs = _tensors(outputs, "grad", "outputs")
    inputs = _tensors(inputs, "grad", "inputs")
    seeds = _grad_outputs(grad_outputs, len(outputs))
    for position, t in enumerate(inputs):
        if not t.requires_grad:
            raise BackwardError(f"grad: inputs[{position}] does not require grad, so it has no "
                                "gradient (make it with requires_grad=True)")
    keys = [t.key for t in inputs]
    wanted = frozenset(keys)
    totals: dict = {}
    zeros: set = set()                  # inputs reached with a zero cotangent (through sign...)
    hooks_called = set() if len(outputs) > 1 else None     # each hook runs in one walk only
    for position, (output, seed) in enumerate(zip(outputs, seeds)):
        if not output.requires_grad:
            raise BackwardError(f"grad: outputs[{position}] does not require grad (no input of "
                                "the ops that made it requires grad)")
        for key, value in backward_cotangents(output, seed, wanted, create_graph,
                                              zeros, hooks_called).items():
            totals[key] = value if key not in totals else totals[key] + value
    result = []
    for position, (key, t) in enumerate(zip(keys, inputs)):
        gradient = totals.get(key)
        if gradient is None and (key in zeros or materialize_grads):
            gradient = zero_gradient(t, create_graph)
        if gradient is None and not allow_unused:
            raise BackwardError(f"grad: inputs[{position}] was not used to compute the outputs, "
                                "or only through a comparison (a mask, such as a ReLU's "
                                "derivative, which has no derivative); pass allow_unused=True "
                                "to get None for it")
        result.append(gradient if gradient is None or isinstance(gradient, Tensor)
                      else new_tensor(gradient))
    return tuple(result)


def hvp(loss: Tensor, params: Tensor | Sequence[Tensor], vectors):
    """The Hessian of the real scalar ``loss`` with respect to ``params``, times ``vectors``.

    ``params`` are leaf tensors that require grad (one, or a sequence), and
    ``vectors`` one array of each one's shape (one, or a sequence). Returns
    ``H v`` as NumPy arrays in the same structure: the ``params`` block of the
    Hessian applied to the stacked vectors. Computed on ``loss``'s recorded
    trace by forward over reverse (:func:`tidu.eager.try_hvp`), at the cost of
    about three backward passes; ``.grad`` is left unchanged.
    """
    single = isinstance(params, Tensor)
    params = _tensors(params, "hvp", "params")
    vectors = [vectors] if single else _sequence(vectors, "hvp", "vectors")
    if len(vectors) != len(params):
        raise BackwardError(f"hvp: {len(vectors)} vectors for {len(params)} params")
    if not isinstance(loss, Tensor) or not loss.requires_grad:
        raise BackwardError("hvp: loss must be a Tensor computed from params that require grad")
    if loss.size != 1 or loss.dtype.kind == "c":
        raise BackwardError(f"hvp: loss must be a real scalar, got {loss.dtype} of shape "
                            f"{loss.shape}")
    if reaches_a_hook(loss):
        raise BackwardError("hvp: the loss depends on a tensor with a hook (register_hook); "
                            "hvp runs forward over reverse on the recorded ops, which cannot "
                            "run a Python hook: take grad(..., create_graph=True) and "
                            "differentiate it again (a double backward runs hooks)")
    tangents = {}
    for position, (p, v) in enumerate(zip(params, vectors)):
        if not p.requires_grad or p._trace is not None:
            raise BackwardError(f"hvp: params[{position}] must be a leaf tensor that requires "
                                "grad")
        if p.key in tangents:
            raise BackwardError(f"hvp: params[{position}] appears twice")
        tangents[p.key] = _vector(v, p, position)
    _, products = try_hvp(loss.key, loss._trace, np.ones(loss.shape, loss.dtype), tangents,
                          EXECUTOR, keep=tangents.keys(), leaf_cotangents=False)
    # one product can reach several params (both of x + y): no result shares memory with
    # another, a param's data or a vector
    result = tuple(fresh([products.get(p.key) if p.key in products else
                          library_of(p._data).xp.zeros_like(p._data) for p in params],
                         held=[p._data for p in params] + list(tangents.values())))
    return result[0] if single else result


def _vector(v, p: Tensor, position: int) -> np.ndarray:
    """``v`` as a tangent of ``p``: an array of its shape and dtype."""
    if isinstance(v, Tensor):
        v = v.detach().data
    array = v if library_of(v) is not NUMPY else np.asarray(v)
    if shape_of(array) != p.shape:
        raise BackwardError(f"hvp: vectors[{position}] has shape {shape_of(array)}, params"
                            f"[{position}] {p.shape}")
    dtype = dtype_of(array)
    if dtype.kind not in "biufc" or (dtype.kind == "c" and p.dtype.kind != "c"):
        raise BackwardError(f"hvp: vectors[{position}] of dtype {dtype} for params"
                            f"[{position}] of dtype {p.dtype}")
    if type(array) is np.ndarray and type(p._data) is np.ndarray:
        return np.array(array, dtype=p.dtype)
    try:
        array = in_library_of_tensor(p, array)
    except TensorTypeError as error:
        raise BackwardError(f"hvp: vectors[{position}] is {error}") from None
    return library_of(array).xp.astype(array, p.dtype)


def _sequence(value, function: str, argument: str) -> list:
    if isinstance(value, (list, tuple)):
        return list(value)
    raise BackwardError(f"{function}: {argument} must be a Tensor or a list or tuple of them, "
                        f"got {type(value).__name__}")


def _tensors(value, function: str, argument: str) -> list:
    """``value`` as a list of Tensors: one Tensor, or a list or tuple of them."""
    tensors = [value] if isinstance(value, Tensor) else _sequence(value, function, argument)
    for position, t in enumerate(tensors):
        if not isinstance(t, Tensor):
            raise BackwardError(f"{function}: {argument}[{position}] is a {type(t).__name__}, "
                                "not a Tensor")
    return tensors


def _grad_outputs(grad_outputs, count: int) -> list:
    """One seed per output (``None``: 1 for a one-element output)."""
    if grad_outputs is None:
        return [None] * count
    if not isinstance(grad_outputs, (list, tuple)):
        grad_outputs = [grad_outputs]
    if len(grad_outputs) != count:
        raise BackwardError(f"grad: {len(grad_outputs)} grad_outputs for {count} outputs")
    return list(grad_outputs)
