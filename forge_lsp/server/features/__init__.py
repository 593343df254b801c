"""Server features, one module per concern; each has `register(ls)`."""
