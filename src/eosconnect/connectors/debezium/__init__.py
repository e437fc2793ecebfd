"""Debezium's event format, shared by the change data capture sources (PostgreSQL, MySQL/MariaDB):
the envelope and its schemas, the headers, the heartbeat, the include/exclude lists and the
type-handling modes - what a consumer written against Debezium relies on, whichever database."""
