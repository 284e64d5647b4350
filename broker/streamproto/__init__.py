"""RabbitMQ's stream protocol (the `rabbitmq_stream` plugin, port 5552) as RabbitMQ 3.10.8 speaks it.

`frames` and `chunk` are the wire formats, `amqp10` and `convert` the message encoding shared with
AMQP 0-9-1, `connection` the sans-I/O connection state machine (bytes in, bytes out, the broker
behind the `ports.StreamBroker` protocol) and `server` the asyncio listener. Importing the package
does nothing: the broker imports `server` only when a stream port is configured.
"""
