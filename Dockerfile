# hashbroker: a pure-Python AMQP 0-9-1 broker answering as RabbitMQ 3.10.8 does.
#
# Build stage: the full python image has a C compiler, so setup.py compiles exchanges/hashing/hashcore.py
# with mypyc (the hash exchanges then route a key in ~1 µs instead of 3-12 µs interpreted).
FROM python:3.11 AS build
WORKDIR /src
COPY pyproject.toml setup.py README.md ./
COPY amqpwire ./amqpwire
COPY broker ./broker
COPY exchanges ./exchanges
COPY spark_bridge ./spark_bridge
RUN pip wheel --no-deps --wheel-dir /wheels .

# Run stage: slim, with the compiled wheel and byte-compiled packages (every start would otherwise
# compile hashbroker from source). As RabbitMQ's official image (loopback_users.guest = false),
# guest may log in from outside the container: clients on the host arrive through its network.
FROM python:3.11-slim
ENV PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 \
    HASHBROKER_LOOPBACK_USERS=[] \
    HASHBROKER_DATA_DIR=/var/lib/hashbroker
COPY --from=build /wheels /wheels
RUN pip install /wheels/*.whl && rm -rf /wheels \
    && python -m compileall -q /usr/local/lib/python3.11/site-packages \
    && python -c "import exchanges; assert exchanges.hash_implementation() == 'mypyc'" \
    && useradd --system --no-create-home hashbroker \
    && mkdir -p /var/lib/hashbroker && chown hashbroker /var/lib/hashbroker
USER hashbroker
VOLUME /var/lib/hashbroker
EXPOSE 5672 15672
HEALTHCHECK --interval=10s --timeout=3s --start-period=5s --retries=3 \
    CMD ["python", "-c", "import socket; s = socket.create_connection(('127.0.0.1', 5672), 2); s.sendall(b'AMQP\\x00\\x00\\x09\\x01'); assert s.recv(1) == b'\\x01'"]
CMD ["hashbroker", "serve", "--host", "0.0.0.0", "--port", "5672", "--management-port", "15672"]
