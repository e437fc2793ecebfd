"""The worker's limits on what connectors reach: `file.allowed.dirs` (`file_access`) and
`database.allowed.hosts` (`database_hosts`), checked at validation and again where tasks connect.
"""
