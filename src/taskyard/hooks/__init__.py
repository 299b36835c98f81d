"""The hooks service: task templates that fire on a schedule, on a trigger call, or on events.

`service.py` holds the `Hooks` object, `schedules.py` the cron rules (next fire time),
`definitions.py` creating, changing, reading and removing hooks (and their trigger tokens and last
fires), `firing.py` rendering a hook's JSON-e template and creating its task as the hook's role,
and the scheduler's loop, `bindings.py` the consumers that fire hooks on the events they bind.
"""
