"""The queue's routes under `<rootUrl>/api/queue/v1/`, with TaskCluster's names and scope expressions.

Each handler unpacks its call, calls one operation of the queue and answers what the operation
answers, typed (queue/*.py declares the shapes). A body the route's schema checked is read as the
TypedDict below its schema (`call.body_as`).
"""

from __future__ import annotations

from typing import NotRequired, TypedDict

from taskyard.api.routing import Body, Call, Route, run_id
from taskyard.model import paging, schema, task_definition
from taskyard.model.errors import InputValidationError
from taskyard.model.identifiers import IDENT, SLUGID
from taskyard.model.runs import REPORTED_REASONS, check_exception_reason
from taskyard.model.scopes import Template
from taskyard.model.status import STATUS_ANSWER, StatusAnswer, TaskStatus
from taskyard.model.task_definition import PRIORITIES, Priority, TaskDefinition
from taskyard.queue import claims, groups, inspect, poll, tasks, workers
from taskyard.queue.service import Queue, definition_of

TASK_IDS = schema.obj(
    {"taskIds": schema.array(schema.string(pattern=SLUGID), max_items=tasks.MAX_BULK_IDS)},
    required=["taskIds"],
    additional=False,
)


class TaskIds(TypedDict):
    taskIds: list[str]


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
    {
        "workerGroup": schema.string(pattern=IDENT),
        "workerId": schema.string(pattern=IDENT),
        # The poll protocol's proof of the message the claim comes from (docs/poll.md).
        "messageId": schema.string(min_length=1, max_length=128),
        "receipt": schema.string(min_length=1, max_length=256),
        "signature": schema.string(min_length=1, max_length=256),
    },
    required=["workerGroup", "workerId"],
    additional=True,
)


class WorkerRequest(TypedDict):
    """claimTask's body; claimWork's adds `tasks`."""

    workerGroup: str
    workerId: str


class ClaimTaskRequest(WorkerRequest):
    messageId: NotRequired[str]
    receipt: NotRequired[str]
    signature: NotRequired[str]


class ClaimWorkRequest(WorkerRequest):
    tasks: NotRequired[int]


# The reasons of EXCEPTION_REASONS, and the first protocol's spellings of two of them (model/runs.py).
EXCEPTION = schema.obj({"reason": schema.enum(*REPORTED_REASONS)}, required=["reason"], additional=False)


class ExceptionRequest(TypedDict):
    reason: str


PRIORITY = schema.obj({"newPriority": schema.enum(*PRIORITIES)}, required=["newPriority"], additional=False)


class PriorityRequest(TypedDict):
    newPriority: Priority


QUARANTINE = schema.obj(
    {"quarantineUntil": schema.date_time(), "quarantineInfo": schema.string(max_length=4000)},
    required=["quarantineUntil"],
    additional=False,
)  # workers.Quarantine
DECLARE = schema.obj({"expires": schema.date_time()}, additional=False)  # workers.Declaration


class TaskEntry(TypedDict):
    taskId: str
    task: TaskDefinition


class Tasks(TypedDict):
    """The `tasks` call's answer."""

    tasks: list[TaskEntry]


class StatusEntry(TypedDict):
    taskId: str
    status: TaskStatus


class Statuses(TypedDict):
    statuses: list[StatusEntry]


PING = schema.obj({"alive": schema.boolean(), "uptime": schema.number()}, required=["alive", "uptime"])


class Ping(TypedDict):
    alive: bool
    uptime: float


class Version(TypedDict):
    source: str
    version: str
    commit: str
    build: str


def _q(call: Call) -> Queue:
    return call.services.queue


def _tq(call: Call) -> str:
    return call.params.get("taskQueueId") or f"{call.params['provisionerId']}/{call.params['workerType']}"


def _worker(call: Call) -> tuple[str, str]:
    """The worker the call names: in its body (claimWork, claimTask), or in its path."""
    if isinstance(call.body, dict) and "workerGroup" in call.body:
        body = call.body_as(WorkerRequest)
        return body["workerGroup"], body["workerId"]
    return call.params["workerGroup"], call.params["workerId"]


def _page(call: Call) -> paging.Query:
    return paging.parse(call.query)


async def task(call: Call) -> TaskDefinition:
    return await tasks.task(_q(call), call.params["taskId"])


async def status(call: Call) -> StatusAnswer:
    return await tasks.status(_q(call), call.params["taskId"])


async def bulk_tasks(call: Call) -> Tasks:
    found = await tasks.records(_q(call), call.body_as(TaskIds)["taskIds"])
    return {"tasks": [{"taskId": r.task_id, "task": definition_of(r)} for r in found]}


async def bulk_statuses(call: Call) -> Statuses:
    found = await tasks.records(_q(call), call.body_as(TaskIds)["taskIds"])
    return {"statuses": [{"taskId": r.task_id, "status": r.status()} for r in found]}


async def create_task(call: Call) -> StatusAnswer:
    return await tasks.create_task(_q(call), call.params["taskId"], call.body, guard=call.authorize)


async def schedule_task(call: Call) -> StatusAnswer:
    return await tasks.schedule_task(_q(call), call.params["taskId"], guard=call.authorize)


async def rerun_task(call: Call) -> StatusAnswer:
    return await tasks.rerun_task(_q(call), call.params["taskId"], guard=call.authorize)


async def cancel_task(call: Call) -> StatusAnswer:
    return await tasks.cancel_task(_q(call), call.params["taskId"], guard=call.authorize)


async def change_task_priority(call: Call) -> StatusAnswer:
    priority = call.body_as(PriorityRequest)["newPriority"]
    return await tasks.change_task_priority(_q(call), call.params["taskId"], priority, guard=call.authorize)


async def change_task_group_priority(call: Call) -> groups.TaskGroupPriorityChanged:
    group_id, priority = call.params["taskGroupId"], call.body_as(PriorityRequest)["newPriority"]
    return await groups.change_task_group_priority(_q(call), group_id, priority, guard=call.authorize)


async def claim_work(call: Call) -> claims.ClaimWorkAnswer:
    count = call.body_as(ClaimWorkRequest).get("tasks", 1)
    return {"tasks": await claims.claim_work(_q(call), _tq(call), _worker(call), count, gone=call.gone)}


# What claimTask quotes of a poll message; all three required under `--claim-messages required`.
MESSAGE_FIELDS = ("messageId", "receipt", "signature")


async def claim_task(call: Call) -> claims.Claim | claims.NoClaim:
    task_id, worker, body = call.params["taskId"], _worker(call), call.body_as(ClaimTaskRequest)
    missing = [f"body.{name}" for name in MESSAGE_FIELDS if name not in body]
    if missing and _q(call).config.claim_messages == "required":
        raise InputValidationError(
            f"{', '.join(missing)} {'is' if len(missing) == 1 else 'are'} required: this deployment "
            "requires claimTask to quote the poll message it claims from (messageId, receipt and "
            "signature, from pollTaskUrls' queues; --claim-messages required)"
        )
    message = poll.MessageProof(body.get("messageId"), body.get("receipt"), body.get("signature"))
    return await claims.claim_task(
        _q(call), task_id, run_id(call), worker, guard=call.authorize, message=message
    )


async def poll_task_urls(call: Call) -> poll.PollTaskUrls:
    return await poll.poll_task_urls(_q(call), call.params["provisionerId"], call.params["workerType"])


async def reclaim_task(call: Call) -> claims.Reclaimed:
    return await claims.reclaim_task(_q(call), call.params["taskId"], run_id(call))


async def report_completed(call: Call) -> StatusAnswer:
    return await claims.report(_q(call), call.params["taskId"], run_id(call), "completed", "completed")


async def report_failed(call: Call) -> StatusAnswer:
    return await claims.report(_q(call), call.params["taskId"], run_id(call), "failed", "failed")


async def report_exception(call: Call) -> StatusAnswer:
    reason = check_exception_reason(call.body_as(ExceptionRequest)["reason"])
    return await claims.report(_q(call), call.params["taskId"], run_id(call), "exception", reason)


async def list_task_group(call: Call) -> groups.TaskGroupList:
    return await groups.list_task_group(_q(call), call.params["taskGroupId"], _page(call))


async def get_task_group(call: Call) -> groups.TaskGroup:
    return await groups.get_task_group(_q(call), call.params["taskGroupId"])


async def seal_task_group(call: Call) -> groups.TaskGroup:
    return await groups.seal_task_group(_q(call), call.params["taskGroupId"], guard=call.authorize)


async def cancel_task_group(call: Call) -> groups.TaskGroupCancelled:
    return await groups.cancel_task_group(_q(call), call.params["taskGroupId"], guard=call.authorize)


async def list_dependent_tasks(call: Call) -> inspect.Dependents:
    return await inspect.list_dependents(_q(call), call.params["taskId"], _page(call))


async def pending_tasks(call: Call) -> inspect.PendingCount:
    return await inspect.pending_tasks(_q(call), _tq(call))


async def task_queue_counts(call: Call) -> inspect.Counts:
    return await inspect.counts(_q(call), _tq(call))


async def list_pending_tasks(call: Call) -> inspect.PendingList:
    return await inspect.list_pending(_q(call), _tq(call), _page(call))


async def list_claimed_tasks(call: Call) -> inspect.ClaimedList:
    return await inspect.list_claimed(_q(call), _tq(call), _page(call))


async def list_task_queues(call: Call) -> workers.TaskQueueList:
    return await workers.list_task_queues_page(_q(call), _page(call))


async def get_task_queue(call: Call) -> workers.TaskQueue:
    return await workers.get_task_queue(_q(call), _tq(call))


async def list_provisioners(call: Call) -> workers.ProvisionerList:
    return await workers.provisioners_page(_q(call), _page(call))


async def get_provisioner(call: Call) -> workers.Provisioner:
    return await workers.get_provisioner(_q(call), call.params["provisionerId"])


async def list_worker_types(call: Call) -> workers.WorkerTypeList:
    return await workers.worker_types_page(_q(call), call.params["provisionerId"], _page(call))


async def get_worker_type(call: Call) -> workers.WorkerType:
    return await workers.get_worker_type(_q(call), call.params["provisionerId"], call.params["workerType"])


async def list_workers(call: Call) -> workers.WorkerList:
    return await workers.list_workers(_q(call), _tq(call), _page(call), call.query.get("quarantined"))


async def get_worker(call: Call) -> workers.Worker:
    return await workers.get_worker(_q(call), _tq(call), _worker(call))


async def quarantine_worker(call: Call) -> workers.Worker:
    body = call.body_as(workers.Quarantine)
    return await workers.quarantine_worker(_q(call), _tq(call), _worker(call), body, call.client_id)


async def declare_worker(call: Call) -> workers.Worker:
    body = call.body_as(workers.Declaration)
    return await workers.declare_worker(_q(call), _tq(call), _worker(call), body, guard=call.authorize)


async def ping(call: Call) -> Ping:
    return {"alive": True, "uptime": call.services.uptime()}


async def empty(call: Call) -> Body:
    return {}


async def version(call: Call) -> Version:
    from taskyard import __version__

    return {
        "source": "https://github.com/taskyard/taskyard",
        "version": __version__,
        "commit": "",
        "build": "",
    }


def _as_resolver(name: str) -> Template:
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
# createTask's values come from the task definition it validates, with its defaults filled in.
CREATE_TASK_LOADS = ("scopes", "routes", "projectId", "schedulerId", "taskQueueId", "priorities")
RESOLVER_LOADS = ("schedulerId", "taskGroupId", "projectId")
CREATE_TASK_SCOPES = tasks.CREATE_TASK_SCOPES

ROUTES = [
    Route("GET", "/ping", "ping", ping, output=PING),
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
    Route("GET", "/task/{taskId}/status", "status", status, "queue:status:<taskId>", output=STATUS_ANSWER),
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
        loads=("schedulerId",),
    ),
    Route(
        "POST",
        "/task-group/{taskGroupId}/cancel",
        "cancelTaskGroup",
        cancel_task_group,
        "queue:cancel-task-group:<schedulerId>/<taskGroupId>",
        stability="experimental",
        loads=("schedulerId",),
    ),
    Route(
        "POST",
        "/task-group/{taskGroupId}/priority",
        "changeTaskGroupPriority",
        change_task_group_priority,
        "queue:change-task-group-priority:<schedulerId>/<taskGroupId>",
        PRIORITY,
        "experimental",
        loads=("schedulerId",),
    ),
    Route(
        "GET",
        "/task/{taskId}/dependents",
        "listDependentTasks",
        list_dependent_tasks,
        "queue:list-dependent-tasks:<taskId>",
    ),
    Route(
        "PUT",
        "/task/{taskId}",
        "createTask",
        create_task,
        CREATE_TASK_SCOPES,
        task_definition.REQUEST,
        loads=CREATE_TASK_LOADS,
        service_checks_input=True,
        output=STATUS_ANSWER,
    ),
    Route(
        "POST",
        "/task/{taskId}/schedule",
        "scheduleTask",
        schedule_task,
        _as_resolver("schedule-task"),
        loads=RESOLVER_LOADS,
        output=STATUS_ANSWER,
    ),
    Route(
        "POST",
        "/task/{taskId}/rerun",
        "rerunTask",
        rerun_task,
        _as_resolver("rerun-task"),
        loads=RESOLVER_LOADS,
        output=STATUS_ANSWER,
    ),
    Route(
        "POST",
        "/task/{taskId}/cancel",
        "cancelTask",
        cancel_task,
        _as_resolver("cancel-task"),
        loads=RESOLVER_LOADS,
        output=STATUS_ANSWER,
    ),
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
        loads=("taskQueueId",),
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
        loads=("provisionerId", "workerType"),
    ),
    Route(
        "GET",
        "/poll-task-url/{provisionerId}/{workerType}",
        "pollTaskUrls",
        poll_task_urls,
        {
            "AnyOf": [
                "queue:poll-task-urls:<provisionerId>/<workerType>",
                {"AllOf": ["queue:poll-task-urls", "assume:worker-type:<provisionerId>/<workerType>"]},
            ]
        },
        stability="deprecated",
    ),
    Route("POST", RUN + "/reclaim", "reclaimTask", reclaim_task, "queue:reclaim-task:<taskId>/<runId>"),
    Route(
        "POST",
        RUN + "/completed",
        "reportCompleted",
        report_completed,
        "queue:resolve-task:<taskId>/<runId>",
        output=STATUS_ANSWER,
    ),
    Route(
        "POST",
        RUN + "/failed",
        "reportFailed",
        report_failed,
        "queue:resolve-task:<taskId>/<runId>",
        output=STATUS_ANSWER,
    ),
    Route(
        "POST",
        RUN + "/exception",
        "reportException",
        report_exception,
        "queue:resolve-task:<taskId>/<runId>",
        EXCEPTION,
        output=STATUS_ANSWER,
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
        loads=("properties",),
    ),
]
