"""The one place the transforms run a graph: :class:`GraphRun` and :func:`run_graph`.

``jit``, ``vmap``, ``jvp``/``vjp`` and the Jacobians each end with a graph and
values for its inputs. A graph that runs again and again (``jit``, a Jacobian's
linear map per basis vector) runs on plain arrays as one compiled
:class:`tidu.graph.Program`; a graph that runs once (``vjp_fn``, ``jvp``), and any
graph whose values include a ``Tensor`` or another transform's traced value, runs
op by op (:func:`..core.interpret`, which replays through their front end, so
their derivatives flow). Either way the results are :func:`.fresh.fresh`: none
shares memory with a value it was given, with what the caller holds, or with
another result.

Room: the transforms package; imports ``tidu.graph``, :mod:`..core` and
:mod:`.fresh` only.

>>> import numpy as np
>>> from tidu.graph import GraphBuilder, Local
>>> from primitives.tensor.ops import elementwise as ew
>>> b = GraphBuilder(); x = b.add_input("x")
>>> b.set_outputs(b.add_operation(ew.exp, [Local(x)]) + [x])
>>> g = b.build()
>>> x0 = np.zeros(2)
>>> exp_x, same_x = GraphRun(g.output_keys, g.input_keys)([x0])
>>> exp_x, same_x, np.shares_memory(same_x, x0)
(array([1., 1.]), array([0., 0.]), False)
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Sequence

from tidu.graph import Program, ValueKey
from primitives.tensor.core import Frontend, interpret
from primitives.tensor.transforms.fresh import fresh


class GraphRun:
    """``outputs`` as a function of the values of ``input_keys``, in that order.

    On plain arrays it runs ``program`` (by default the program computing
    ``outputs`` from ``input_keys``, compiled at the first call on plain arrays).
    """

    __slots__ = ("outputs", "input_keys", "_program", "_run")

    def __init__(self, outputs: Sequence[ValueKey], input_keys: Sequence,
                 program: Program | None = None) -> None:
        self.outputs = list(outputs)
        self.input_keys = list(input_keys)
        self._program = program
        self._run = None

    def __call__(self, values: Sequence, held: Iterable = ()) -> list:
        """The outputs' values; none shares memory with ``values``, ``held`` or another output."""
        if _holds_frontend(values):
            # tensors or another transform's values: replay, so their derivatives flow
            outs = interpret(self.outputs, dict(zip(self.input_keys, values)))
        else:
            if self._run is None:
                program = self._program or Program.for_values(self.outputs, self.input_keys)
                self._run = program.runner(self.input_keys)
            outs = self._run(values)
        return fresh(outs, [*values, *held])


def _holds_frontend(values: Sequence) -> bool:
    """Whether a ``Tensor`` or a traced value is among ``values``."""
    for value in values:
        if isinstance(value, Frontend):
            return True
    return False


def run_graph(outputs: Sequence[ValueKey], values: Mapping[Any, Any],
              held: Iterable = ()) -> list:
    """``outputs`` computed once from ``values`` (a mapping from keys to values), op by op:
    for one run that costs less than compiling (``vjp_fn``, ``jvp``); results fresh."""
    return fresh(interpret(outputs, values), [*values.values(), *held])
