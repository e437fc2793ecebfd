"""MirrorMaker 2's dedicated mode (`eosconnect mirror-maker mm2.properties`): an application on top
of the library.

`config` reads an mm2.properties file into one worker and its connectors per target cluster,
`driver` runs them, `cli` is the commands, `client` translates a group's offsets for a consumer
(MM2's RemoteClusterUtils). The mirror connectors themselves, MM2's record formats and the exact
offset translation live with the connectors (connectors/mirror*.py).
"""
