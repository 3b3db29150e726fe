"""Built-in plugins; outside plugins use the same surface (`mnemobus.kernel.plugin`)."""
