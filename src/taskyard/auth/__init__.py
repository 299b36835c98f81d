"""Authentication: Hawk, temporary credentials and (later) clients, roles and scopes."""
