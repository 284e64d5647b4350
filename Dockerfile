# hashbroker: a pure-Python AMQP 0-9-1 broker answering as RabbitMQ 3.10.8 does.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1
WORKDIR /app
# setup.py compiles exchanges/hashcore.py with mypyc when a C compiler is present; this slim image
# has none, so the install falls back to the interpreted module (same routing, slower hashing).
COPY pyproject.toml setup.py README.md ./
COPY broker ./broker
COPY exchanges ./exchanges
COPY spark_bridge ./spark_bridge
RUN pip install . && useradd --system --no-create-home hashbroker
USER hashbroker

EXPOSE 5672
CMD ["hashbroker", "serve", "--host", "0.0.0.0", "--port", "5672"]
