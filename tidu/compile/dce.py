"""Dead code elimination: keep the operations the outputs read, directly or not.

One loop over the operations, last to first: an operation is live if a live
operation or an output reads one of its values.

>>> from tidu.graph import PRIMARY, Input
>>> sin = OperationKey("sin", (Input("x"),), PRIMARY)
>>> cos = OperationKey("cos", (Input("x"),), PRIMARY)
>>> live_operations([sin, cos], [Derived(cos, 0)]) == [cos]
True
"""

from __future__ import annotations

from typing import Sequence

from tidu.graph import Derived, OperationKey, ValueKey


def live_operations(operations: Sequence[OperationKey],
                    outputs: Sequence[ValueKey]) -> list[OperationKey]:
    """The ``operations`` that ``outputs`` need, in order.

    ``operations`` lists each operation once, after the operations it reads.
    """
    needed = {key.operation for key in outputs if type(key) is Derived}
    live = []
    for op_key in reversed(operations):
        if op_key in needed:
            live.append(op_key)
            needed.update(key.operation for key in op_key.inputs if type(key) is Derived)
    live.reverse()
    return live
