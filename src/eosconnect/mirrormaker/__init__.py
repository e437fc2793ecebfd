"""MirrorMaker 2 compatibility: its record formats, exact offset translation, and dedicated mode.

`formats` reads and writes MM2's offset-sync, checkpoint and heartbeat records byte for byte, so
MM2's tools (RemoteClusterUtils, its checkpoint connector, lag dashboards) keep working;
`translation` turns the offset syncs our exactly-once mirrors write into exact group offsets;
`config` reads an mm2.properties file; `driver` runs its flows (`eosconnect mirror-maker`).
"""
