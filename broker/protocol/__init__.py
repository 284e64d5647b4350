"""Sans-I/O AMQP 0-9-1: the protocol core, which knows no socket, event loop or clock.

`framing` (frame constants, the read buffer, frame errors), `commands` (typed client methods and
their decoder), `assembler` (bytes -> commands: frames, content assembly, channel bookkeeping),
`handshake` (the connection handshake as a state machine returning actions), `heartbeat` (when to
send a heartbeat and when the peer is gone), `methods` and `properties` (server method encoders,
content properties kept as received). `broker.session` runs them with the loop and the transport.
"""
