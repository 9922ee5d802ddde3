"""Iterative depth-first post-order, the one graph walk the transforms share.

>>> deps = {"c": ["a", "b"], "b": ["a"], "a": []}
>>> postorder(["c"], deps.__getitem__)
['a', 'b', 'c']
"""

from __future__ import annotations

from typing import Callable, Hashable, Iterable


def postorder(roots: Iterable[Hashable], children: Callable[[Hashable], Iterable]) -> list:
    """Every node reachable from ``roots``, each listed after all of its children.

    Uses an explicit stack, so depth is bounded by memory, not by the
    interpreter's recursion limit. The graph must be acyclic.
    """
    order: list = []
    state: dict = {}    # node -> False while its children are pending, True once listed
    for root in roots:
        if root in state:
            continue
        stack = [root]
        while stack:
            node = stack[-1]
            listed = state.get(node)
            if listed is None:
                state[node] = False
                for child in children(node):
                    if child not in state:
                        stack.append(child)
            else:
                stack.pop()
                if listed is False:
                    state[node] = True
                    order.append(node)
    return order
