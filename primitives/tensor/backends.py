"""Array libraries: which one a value belongs to, and the namespace ops compute with.

The tensor ops compute through the Array API namespace of their inputs, so one
graph runs on NumPy, PyTorch, CuPy or Dask arrays, and gives arrays of the
inputs' library (Dask's stay lazy: the ops only build Dask's task graph). An
op's ``eval`` starts with :func:`operands`, which names the namespace ``xp``
and converts NumPy constants (and numbers) among the inputs to the inputs'
library, on their device:

>>> xp, (x, y) = operands([np.ones(2), np.zeros(2)])
>>> xp.name, xp.exp(y)
('numpy', array([1., 1.]))

For NumPy, ``operands`` is one type check per input and ``xp`` calls NumPy's
own functions (NumPy 2 implements the standard). Other libraries go through
``array-api-compat``'s namespaces, which take NumPy dtypes here too. Functions
the standard lacks (a scatter-add, ``sinc``, some ``linalg`` on Dask) come from one
small table per library, filled by the op modules that need them
(:func:`define`); ``xp.<name>`` finds them like any other function.

Arrays of two non-NumPy libraries in one op are a :class:`TensorTypeError`
naming both.

Room: the floor of the tensor package; imports :mod:`.errors` (and the optional array
libraries, when installed).
"""

from __future__ import annotations

import functools
import sys
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from primitives.tensor.errors import TensorNotSupportedError, TensorShapeError, TensorTypeError


class Namespace:
    """A library's array namespace: ``array-api-compat``'s (NumPy's own module for NumPy),
    plus this library's entries of the table of functions outside the standard.

    Attributes are looked up once and then cached on the instance, so ``xp.exp`` costs
    what ``np.exp`` does.

    >>> NUMPY.xp.exp is np.exp, NUMPY.xp.linalg.solve is np.linalg.solve
    (True, True)
    """

    def __init__(self, name: str, base, extras: dict, dtype: Callable | None = None,
                 prefix: str = "") -> None:
        self.name = name
        self._base = base
        self._extras = extras
        self._dtype = dtype            # NumPy dtype -> the library's (None: takes NumPy's)
        self._prefix = prefix          # "linalg." in the linalg sub-namespace

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("_"):
            raise AttributeError(attr)
        qualified = self._prefix + attr
        if qualified in self._extras:
            value = self._extras[qualified]
        elif attr in ("linalg", "fft"):
            value = Namespace(self.name, getattr(self._base, attr), self._extras, self._dtype,
                              attr + ".")
        else:
            try:
                value = getattr(self._base, attr)
            except AttributeError:
                raise TensorNotSupportedError(
                    f"{qualified} is not available for {self.name} arrays") from None
            if self._dtype is not None and callable(value) and attr in _TAKES_DTYPE:
                value = _with_library_dtype(value, self._dtype, _TAKES_DTYPE[attr])
        self.__dict__[attr] = value
        return value

    def __repr__(self) -> str:
        return f"<array namespace of {self.name}>"


# functions whose dtype argument (position, or keyword only: None) a NumPy dtype is given to
_TAKES_DTYPE = {"astype": 1, "asarray": None, "zeros": None, "ones": None, "empty": None,
                "full": None, "eye": None, "arange": None, "linspace": None,
                "zeros_like": None, "ones_like": None, "full_like": None, "empty_like": None,
                "sum": None, "prod": None, "cumulative_sum": None, "cumulative_prod": None,
                "finfo": 0, "iinfo": 0}


def _with_library_dtype(fn: Callable, convert: Callable, position: int | None) -> Callable:
    @functools.wraps(fn)
    def call(*args, **kwargs):
        if position is not None and len(args) > position:
            args = list(args)
            args[position] = convert(args[position])
        elif kwargs.get("dtype") is not None:
            kwargs["dtype"] = convert(kwargs["dtype"])
        return fn(*args, **kwargs)
    return call


class Library:
    """One array library: its namespace (:attr:`xp`) and the conversions tidu needs.

    >>> NUMPY.name, NUMPY.to_numpy(np.ones(2))
    ('numpy', array([1., 1.]))
    """

    def __init__(self, name: str, xp: Namespace) -> None:
        self.name = name
        self.xp = xp

    def from_numpy(self, array, like):
        """``array`` (NumPy, or a number) as an array of this library on ``like``'s device."""
        return self.xp.asarray(np.asarray(array), device=_device(like))

    def to_numpy(self, array) -> np.ndarray:
        """``array``'s values in host memory, not sharing its memory (a Dask array is
        computed)."""
        return np.array(array)

    def copy(self, array):
        """A copy of ``array`` that writing to ``array`` does not change."""
        return array.copy()

    def clone(self, array):
        """:meth:`copy`, for a function's result: PyTorch's autograd history is kept, so a
        tensor that requires grad in PyTorch's sense still gets its gradient through it."""
        return self.copy(array)

    def checked(self, array):
        """``array``, if tidu can compute with it (else a ``TiduError`` saying why)."""
        return array

    def detached(self, array):
        """``array`` as a constant for the library's own autograd too (``stop_gradient``)."""
        return array

    def records(self, array) -> bool:
        """Whether the library's own autograd records ops on ``array`` now (a PyTorch tensor
        that requires grad, in PyTorch's grad mode): tidu must then keep its history, or
        refuse where it cannot."""
        return False

    def __repr__(self) -> str:
        return self.name


def _device(array):
    from array_api_compat import device

    return device(array)


def device_of(array):
    """The device ``array`` lives on, to create arrays next to it (``"cpu"`` for NumPy).

    >>> device_of(np.zeros(1))
    'cpu'
    """
    return "cpu" if type(array) is np.ndarray else _device(array)


class _Torch(Library):
    def from_numpy(self, array, like):
        array = np.asarray(array)
        # PyTorch takes no negative strides, and would share read-only memory as writable
        if not array.flags.writeable or any(stride < 0 for stride in array.strides):
            array = array.copy()
        return super().from_numpy(array, like)

    def to_numpy(self, array) -> np.ndarray:
        host = array.detach().cpu().resolve_conj().resolve_neg()   # (.numpy() refuses the bits)
        # a CPU tensor's .numpy() shares its memory: copy, so writing to it changes no tensor
        return host.numpy().copy() if array.device.type == "cpu" else host.numpy()

    def copy(self, array):
        # detached: tidu differentiates; PyTorch's own autograd history (a tensor that
        # requires grad, given to tnp.tensor) is not kept, as torch.tensor(t) does
        return array.detach().clone()

    def clone(self, array):
        return array.clone()

    def detached(self, array):
        return array.detach()

    def records(self, array) -> bool:
        return array.requires_grad and sys.modules["torch"].is_grad_enabled()


class _Dask(Library):
    def checked(self, array):
        if any(n != n for n in array.shape):          # NaN: a size known only once computed
            raise TensorShapeError(
                f"a Dask array of unknown shape {array.shape} (its chunk sizes depend on its "
                "values, as after boolean indexing): tidu needs every shape to build its "
                "graphs; call .compute_chunk_sizes() on it first")
        return array

    def from_numpy(self, array, like):
        return self.xp.asarray(np.asarray(array))

    def to_numpy(self, array) -> np.ndarray:
        return np.asarray(array.compute())


class _CuPy(Library):
    def to_numpy(self, array) -> np.ndarray:
        return array.get()


_EXTRAS: dict[str, dict[str, Any]] = {"numpy": {}, "torch": {}, "dask": {}, "cupy": {}}


def define(name: str, **by_library: Callable) -> None:
    """Give a function outside the Array API standard to each library's namespace.

    ``name`` is how ops call it (``xp.<name>``; ``"linalg.<name>"`` for the linalg
    sub-namespace) and each keyword a library (``numpy``, ``torch``, ``dask``,
    ``cupy``); all share NumPy's semantics. A library left out has no such function:
    an op that needs it raises :class:`TensorNotSupportedError` for that library.

    >>> define("doc_example_twice", numpy=lambda a: a * 2)
    >>> NUMPY.xp.doc_example_twice(np.ones(1))
    array([2.])
    """
    for library, fn in by_library.items():
        table = _EXTRAS[library]
        table[name] = fn
        namespace = _LIBRARIES_BY_NAME.get(library)
        if namespace is not None:                # drop what an earlier lookup cached
            namespace.xp.__dict__.pop(name.split(".")[-1], None)
            for sub in ("linalg", "fft"):
                namespace.xp.__dict__.pop(sub, None)


NUMPY = Library("numpy", Namespace("numpy", np, _EXTRAS["numpy"]))
_LIBRARIES_BY_NAME: dict[str, Library] = {"numpy": NUMPY}

# the library of each type seen; built up as values of new types arrive
_BY_TYPE: dict[type, Library] = {np.ndarray: NUMPY, float: NUMPY, int: NUMPY, complex: NUMPY,
                                 bool: NUMPY}


def library_of(value) -> Library:
    """The array library ``value`` belongs to (NumPy for NumPy values and Python numbers).

    >>> library_of(np.float32(1.0)).name
    'numpy'
    """
    library = _BY_TYPE.get(type(value))
    if library is None:
        library = _library_of_type(value)
        _BY_TYPE[type(value)] = library
    return library


def _library_of_type(value) -> Library:
    import array_api_compat as compat

    # (a class such as np.float32, given as dtype=, has __array_namespace__ but is no array)
    if isinstance(value, (np.ndarray, np.generic, type)) or not compat.is_array_api_obj(value):
        return NUMPY
    if compat.is_torch_array(value):
        return _library("torch")
    if compat.is_dask_array(value):
        return _library("dask")
    if compat.is_cupy_array(value):
        return _library("cupy")
    raise TensorTypeError(f"arrays of type {type(value).__module__}.{type(value).__name__} are "
                          "not supported: pass NumPy, PyTorch, CuPy or Dask arrays")


def _library(name: str) -> Library:
    library = _LIBRARIES_BY_NAME.get(name)
    if library is None:
        if name == "torch":
            import torch
            import array_api_compat.torch as base

            def to_torch(dtype):
                if isinstance(dtype, torch.dtype):
                    return dtype
                return _TORCH_DTYPES.get(np.dtype(dtype).name) or _torch_dtype(torch, dtype)
            library = _Torch("torch", Namespace("torch", base, _EXTRAS["torch"], to_torch))
        elif name == "dask":
            import array_api_compat.dask.array as base

            library = _Dask("dask", Namespace("dask", base, _EXTRAS["dask"]))
        else:
            import array_api_compat.cupy as base

            library = _CuPy("cupy", Namespace("cupy", base, _EXTRAS["cupy"]))
        _LIBRARIES_BY_NAME[name] = library
    return library


_TORCH_DTYPES: dict = {}


def _torch_dtype(torch, dtype):
    name = np.dtype(dtype).name
    try:
        converted = getattr(torch, name)
    except AttributeError:
        raise TensorTypeError(f"PyTorch has no dtype {name}") from None
    _TORCH_DTYPES[name] = converted
    return converted


_NUMPY_DTYPES: dict = {}


def numpy_dtype(dtype) -> np.dtype:
    """The NumPy dtype of any library's dtype (tidu describes dtypes by NumPy's).

    Only NumPy's own dtypes count. A library's dtype whose name matches no NumPy
    dtype, or only one that an extension registers in NumPy (PyTorch's
    ``bfloat16`` and ``float8_*``, which ``ml_dtypes`` adds to NumPy when JAX or
    TensorFlow is imported), raises :class:`TensorTypeError` naming it: the same
    whatever else is imported. PyTorch's ``float16`` is NumPy's ``float16``.

    >>> numpy_dtype("float32")
    dtype('float32')
    >>> numpy_dtype("bfloat16")                  # with or without ml_dtypes loaded
    Traceback (most recent call last):
    ...
    primitives.tensor.errors.TensorTypeError: dtype bfloat16 is not supported: tidu describes dtypes by NumPy's own, and NumPy has no bfloat16 ...
    """
    if type(dtype) is not str:
        found = _NUMPY_DTYPES.get(dtype)
        if found is not None:
            return found
    try:
        converted = np.dtype(dtype)
    except TypeError:
        name = str(dtype).rsplit(".", 1)[-1]            # torch.float32 -> float32
        try:
            converted = np.dtype(name)
        except TypeError:
            raise _unsupported_dtype(dtype, name) from None
    if converted.isbuiltin == 2:                        # ml_dtypes' bfloat16, float8_*...
        raise _unsupported_dtype(dtype, converted.name)
    if type(dtype) is not str:
        _NUMPY_DTYPES[dtype] = converted
    return converted


def _unsupported_dtype(dtype, name: str) -> TensorTypeError:
    """The error for a library's dtype that NumPy itself lacks (``torch.bfloat16``)."""
    hint = ("; convert first, e.g. x.to(torch.float32) (or torch.float16, which NumPy has)"
            if str(dtype).startswith("torch.") else
            "; convert the array to a NumPy dtype (float16, float32, float64...) first")
    shown = name if str(dtype) == name else f"{name} ({dtype})"
    return TensorTypeError(f"dtype {shown} is not supported: tidu describes dtypes by "
                           f"NumPy's own, and NumPy has no {name} (extension dtypes such as "
                           f"ml_dtypes' are not used, whether or not they are loaded){hint}")


def common_library(values: Iterable, what=None) -> Library:
    """The one library other than NumPy among ``values`` (NumPy if none); ``what`` (a
    function's name, or an op) is named in the error for two such libraries.

    >>> common_library([np.ones(1), 2.0], "add").name
    'numpy'
    """
    found = NUMPY
    for value in values:
        library = library_of(value)
        if library is not NUMPY and library is not found:
            if found is not NUMPY:
                where = "an operation" if what is None else \
                    what if isinstance(what, str) else repr(what)
                raise TensorTypeError(f"{where}: arrays of two libraries, {found.name} and "
                                      f"{library.name}, in one call; convert them to one")
            found = library
    return found


def operands(inputs: Sequence, op=None) -> tuple:
    """``(xp, inputs)``: the namespace ``op`` computes in and its inputs, NumPy constants and
    numbers converted to the inputs' library (on the device of the first of its arrays).

    >>> xp, args = operands([np.ones(1), 1.5])
    >>> xp.name, args[1]
    ('numpy', 1.5)
    """
    for x in inputs:
        if _BY_TYPE.get(type(x)) is not NUMPY:
            break
    else:                       # NumPy arrays and scalars (a 0-d ufunc's result), numbers
        return NUMPY.xp, inputs
    kind = type(inputs[0])
    for x in inputs:
        if type(x) is not kind:
            break
    else:                       # inputs of one type: of one library, if a known one
        library = _BY_TYPE.get(kind)
        if library is not None:
            return library.xp, inputs
    library = common_library(inputs, op)
    if library is NUMPY:
        return NUMPY.xp, inputs
    like = next(x for x in inputs if library_of(x) is library)
    return library.xp, [x if library_of(x) is library or _is_number(x)
                        else library.from_numpy(x, like) for x in inputs]


def _is_number(x) -> bool:
    return type(x) in (int, float, complex, bool)


def as_array(value):
    """``value`` as an array of its library: NumPy scalars and numbers become 0-d NumPy
    arrays; arrays (of any library) are returned as they are.

    >>> as_array(np.float64(2.0))
    array(2.)
    """
    kind = type(value)
    if kind is np.ndarray:
        return value
    if _BY_TYPE.get(kind) is NUMPY or library_of(value) is NUMPY:
        return np.asarray(value)
    return library_of(value).checked(value)


def to_host(value) -> np.ndarray:
    """``value`` as a NumPy array: another library's array is copied to host memory (a Dask
    array is computed).

    >>> to_host([1.0, 2.0])
    array([1., 2.])
    """
    if type(value) is np.ndarray:
        return value
    library = library_of(value)
    return np.asarray(value) if library is NUMPY else library.to_numpy(value)


def is_view(array) -> bool:
    """Whether ``array`` shares another array's memory (a NumPy or PyTorch view).

    >>> is_view(np.ones(3)[1:]), is_view(np.ones(3))
    (True, False)
    """
    if type(array) is np.ndarray:
        return array.base is not None
    return getattr(array, "_base", None) is not None


def owned_copy(value, history: bool = False):
    """``value`` as an array nobody else can write to: an array that the caller holds (or a
    view of one) is copied, in its library; a number becomes a new array. ``history``: the
    copy keeps PyTorch's autograd history (:meth:`Library.clone`), else it is detached.

    >>> a = np.ones(2)
    >>> owned_copy(a) is a
    False
    """
    array = as_array(value)
    if array is value or is_view(array):
        if type(array) is np.ndarray and 0 in array.strides and array.size > 1:
            return _broadcast_copy(array)
        library = library_of(array)
        array = library.clone(array) if history else library.copy(array)
    return array


def _broadcast_copy(array: np.ndarray) -> np.ndarray:
    """A copy of a broadcast NumPy array (an axis of stride 0: ``x * 2.0``'s constant, a
    ``broadcast_to``) that copies its data once, broadcast again (read-only, as it was)."""
    data = array[tuple(slice(0, 1) if stride == 0 else slice(None) for stride in array.strides)]
    return np.broadcast_to(data.copy(), array.shape)


def on_host(fn: Callable) -> Callable:
    """NumPy's own ``fn``, which reads values (``np.nonzero``, ``np.isposinf``...), on any
    library's arrays. NumPy's functions do not dispatch on PyTorch tensors: they call the
    tensor's methods of the same names, which mean other things (``nonzero`` gives one
    ``(n, ndim)`` tensor, ``~`` of a ``uint8`` flips bits), so PyTorch tensors are read on the
    host and the array results made tensors on their device. Other arrays go to ``fn`` as
    they are (Dask and CuPy implement NumPy's functions).

    >>> on_host(np.nonzero)(np.array([0, 3]))
    (array([1]),)
    """
    @functools.wraps(fn)
    def call(*args, **kwargs):
        return call_on_host(fn, args, kwargs)
    return call


def call_on_host(fn: Callable, args: Sequence, kwargs: dict):
    """``on_host(fn)(*args, **kwargs)``, without making the wrapper.

    >>> call_on_host(np.argwhere, [np.array([0, 3])], {})
    array([[1]])
    """
    like = next((a for a in (*args, *kwargs.values()) if _is_torch(a)), None)
    if like is None:
        return fn(*args, **kwargs)
    library = library_of(like)
    host = [library.to_numpy(a) if _is_torch(a) else a for a in args]
    return _in_library(fn(*host, **{k: library.to_numpy(v) if _is_torch(v) else v
                                    for k, v in kwargs.items()}), library, like)


def _is_torch(value) -> bool:
    return type(value) is not np.ndarray and library_of(value).name == "torch"


def _in_library(out, library: Library, like):
    """``out`` (NumPy arrays and scalars, maybe in a tuple or list) as arrays of ``library``."""
    if isinstance(out, (tuple, list)):
        return type(out)(_in_library(o, library, like) for o in out)
    if isinstance(out, (np.ndarray, np.generic)):
        return library.from_numpy(out, like)
    return out


def to_library(value, library: Library, like=None):
    """``value`` (a NumPy array or a number; an array of ``library`` is returned as it is) as
    an array of ``library``, on ``like``'s device.

    >>> to_library(np.ones(1), NUMPY)
    array([1.])
    """
    if library is NUMPY or library_of(value) is library:
        return value
    return library.from_numpy(value, like)
