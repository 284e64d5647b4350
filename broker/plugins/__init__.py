"""RabbitMQ plugins hashbroker emulates beyond the core broker, each started only when enabled."""
