"""hashbroker: a pure-Python asyncio AMQP 0-9-1 broker that routes exactly as RabbitMQ 3.10.8.

Kept import-light on purpose: `hashbroker serve` must be listening within 0.3 s and idle under
40 MB, so submodules are imported only by whoever needs them.
"""

__version__ = "0.1.0"
