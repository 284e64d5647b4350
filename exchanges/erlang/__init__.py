"""Erlang term emulation: the atom, term order and phash2, and io_lib:format as RabbitMQ uses it."""
