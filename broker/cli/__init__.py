"""The command line: `hashbroker serve|demo|ctl|...` and rabbitmqctl's verbs over the management API."""
