"""HTTP layer: thin routers that parse, call one service inside one transaction, and shape the reply."""
