"""Authentication and the auth service: Hawk, temporary credentials, clients, roles, built-in clients."""
