"""Wire types shared by the routing library (`exchanges`) and the broker: typed field tables and
their codec, and AMQP reply codes with the error that carries them.

This is the bottom layer: it imports nothing from the project, so both `exchanges/` and `broker/`
can depend on it without depending on each other.
"""
