"""Sans-I/O AMQP 0-9-1 wire handling: framing, method codecs and content-header properties.

Nothing here touches sockets or the event loop, so it can be tested and fuzzed with plain bytes.
"""
