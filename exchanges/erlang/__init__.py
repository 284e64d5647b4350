"""Erlang term emulation: term order and hashing inputs, and the `~p` printer RabbitMQ's texts use."""
