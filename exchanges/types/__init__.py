"""One module per exchange type, each RabbitMQ's (or its plugin's) behaviour."""
