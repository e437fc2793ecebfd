"""Source connectors hosted as subprocesses that speak a line-delimited JSON protocol on stdout:
Airbyte sources (`AirbyteSource`) and Singer taps (`SingerSource`).

`process` runs one and reads its lines with backpressure, `executables` finds the program to run,
`json_schema` turns a stream's JSON Schema into a Connect schema, `airbyte_protocol` and
`checkpoints` turn messages into records and states into source offsets that close transactions.
"""
