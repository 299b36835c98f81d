"""taskyard: TaskCluster's queue, small and fast, on SQLite or PostgreSQL."""

__version__ = "0.1.0"
