"""The task-graph scheduler's routes, under `/api/scheduler/v1`: TaskCluster's scheduler API."""

from __future__ import annotations

from taskyard.api.routing import Body, Call, Route
from taskyard.model.types import LooseJSON
from taskyard.scheduler import graphs


async def ping(call: Call) -> Body:
    return {"alive": True, "uptime": call.services.uptime()}


async def create_task_graph(call: Call) -> graphs.GraphStatus:
    scheduler = call.services.scheduler
    return await graphs.create_task_graph(
        scheduler, call.params["taskGraphId"], call.body, guard=call.authorize
    )


async def extend_task_graph(call: Call) -> graphs.GraphStatus:
    return await graphs.extend_task_graph(call.services.scheduler, call.params["taskGraphId"], call.body)


async def status(call: Call) -> graphs.GraphStatus:
    return await graphs.status(call.services.scheduler, call.params["taskGraphId"])


async def info(call: Call) -> graphs.GraphInfo:
    return await graphs.info(call.services.scheduler, call.params["taskGraphId"])


async def inspect(call: Call) -> graphs.GraphInspection:
    return await graphs.inspect(call.services.scheduler, call.params["taskGraphId"])


async def inspect_task(call: Call) -> LooseJSON:
    scheduler = call.services.scheduler
    return await graphs.inspect_task(scheduler, call.params["taskGraphId"], call.params["taskId"])


# The graph's scopes and routes come from the body, once the service has checked its shape.
CREATE_TASK_GRAPH_SCOPES = {
    "AllOf": [
        "scheduler:create-task-graph",
        {"for": "scope", "in": "scopes", "each": "<scope>"},
        {"for": "route", "in": "routes", "each": "scheduler:route:<route>"},
    ]
}

ROUTES = [
    Route("GET", "/ping", "ping", ping),
    Route(
        "PUT",
        "/task-graph/{taskGraphId}",
        "createTaskGraph",
        create_task_graph,
        CREATE_TASK_GRAPH_SCOPES,
        loads=("scopes", "routes"),
    ),
    Route(
        "POST",
        "/task-graph/{taskGraphId}/extend",
        "extendTaskGraph",
        extend_task_graph,
        "scheduler:extend-task-graph:<taskGraphId>",
    ),
    Route("GET", "/task-graph/{taskGraphId}/status", "status", status),
    Route("GET", "/task-graph/{taskGraphId}/info", "info", info),
    Route("GET", "/task-graph/{taskGraphId}/inspect", "inspect", inspect),
    Route("GET", "/task-graph/{taskGraphId}/inspect/{taskId}", "inspectTask", inspect_task),
]
