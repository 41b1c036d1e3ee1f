"""Configuration with Kafka's keys, defaults and validation."""
