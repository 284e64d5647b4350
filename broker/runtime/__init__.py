"""The running broker's machinery under the `Broker`: listener, persistence adapter, alarms,
policies at run time, settings."""
