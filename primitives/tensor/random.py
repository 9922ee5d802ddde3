"""NumPy's random numbers for models written with ``tnp``: the draws are constants.

The module-level functions are NumPy's legacy ones (``seed``, ``rand``,
``randn``, ``normal``, ``uniform``, ``choice``, ``permutation``, ``randint``,
...), with NumPy's signatures, drawing from one module-level NumPy
``RandomState`` that :func:`seed` resets, so the same seed gives the same
numbers bit for bit as ``np.random``. That state is this module's own (as
``torch.manual_seed`` or CuPy's is): ``np.random.seed`` does not reset it.
:func:`default_rng` and :class:`RandomState` make explicit generators; they are
NumPy's classes (subclasses adding the checks below), and draw what NumPy's do;
NumPy's bit generators (``PCG64``, ``MT19937``, ...) and ``SeedSequence`` are here
too, so NumPy code using ``np.random`` runs with this module in its place.

>>> import numpy as np
>>> seed(0); ours = randn(3)
>>> np.random.seed(0); theirs = np.random.randn(3)
>>> np.array_equal(ours, theirs), type(ours).__name__
(True, 'ndarray')

Draws are constants: plain NumPy arrays (or numbers), without a derivative.
Noise that should carry a derivative is written with ``tnp`` around a
constant draw (the reparameterization trick): ``mu + sigma * randn(*shape)``
differentiates in ``mu`` and ``sigma``. A distribution parameter that is a
``Tensor`` or a traced value (``normal(loc=mu)``) would lose its derivative, so
it raises :class:`~primitives.tensor.errors.TensorTypeError`; ``choice`` and
``permutation`` of a tensor or traced array select its elements with ``tnp``
indexing, so they differentiate.

Draws under ``jit`` and ``vmap`` raise :class:`TracedRandomError`. ``jit`` runs
a function's Python code once per trace: a draw there would be made once and
every call would return that same sample (and :func:`seed` or :func:`set_state`
there, or a :class:`RandomState`'s ``seed`` or ``set_state``, would set the state once,
so they raise too; copying a generator is allowed). ``vmap`` runs it once per batch: one
sample would be shared by every example. Draw outside the transformed function
and pass the sample in as an argument (for ``vmap``, with a batch axis). Under
``grad``, ``jvp``, the Jacobians and the eager ``Tensor`` the function runs at
each call, so draws are fresh, as in NumPy. (``np.random`` itself cannot be
checked: inside ``jit`` it draws once at trace time, as in JAX.)

>>> import primitives.tensor as tnp
>>> noisy = tnp.jit(lambda x: x + randn(*x.shape))
>>> noisy(np.zeros(2))
Traceback (most recent call last):
...
primitives.tensor.random.TracedRandomError: tnp.random.randn was called while jit of <lambda> ...
>>> add_noise = tnp.jit(lambda x, noise: x + noise)      # the sample as an argument
>>> add_noise(np.zeros(2), randn(2)).shape
(2,)

``shuffle`` works in place on NumPy arrays as NumPy's does; a ``Tensor`` or a
traced value cannot be changed in place (its recorded uses keep their
values), so shuffling one raises and points to ``x = permutation(x)``.
"""

from __future__ import annotations

import inspect

import numpy as np
from numpy.random import (MT19937, PCG64, PCG64DXSM, SFC64, BitGenerator, Philox,  # NumPy's
                          SeedSequence)

from primitives.tensor.numpy.indexing import take
from primitives.tensor.core import Frontend, shape_of, tracing_transform
from primitives.tensor.errors import TensorShapeError, TensorTypeError
from primitives.tensor.transforms.functional import FunctionalError

__all__ = [
    "TracedRandomError", "RandomState", "Generator", "default_rng",
    "seed", "get_state", "set_state", "shuffle", "permutation", "choice", "ranf", "sample",
    "BitGenerator", "MT19937", "PCG64", "PCG64DXSM", "Philox", "SFC64", "SeedSequence",
]


class TracedRandomError(FunctionalError):
    """A random draw while ``jit`` or ``vmap`` traces: it would be made once and reused
    (``jit``: the same sample at every call; ``vmap``: one sample for every example)."""


# --- checks ------------------------------------------------------------------------------


def _check_draw(what: str, args: tuple, kwargs: dict, allowed: tuple = ()) -> None:
    """Refuse a draw while a transform traces, and parameters that carry a derivative
    (``allowed``: positions or names of array arguments selected from with ``tnp``)."""
    transform = tracing_transform()
    if transform is not None:
        if transform.startswith("vmap"):
            consequence = ("one sample would be shared by every example of the batch. Draw "
                           "the batch's samples outside (with a batch axis) and pass them in "
                           "as a batched argument")
        else:
            consequence = ("the draw would be made once, when the function is traced, and "
                           "every call would return that same sample. Draw outside the "
                           "function and pass the sample in as an argument")
        raise TracedRandomError(f"{what} was called while {transform} traces its function: "
                                f"{consequence}")
    values = [a for i, a in enumerate(args) if i not in allowed]
    values += [v for k, v in kwargs.items() if k not in allowed]
    found = _frontend_in(values)
    if found is not None:
        raise TensorTypeError(
            f"{what}: a parameter is a {type(found).__name__}, but draws are constants, so "
            "its derivative would be lost. Draw a standard sample and transform it with "
            "tnp (e.g. mu + sigma * tnp.random.standard_normal(shape)), or pass its data")


def _check_state(what: str) -> None:
    """Refuse setting the module's state while a transform traces (it would be set once,
    when the function is traced, not at each call)."""
    transform = tracing_transform()
    if transform is not None:
        raise TracedRandomError(f"{what} was called while {transform} traces its function: "
                                "the state would be set once, when the function is traced, "
                                "not at each call. Seed outside the function")


def _frontend_in(values):
    """The first ``Tensor`` or traced value in ``values`` (lists, tuples and dicts searched)."""
    for value in values:
        if isinstance(value, Frontend):
            return value
        if isinstance(value, (list, tuple, dict)):
            found = _frontend_in(value.values() if isinstance(value, dict) else value)
            if found is not None:
                return found
    return None


def _refuse_in_place(what: str, x) -> None:
    raise TensorTypeError(
        f"{what}: a {type(x).__name__} cannot be shuffled in place (the ops that used it "
        "keep its values); use x = permutation(x), which differentiates")


def _frontend_array(args: tuple, kwargs: dict, name: str):
    """The array argument (first positional, or ``name``) if it is a tensor or traced value."""
    value = args[0] if args else kwargs.get(name)
    return value if isinstance(value, Frontend) else None


def _length(what: str, x, axis: int = 0) -> int:
    shape = shape_of(x)
    if not shape:
        raise TensorTypeError(f"{what}: x must be an integer or at least 1-dimensional")
    return shape[axis]


# --- explicit generators ------------------------------------------------------------------

# the methods that draw (and so are checked), for each class
_LEGACY_DRAWS = (
    "beta", "binomial", "bytes", "chisquare", "choice", "dirichlet", "exponential", "f",
    "gamma", "geometric", "gumbel", "hypergeometric", "laplace", "logistic", "lognormal",
    "logseries", "multinomial", "multivariate_normal", "negative_binomial",
    "noncentral_chisquare", "noncentral_f", "normal", "pareto", "permutation", "poisson",
    "power", "rand", "randint", "randn", "random", "random_integers", "random_sample",
    "rayleigh", "shuffle", "standard_cauchy", "standard_exponential", "standard_gamma",
    "standard_normal", "standard_t", "tomaxint", "triangular", "uniform", "vonmises", "wald",
    "weibull", "zipf")
_GENERATOR_DRAWS = tuple(sorted(
    (set(_LEGACY_DRAWS) - {"rand", "randn", "randint", "random_integers", "random_sample",
                           "tomaxint"}) | {"integers", "multivariate_hypergeometric",
                                           "permuted"}))


def _checked_method(base: type, name: str):
    method = getattr(base, name)

    def draw(self, *args, **kwargs):
        what = f"{type(self).__name__}.{name}"
        if name in ("shuffle", "permuted"):
            found = _frontend_in(list(args) + list(kwargs.values()))
            if found is not None:
                _refuse_in_place(what, found)
        if name in ("permutation", "choice"):
            _check_draw(what, args, kwargs, allowed=(0, "x", "a"))
            x = _frontend_array(args, kwargs, "x" if name == "permutation" else "a")
            if x is not None:
                return _select(self, base, name, what, x, args[1:], kwargs)
        else:
            _check_draw(what, args, kwargs)
        return method(self, *args, **kwargs)

    draw.__name__ = draw.__qualname__ = name
    draw.__doc__ = (f"NumPy's ``{base.__name__}.{name}`` (the same draws), refused while "
                    "``jit`` or ``vmap`` traces and for parameters that carry a derivative.")
    try:
        draw.__signature__ = inspect.signature(method)
    except (TypeError, ValueError):
        pass
    return draw


def _select(rng, base: type, name: str, what: str, x, args: tuple, kwargs: dict):
    """``permutation``/``choice`` of a tensor or traced array: NumPy's draw of indices, then
    ``tnp`` indexing, so the result differentiates in ``x`` (the same elements NumPy picks)."""
    method = getattr(base, name)
    kwargs = {k: v for k, v in kwargs.items() if k not in ("x", "a")}
    try:
        bound = inspect.signature(method).bind(rng, None, *args, **kwargs)
    except TypeError as error:
        raise TensorTypeError(f"{what}: {error}") from None
    parameters = dict(bound.arguments)
    del parameters["self"]
    parameters.pop("x" if name == "permutation" else "a")
    axis = parameters.pop("axis", 0)
    if name == "choice" and base is np.random.RandomState and len(shape_of(x)) != 1:
        raise TensorShapeError(f"{what}: a must be 1-dimensional (or an integer), got shape "
                               f"{shape_of(x)}")
    n = _length(what, x, axis)
    indices = method(rng, n, **parameters)
    return take(x, np.asarray(indices), axis=axis)


class RandomState(np.random.RandomState):
    """NumPy's legacy ``RandomState``: the same draws, plain NumPy results; drawing while
    ``jit`` or ``vmap`` traces raises :class:`TracedRandomError`.

    >>> rs = RandomState(0)
    >>> np.array_equal(rs.normal(size=3), np.random.RandomState(0).normal(size=3))
    True
    >>> isinstance(rs, np.random.RandomState)
    True
    """

    def seed(self, seed=None) -> None:
        """NumPy's ``RandomState.seed``, refused while ``jit`` or ``vmap`` traces (the
        state would be set once, at the trace, not at each call)."""
        _check_state("RandomState.seed")
        super().seed(seed)

    def set_state(self, state) -> None:
        """NumPy's ``RandomState.set_state``, refused while ``jit`` or ``vmap`` traces."""
        _check_state("RandomState.set_state")
        super().set_state(state)

    def __setstate__(self, state) -> None:
        # a copy (copy, deepcopy, pickle) restoring its state is not a reseeding: allowed
        np.random.RandomState.set_state(self, state)

    def __reduce__(self):
        return _own_class(self, super().__reduce__())


class Generator(np.random.Generator):
    """NumPy's ``Generator`` (what :func:`default_rng` makes): the same draws; drawing while
    ``jit`` or ``vmap`` traces raises :class:`TracedRandomError`.

    >>> rng = default_rng(0)
    >>> np.array_equal(rng.normal(size=3), np.random.default_rng(0).normal(size=3))
    True
    >>> isinstance(rng, np.random.Generator)
    True
    """

    def __reduce__(self):
        return _own_class(self, super().__reduce__())


def _own_class(generator, reduced: tuple) -> tuple:
    """NumPy's ``__reduce__`` rebuilt as this module's class: a copy (``copy``, ``deepcopy``,
    ``pickle``) of a checked generator stays checked. NumPy's constructor function would
    make NumPy's class, whose draws under ``jit`` are not refused."""
    _, args, *state = reduced
    return (type(generator), args, *state)


for _name in _LEGACY_DRAWS:
    if hasattr(np.random.RandomState, _name):
        setattr(RandomState, _name, _checked_method(np.random.RandomState, _name))
for _name in _GENERATOR_DRAWS:
    if hasattr(np.random.Generator, _name):
        setattr(Generator, _name, _checked_method(np.random.Generator, _name))


def default_rng(seed=None) -> Generator:
    """NumPy's ``np.random.default_rng``: a :class:`Generator` (PCG64) seeded by ``seed``
    (``None``, an int, a ``SeedSequence``, a ``BitGenerator`` or a ``Generator``).

    >>> np.array_equal(default_rng(42).uniform(size=2), np.random.default_rng(42).uniform(size=2))
    True
    """
    if isinstance(seed, Generator):
        return seed
    if isinstance(seed, np.random.Generator):
        return Generator(seed.bit_generator)
    if isinstance(seed, np.random.BitGenerator):
        return Generator(seed)
    return Generator(np.random.PCG64(seed))


# --- the module-level state and functions ----------------------------------------------------

_STATE = np.random.RandomState           # the module-level functions check, then call these
_rand = _STATE()


def seed(seed=None) -> None:
    """Reset the module's state, as ``np.random.seed`` resets NumPy's.

    >>> seed(1); a = rand(2)
    >>> seed(1); np.array_equal(a, rand(2))
    True
    """
    _check_state("tnp.random.seed")
    _rand.seed(seed)


def get_state(legacy: bool = True):
    """The module's state, as ``np.random.get_state`` gives NumPy's (for :func:`set_state`).

    >>> state = get_state()
    >>> a = randn(2)
    >>> set_state(state); np.array_equal(a, randn(2))
    True
    """
    return _rand.get_state(legacy=legacy)


def set_state(state) -> None:
    """Restore a state from :func:`get_state`, as ``np.random.set_state`` does.

    >>> seed(3); state = get_state(); a = random()
    >>> set_state(state); a == random()
    True
    """
    _check_state("tnp.random.set_state")
    _rand.set_state(state)


def shuffle(x) -> None:
    """Shuffle a NumPy array (or list) in place along its first axis, as NumPy's ``shuffle``.

    A ``Tensor`` or traced value cannot be changed in place: use ``x = permutation(x)``.

    >>> a = np.arange(5)
    >>> seed(0); shuffle(a)
    >>> b = np.arange(5)
    >>> np.random.seed(0); np.random.shuffle(b)
    >>> np.array_equal(a, b)
    True
    """
    if isinstance(x, Frontend):
        _refuse_in_place("tnp.random.shuffle", x)
    _check_draw("tnp.random.shuffle", (), {})
    _STATE.shuffle(_rand, x)


def permutation(x):
    """NumPy's ``permutation``: ``arange(x)`` shuffled for an int, else a shuffled copy of ``x``
    along its first axis. On a ``Tensor`` or traced value it selects with ``tnp`` indexing,
    so the result differentiates in ``x`` (the same order NumPy's draw gives).

    >>> seed(0); a = permutation(5)
    >>> np.random.seed(0); np.array_equal(a, np.random.permutation(5))
    True
    >>> import primitives.tensor as tnp
    >>> seed(0); tnp.grad(lambda v: tnp.sum(permutation(v) * np.arange(3.0)))(np.ones(3))
    array([2., 1., 0.])
    """
    _check_draw("tnp.random.permutation", (), {})
    if isinstance(x, Frontend):
        return _select(_rand, _STATE, "permutation", "tnp.random.permutation", x, (), {})
    return _STATE.permutation(_rand, x)


def choice(a, size=None, replace=True, p=None):
    """NumPy's ``choice``: elements of ``a`` (or of ``arange(a)`` for an int) drawn with or
    without replacement, with probabilities ``p``. On a ``Tensor`` or traced ``a`` it
    selects with ``tnp`` indexing, so the result differentiates in ``a``.

    >>> seed(0); a = choice(10, size=3, replace=False)
    >>> np.random.seed(0); np.array_equal(a, np.random.choice(10, size=3, replace=False))
    True
    """
    _check_draw("tnp.random.choice", (size, replace, p), {})
    if isinstance(a, Frontend):
        return _select(_rand, _STATE, "choice", "tnp.random.choice", a, (size, replace, p), {})
    return _STATE.choice(_rand, a, size, replace, p)


# The other functions are NumPy's, one for one: the name, and an example call for the
# docstring (which compares the draw with NumPy's).
_MODULE_DRAWS = {
    "rand": "2, 3", "randn": "2, 3", "random": "size=3", "random_sample": "size=3",
    "standard_normal": "size=3", "normal": "1.0, 2.0, size=3", "uniform": "-1.0, 1.0, size=3",
    "randint": "0, 10, size=3", "exponential": "2.0, size=3", "poisson": "3.0, size=3",
    "binomial": "10, 0.5, size=3", "beta": "2.0, 3.0, size=3", "gamma": "2.0, size=3",
    "standard_gamma": "2.0, size=3", "standard_exponential": "size=3",
    "standard_cauchy": "size=3", "standard_t": "3.0, size=3", "chisquare": "2.0, size=3",
    "noncentral_chisquare": "2.0, 1.0, size=3", "f": "2.0, 3.0, size=3",
    "noncentral_f": "2.0, 3.0, 1.0, size=3", "dirichlet": "[1.0, 2.0], size=3",
    "multinomial": "10, [0.5, 0.5], size=3",
    "multivariate_normal": "[0.0, 0.0], [[1.0, 0.0], [0.0, 1.0]], size=3",
    "geometric": "0.5, size=3", "gumbel": "size=3", "hypergeometric": "5, 3, 4, size=3",
    "laplace": "size=3", "logistic": "size=3", "lognormal": "size=3",
    "logseries": "0.5, size=3", "negative_binomial": "3, 0.5, size=3", "pareto": "2.0, size=3",
    "power": "2.0, size=3", "rayleigh": "size=3", "triangular": "0.0, 0.5, 1.0, size=3",
    "vonmises": "0.0, 1.0, size=3", "wald": "1.0, 1.0, size=3", "weibull": "2.0, size=3",
    "zipf": "2.0, size=3", "bytes": "4",
}


def _module_draw(name: str, example: str):
    method = getattr(_STATE, name)
    what = f"tnp.random.{name}"

    def draw(*args, **kwargs):
        _check_draw(what, args, kwargs)
        return method(_rand, *args, **kwargs)

    draw.__name__ = draw.__qualname__ = name
    draw.__module__ = __name__
    draw.__doc__ = (
        f"NumPy's ``np.random.{name}``, with its signature: the same draws, from this "
        "module's state (reset by :func:`seed`), as constants.\n\n"
        f">>> seed(0); ours = {name}({example})\n"
        f">>> np.random.seed(0); theirs = np.random.{name}({example})\n"
        ">>> np.array_equal(ours, theirs)\nTrue\n")
    try:
        parameters = list(inspect.signature(method).parameters.values())[1:]    # no self
        draw.__signature__ = inspect.Signature(parameters)
    except (TypeError, ValueError):
        pass
    return draw


for _name, _example in _MODULE_DRAWS.items():
    globals()[_name] = _module_draw(_name, _example)
    __all__.append(_name)
del _name, _example
ranf = sample = globals()["random_sample"]          # NumPy's aliases
