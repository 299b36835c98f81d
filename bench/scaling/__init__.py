"""bench/scale.py's parts: the server it times (server), direct SQL on its database (database), the
measurements (steps), the table (table) and the options (options)."""
