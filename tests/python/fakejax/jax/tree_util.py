"""jax.tree_util stand-in: leaves of tuples, lists and dicts."""


def tree_leaves(x):
    if isinstance(x, (tuple, list)):
        return [leaf for v in x for leaf in tree_leaves(v)]
    if isinstance(x, dict):
        return [leaf for k in sorted(x) for leaf in tree_leaves(x[k])]
    if x is None:
        return []
    return [x]
