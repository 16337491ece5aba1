"""Self-checks for the lab notebooks: each says what is wrong, not just False."""
