"""The optimization agent: model provider, Coder/Judge roles, tree search, run store, offline library."""
