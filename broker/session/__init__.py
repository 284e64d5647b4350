"""The AMQP session layer: the connection adapter and the channel's parts, above the protocol core."""
