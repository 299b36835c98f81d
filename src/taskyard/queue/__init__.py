"""The queue service: task lifecycle, claims, groups, dependencies, workers and resolvers."""
