"""PyTorch's grad mode for the eager ``Tensor``: ``no_grad``, ``enable_grad``,
``set_grad_enabled`` and ``is_grad_enabled``.

In a ``no_grad()`` block (this thread's) ops on tensors that require grad run without
being recorded: their results require no grad and have no history. ``x op= y`` on a
tensor there updates its values in place, as ``x.data op= y`` does (ops recorded
before keep the old values), so an optimizer step written PyTorch's way,
``p -= lr * p.grad``, keeps ``p`` the leaf it was. The functional transforms, as
``torch.func``'s: called inside a ``no_grad`` block they still differentiate, and a
``no_grad`` block inside the function they trace makes constants there.

>>> import numpy as np
>>> from primitives.tensor.eager.frontend import tensor
>>> w = tensor(np.array([1.0, 2.0]), requires_grad=True)
>>> (w * w).sum().backward().grad(w)
array([2., 4.])
>>> with no_grad():
...     w -= 0.25 * w.grad
...     y = w * 3
>>> w, w.is_leaf, y.requires_grad
(tensor([0.5, 1. ], requires_grad=True), True, False)

Room: the eager package; imports the tensor set's errors and the mode's state, which
:mod:`primitives.tensor.core` keeps for the transforms' traces.
"""

from __future__ import annotations

import functools
import inspect
from typing import Callable

import numpy as np

from primitives.tensor.core import grad_mode as mode
from primitives.tensor.errors import TensorTypeError


def is_grad_enabled() -> bool:
    """Whether ops on tensors that require grad are recorded in this thread.

    >>> is_grad_enabled()
    True
    """
    return mode.enabled


class _Block:
    """A block (``with``) or a decorated function in which grad mode is ``enabled``; a bare
    ``@no_grad`` (no call) decorates too, as PyTorch's."""

    enabled = True

    def __new__(cls, f: Callable | None = None):
        if f is None:
            return super().__new__(cls)
        return cls()(f)                          # @no_grad without the parentheses

    def __enter__(self) -> None:
        if mode.stack is None:
            mode.stack = []
        mode.stack.append(mode.enabled)
        mode.enabled = self.enabled

    def __exit__(self, *exc_info) -> bool:
        mode.enabled = mode.stack.pop()
        return False

    def __call__(self, f: Callable) -> Callable:
        return _in_blocks(f, type(self), type(self).__name__)


def _in_blocks(f: Callable, block: Callable, name: str) -> Callable:
    """``f`` run inside ``block()``; a generator function's body too, each time it resumes
    (not only while the generator is made), as PyTorch's decorators do."""
    if not callable(f):
        raise TensorTypeError(f"{name} decorates a function; got {type(f).__name__} (use it "
                              f"as a block: with {name}(...): ...)")
    if not inspect.isgeneratorfunction(f):
        @functools.wraps(f)
        def in_block(*args, **kwargs):
            with block():
                return f(*args, **kwargs)
        return in_block

    @functools.wraps(f)
    def generator_in_block(*args, **kwargs):
        generator = f(*args, **kwargs)
        try:
            with block():
                response = generator.send(None)
            while True:
                try:
                    request = yield response
                except GeneratorExit:
                    with block():
                        generator.close()
                    raise
                except BaseException as error:
                    with block():
                        response = generator.throw(error)
                else:
                    with block():
                        response = generator.send(request)
        except StopIteration as stop:
            return stop.value
    return generator_in_block


class no_grad(_Block):
    """Ops run in this block (or decorated function), in this thread, are not recorded.

    >>> from primitives.tensor.eager.frontend import tensor
    >>> x = tensor([1.0], requires_grad=True)
    >>> with no_grad():
    ...     (x * 2).requires_grad
    False
    >>> no_grad()(lambda: (x * 2).requires_grad)()
    False
    """

    enabled = False


class enable_grad(_Block):
    """Ops run in this block (or decorated function) are recorded, inside ``no_grad`` too.

    >>> from primitives.tensor.eager.frontend import tensor
    >>> x = tensor([1.0], requires_grad=True)
    >>> with no_grad():
    ...     with enable_grad():
    ...         (x * 2).requires_grad
    True
    """

    enabled = True


class set_grad_enabled(_Block):
    """Set grad mode in this thread to ``enabled`` now; as a block (or decorator), only for
    the block (or the decorated function's calls), as ``torch.set_grad_enabled``.

    >>> set_grad_enabled(False); is_grad_enabled()
    <...set_grad_enabled object at ...>
    False
    >>> set_grad_enabled(True); is_grad_enabled()
    <...set_grad_enabled object at ...>
    True
    >>> with set_grad_enabled(False):
    ...     is_grad_enabled()
    False
    """

    def __new__(cls, enabled: bool):
        return object.__new__(cls)

    def __init__(self, enabled: bool) -> None:
        if type(enabled) is not bool and not isinstance(enabled, np.bool_):
            # (bool("no") is True; PyTorch refuses anything but a bool too)
            raise TensorTypeError(f"set_grad_enabled: enabled must be a bool, got "
                                  f"{type(enabled).__name__} {enabled!r}")
        self.enabled = bool(enabled)
        self._previous = mode.enabled
        mode.enabled = self.enabled             # at once: the call alone sets the mode

    def __enter__(self) -> None:
        if mode.stack is None:
            mode.stack = []
        mode.stack.append(self._previous)       # restored at the block's end

    def __call__(self, f: Callable) -> Callable:
        mode.enabled = self._previous           # a decorator: the mode only in its calls
        enabled = self.enabled
        return _in_blocks(f, lambda: set_grad_enabled(enabled), "set_grad_enabled")
