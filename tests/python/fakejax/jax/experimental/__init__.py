"""jax.experimental stand-in (tests only)."""
