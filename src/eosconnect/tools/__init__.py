"""Operator tools built on the runtime: the exactly-once verifier and the demo."""
