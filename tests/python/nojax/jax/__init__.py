# Put first on PYTHONPATH by the harness tests for the `check` step, which
# must never import JAX: any import of jax fails loudly.
raise ImportError("check imported jax (it must not: it compares outputs with numpy alone)")
