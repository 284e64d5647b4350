"""Broker state: virtual hosts, exchanges, queues and consumers (no I/O)."""
