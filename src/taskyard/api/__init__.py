"""The HTTP edge: TaskCluster's routes, JSON bodies, status codes and error bodies."""
