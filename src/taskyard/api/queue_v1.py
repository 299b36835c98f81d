"""The queue's routes under `<rootUrl>/api/queue/v1/`, with TaskCluster's names and scope expressions."""

from __future__ import annotations

from typing import Any

from taskyard.api.routing import Call, Route, run_id
from taskyard.model import paging, schema
from taskyard.model.identifiers import IDENT, SLUGID
from taskyard.model.runs import EXCEPTION_REASONS
from taskyard.model.task_definition import PRIORITIES
from taskyard.queue import claims, groups, inspect, tasks, workers

TASK_IDS = schema.obj(
    {"taskIds": schema.array(schema.string(pattern=SLUGID), max_items=tasks.MAX_BULK_IDS)},
    required=["taskIds"],
    additional=False,
)
CLAIM_WORK = schema.obj(
    {
        "workerGroup": schema.string(pattern=IDENT),
        "workerId": schema.string(pattern=IDENT),
        "tasks": schema.integer(minimum=1, maximum=claims.MAX_TASKS_PER_CLAIM),
    },
    required=["workerGroup", "workerId"],
    additional=False,
)
CLAIM_TASK = schema.obj(
    {"workerGroup": schema.string(pattern=IDENT), "workerId": schema.string(pattern=IDENT)},
    required=["workerGroup", "workerId"],
    additional=True,
)
EXCEPTION = schema.obj({"reason": schema.enum(*EXCEPTION_REASONS)}, required=["reason"], additional=False)
PRIORITY = schema.obj({"newPriority": schema.enum(*PRIORITIES)}, required=["newPriority"], additional=False)
QUARANTINE = schema.obj(
    {"quarantineUntil": schema.date_time(), "quarantineInfo": schema.string(max_length=4000)},
    required=["quarantineUntil"],
    additional=False,
)
DECLARE = schema.obj({"expires": schema.date_time()}, additional=False)


def _q(call: Call) -> Any:
    return call.services.queue


def _tq(call: Call) -> str:
    return call.params.get("taskQueueId") or f"{call.params['provisionerId']}/{call.params['workerType']}"


def _worker(call: Call) -> tuple[str, str]:
    source = call.body if "workerGroup" in (call.body or {}) else call.params
    return source["workerGroup"], source["workerId"]


def _page(call: Call) -> paging.Query:
    return paging.parse(call.query)


async def task(call: Call) -> Any:
    return await tasks.task(_q(call), call.params["taskId"])


async def status(call: Call) -> Any:
    return await tasks.status(_q(call), call.params["taskId"])


async def bulk_tasks(call: Call) -> Any:
    found = await tasks.records(_q(call), call.body["taskIds"])
    from taskyard.queue.service import definition_of

    return {"tasks": [{"taskId": r.task_id, "task": definition_of(r)} for r in found]}


async def bulk_statuses(call: Call) -> Any:
    found = await tasks.records(_q(call), call.body["taskIds"])
    return {"statuses": [{"taskId": r.task_id, "status": r.status()} for r in found]}


async def create_task(call: Call) -> Any:
    definition = tasks.define(_q(call), call.params["taskId"], call.body)
    priority = definition["priority"]
    call.authorize(
        scopes=definition["scopes"],
        routes=definition["routes"],
        projectId=definition["projectId"],
        schedulerId=definition["schedulerId"],
        taskQueueId=definition["taskQueueId"],
        # any scope for the task's priority or a higher one will do
        priorities=PRIORITIES[: PRIORITIES.index(priority) + 1],
    )
    return await tasks.create_defined(_q(call), call.params["taskId"], definition)


async def _authorize_for_task(call: Call) -> None:
    """Check a scope template that names the task's own fields (loaded here: 404 comes first)."""
    rec = await tasks.require(_q(call), tasks.check_task_id(call.params["taskId"]))
    call.authorize(
        schedulerId=rec.scheduler_id,
        taskGroupId=rec.task_group_id,
        projectId=rec.project_id,
        taskQueueId=rec.task_queue_id,
        provisionerId=rec.definition["provisionerId"],
        workerType=rec.definition["workerType"],
    )


async def _authorize_for_group(call: Call) -> None:
    group = await groups.get_task_group(_q(call), call.params["taskGroupId"])
    call.authorize(schedulerId=group["schedulerId"])


async def schedule_task(call: Call) -> Any:
    await _authorize_for_task(call)
    return await tasks.schedule_task(_q(call), call.params["taskId"])


async def rerun_task(call: Call) -> Any:
    await _authorize_for_task(call)
    return await tasks.rerun_task(_q(call), call.params["taskId"])


async def cancel_task(call: Call) -> Any:
    await _authorize_for_task(call)
    return await tasks.cancel_task(_q(call), call.params["taskId"])


async def change_task_priority(call: Call) -> Any:
    await _authorize_for_task(call)
    return await tasks.change_task_priority(_q(call), call.params["taskId"], call.body)


async def change_task_group_priority(call: Call) -> Any:
    await _authorize_for_group(call)
    return await groups.change_task_group_priority(
        _q(call), call.params["taskGroupId"], call.body["newPriority"]
    )


async def claim_work(call: Call) -> Any:
    count = call.body.get("tasks", 1)
    return {"tasks": await claims.claim_work(_q(call), _tq(call), _worker(call), count, gone=call.gone)}


async def claim_task(call: Call) -> Any:
    await _authorize_for_task(call)
    return await claims.claim_task(_q(call), call.params["taskId"], run_id(call), _worker(call))


async def reclaim_task(call: Call) -> Any:
    return await claims.reclaim_task(_q(call), call.params["taskId"], run_id(call))


async def report_completed(call: Call) -> Any:
    return await claims.report(_q(call), call.params["taskId"], run_id(call), "completed", "completed")


async def report_failed(call: Call) -> Any:
    return await claims.report(_q(call), call.params["taskId"], run_id(call), "failed", "failed")


async def report_exception(call: Call) -> Any:
    reason = call.body["reason"]
    return await claims.report(_q(call), call.params["taskId"], run_id(call), "exception", reason)


async def list_task_group(call: Call) -> Any:
    return await groups.list_task_group(_q(call), call.params["taskGroupId"], _page(call))


async def get_task_group(call: Call) -> Any:
    return await groups.get_task_group(_q(call), call.params["taskGroupId"])


async def seal_task_group(call: Call) -> Any:
    await _authorize_for_group(call)
    return await groups.seal_task_group(_q(call), call.params["taskGroupId"])


async def cancel_task_group(call: Call) -> Any:
    await _authorize_for_group(call)
    return await groups.cancel_task_group(_q(call), call.params["taskGroupId"])


async def list_dependent_tasks(call: Call) -> Any:
    return await inspect.list_dependents(_q(call), call.params["taskId"], _page(call))


async def pending_tasks(call: Call) -> Any:
    return await inspect.pending_tasks(_q(call), _tq(call))


async def task_queue_counts(call: Call) -> Any:
    return await inspect.counts(_q(call), _tq(call))


async def list_pending_tasks(call: Call) -> Any:
    return await inspect.list_pending(_q(call), _tq(call), _page(call))


async def list_claimed_tasks(call: Call) -> Any:
    return await inspect.list_claimed(_q(call), _tq(call), _page(call))


async def list_task_queues(call: Call) -> Any:
    return await workers.list_task_queues_page(_q(call), _page(call))


async def get_task_queue(call: Call) -> Any:
    return await workers.get_task_queue(_q(call), _tq(call))


async def list_provisioners(call: Call) -> Any:
    return await workers.provisioners_page(_q(call), _page(call))


async def get_provisioner(call: Call) -> Any:
    return await workers.get_provisioner(_q(call), call.params["provisionerId"])


async def list_worker_types(call: Call) -> Any:
    return await workers.worker_types_page(_q(call), call.params["provisionerId"], _page(call))


async def get_worker_type(call: Call) -> Any:
    return await workers.get_worker_type(_q(call), call.params["provisionerId"], call.params["workerType"])


async def list_workers(call: Call) -> Any:
    return await workers.list_workers(_q(call), _tq(call), _page(call), call.query.get("quarantined"))


async def get_worker(call: Call) -> Any:
    return await workers.get_worker(_q(call), _tq(call), _worker(call))


async def quarantine_worker(call: Call) -> Any:
    return await workers.quarantine_worker(_q(call), _tq(call), _worker(call), call.body, call.client_id)


async def declare_worker(call: Call) -> Any:
    call.authorize(properties=sorted(call.body))
    return await workers.declare_worker(_q(call), _tq(call), _worker(call), call.body)


async def ping(call: Call) -> Any:
    return {"alive": True, "uptime": call.services.uptime()}


async def empty(call: Call) -> Any:
    return {}


async def version(call: Call) -> Any:
    from taskyard import __version__

    return {
        "source": "https://github.com/taskyard/taskyard",
        "version": __version__,
        "commit": "",
        "build": "",
    }


def _as_resolver(name: str) -> dict[str, list[Any]]:
    """scheduleTask / rerunTask / cancelTask share one shape of scope expression."""
    return {
        "AnyOf": [
            f"queue:{name}:<schedulerId>/<taskGroupId>/<taskId>",
            f"queue:{name}-in-project:<projectId>",
            {"AllOf": [f"queue:{name}", "assume:scheduler-id:<schedulerId>/<taskGroupId>"]},
        ]
    }


RUN = "/task/{taskId}/runs/{runId}"
WORKER_PATH = "/provisioners/{provisionerId}/worker-types/{workerType}/workers/{workerGroup}/{workerId}"
CREATE_TASK_SCOPES = {
    "AllOf": [
        {"for": "scope", "in": "scopes", "each": "<scope>"},
        {"for": "route", "in": "routes", "each": "queue:route:<route>"},
        "queue:create-task:project:<projectId>",
        "queue:scheduler-id:<schedulerId>",
        {
            "AnyOf": [
                {"for": "priority", "in": "priorities", "each": "queue:create-task:<priority>:<taskQueueId>"}
            ]
        },
    ]
}

ROUTES = [
    Route("GET", "/ping", "ping", ping),
    Route("GET", "/__heartbeat__", "heartbeat", empty),
    Route("GET", "/__lbheartbeat__", "lbheartbeat", empty),
    Route("GET", "/__version__", "version", version),
    Route("GET", "/task/{taskId}", "task", task, "queue:get-task:<taskId>"),
    Route(
        "POST",
        "/tasks",
        "tasks",
        bulk_tasks,
        {"AllOf": [{"for": "taskId", "in": "taskIds", "each": "queue:get-task:<taskId>"}]},
        TASK_IDS,
        "experimental",
        scope_body=("taskIds",),
    ),
    Route(
        "POST",
        "/tasks/status",
        "statuses",
        bulk_statuses,
        {"AllOf": [{"for": "taskId", "in": "taskIds", "each": "queue:status:<taskId>"}]},
        TASK_IDS,
        "experimental",
        scope_body=("taskIds",),
    ),
    Route("GET", "/task/{taskId}/status", "status", status, "queue:status:<taskId>"),
    Route(
        "GET",
        "/task-group/{taskGroupId}/list",
        "listTaskGroup",
        list_task_group,
        "queue:list-task-group:<taskGroupId>",
    ),
    Route(
        "GET",
        "/task-group/{taskGroupId}",
        "getTaskGroup",
        get_task_group,
        "queue:list-task-group:<taskGroupId>",
    ),
    Route(
        "POST",
        "/task-group/{taskGroupId}/seal",
        "sealTaskGroup",
        seal_task_group,
        "queue:seal-task-group:<schedulerId>/<taskGroupId>",
        stability="experimental",
    ),
    Route(
        "POST",
        "/task-group/{taskGroupId}/cancel",
        "cancelTaskGroup",
        cancel_task_group,
        "queue:cancel-task-group:<schedulerId>/<taskGroupId>",
        stability="experimental",
    ),
    Route(
        "POST",
        "/task-group/{taskGroupId}/priority",
        "changeTaskGroupPriority",
        change_task_group_priority,
        "queue:change-task-group-priority:<schedulerId>/<taskGroupId>",
        PRIORITY,
        "experimental",
    ),
    Route(
        "GET",
        "/task/{taskId}/dependents",
        "listDependentTasks",
        list_dependent_tasks,
        "queue:list-dependent-tasks:<taskId>",
    ),
    Route("PUT", "/task/{taskId}", "createTask", create_task, CREATE_TASK_SCOPES),
    Route("POST", "/task/{taskId}/schedule", "scheduleTask", schedule_task, _as_resolver("schedule-task")),
    Route("POST", "/task/{taskId}/rerun", "rerunTask", rerun_task, _as_resolver("rerun-task")),
    Route("POST", "/task/{taskId}/cancel", "cancelTask", cancel_task, _as_resolver("cancel-task")),
    Route(
        "POST",
        "/task/{taskId}/priority",
        "changeTaskPriority",
        change_task_priority,
        {
            "AnyOf": [
                "queue:change-task-priority:<taskId>",
                "queue:change-task-priority-in-queue:<taskQueueId>",
            ]
        },
        PRIORITY,
        "experimental",
    ),
    Route(
        "POST",
        "/claim-work/{taskQueueId:path}",
        "claimWork",
        claim_work,
        {"AllOf": ["queue:claim-work:<taskQueueId>", "queue:worker-id:<workerGroup>/<workerId>"]},
        CLAIM_WORK,
        long_poll=True,
        scope_body=("workerGroup", "workerId"),
    ),
    Route(
        "POST",
        RUN + "/claim",
        "claimTask",
        claim_task,
        {
            "AllOf": [
                "queue:claim-task:<provisionerId>/<workerType>",
                "queue:worker-id:<workerGroup>/<workerId>",
            ]
        },
        CLAIM_TASK,
        "deprecated",
        scope_body=("workerGroup", "workerId"),
    ),
    Route("POST", RUN + "/reclaim", "reclaimTask", reclaim_task, "queue:reclaim-task:<taskId>/<runId>"),
    Route(
        "POST", RUN + "/completed", "reportCompleted", report_completed, "queue:resolve-task:<taskId>/<runId>"
    ),
    Route("POST", RUN + "/failed", "reportFailed", report_failed, "queue:resolve-task:<taskId>/<runId>"),
    Route(
        "POST",
        RUN + "/exception",
        "reportException",
        report_exception,
        "queue:resolve-task:<taskId>/<runId>",
        EXCEPTION,
    ),
    Route(
        "GET",
        "/pending/{taskQueueId:path}",
        "pendingTasks",
        pending_tasks,
        "queue:pending-count:<taskQueueId>",
        stability="deprecated",
    ),
    Route(
        "GET",
        "/task-queues/{taskQueueId:path}/counts",
        "taskQueueCounts",
        task_queue_counts,
        {"AllOf": ["queue:pending-count:<taskQueueId>", "queue:claimed-count:<taskQueueId>"]},
    ),
    Route(
        "GET",
        "/task-queues/{taskQueueId:path}/pending",
        "listPendingTasks",
        list_pending_tasks,
        "queue:pending-list:<taskQueueId>",
        stability="experimental",
    ),
    Route(
        "GET",
        "/task-queues/{taskQueueId:path}/claimed",
        "listClaimedTasks",
        list_claimed_tasks,
        "queue:claimed-list:<taskQueueId>",
        stability="experimental",
    ),
    Route("GET", "/task-queues", "listTaskQueues", list_task_queues, "queue:list-task-queues"),
    Route(
        "GET",
        "/task-queues/{taskQueueId:path}",
        "getTaskQueue",
        get_task_queue,
        "queue:get-task-queue:<taskQueueId>",
    ),
    Route(
        "GET",
        "/provisioners",
        "listProvisioners",
        list_provisioners,
        "queue:list-provisioners",
        stability="deprecated",
    ),
    Route(
        "GET",
        "/provisioners/{provisionerId}",
        "getProvisioner",
        get_provisioner,
        "queue:get-provisioner:<provisionerId>",
        stability="deprecated",
    ),
    Route(
        "GET",
        "/provisioners/{provisionerId}/worker-types",
        "listWorkerTypes",
        list_worker_types,
        "queue:list-worker-types:<provisionerId>",
        stability="deprecated",
    ),
    Route(
        "GET",
        "/provisioners/{provisionerId}/worker-types/{workerType}",
        "getWorkerType",
        get_worker_type,
        "queue:get-worker-type:<provisionerId>/<workerType>",
        stability="deprecated",
    ),
    Route(
        "GET",
        "/provisioners/{provisionerId}/worker-types/{workerType}/workers",
        "listWorkers",
        list_workers,
        "queue:list-workers:<provisionerId>/<workerType>",
        stability="deprecated",
    ),
    Route(
        "GET",
        WORKER_PATH,
        "getWorker",
        get_worker,
        "queue:get-worker:<provisionerId>/<workerType>/<workerGroup>/<workerId>",
        stability="deprecated",
    ),
    Route(
        "PUT",
        WORKER_PATH,
        "quarantineWorker",
        quarantine_worker,
        "queue:quarantine-worker:<provisionerId>/<workerType>/<workerGroup>/<workerId>",
        QUARANTINE,
        "experimental",
    ),
    Route(
        "PUT",
        "/provisioners/{provisionerId}/worker-types/{workerType}/{workerGroup}/{workerId}",
        "declareWorker",
        declare_worker,
        {
            "AllOf": [
                {
                    "for": "property",
                    "in": "properties",
                    "each": "queue:declare-worker:<provisionerId>/<workerType>/<workerGroup>/<workerId>#<property>",
                }
            ]
        },
        DECLARE,
        "experimental",
    ),
]
