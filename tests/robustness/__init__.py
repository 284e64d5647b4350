"""Attack and abuse tests: hostile frames, floods, descriptor exhaustion, oversize messages, signals."""
