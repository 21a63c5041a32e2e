"""The sans-I/O core: pure code with no I/O and no clock. Adapters feed it and carry out what it returns."""
