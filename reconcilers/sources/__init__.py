"""Where a Model's files come from: the runtime's model argument, the loader, the cache claim."""
