"""One module per management resource: its JSON rendering and its route handlers."""
