"""The index service's routes, under `/api/index/v1`: TaskCluster's index API.

Paths in URLs are index paths (`a.b.c`): `indexPath` names an entry, `namespace` a namespace to
list (empty: the root) or, for insertTask and deleteTask, the entry's full path, as TaskCluster
names them. Both are checked against the path rules (`model/index_paths.py`) before anything else.
"""

from __future__ import annotations

from typing import TypedDict

from taskyard.api.routing import Body, Call, Reply, Route
from taskyard.index import entries
from taskyard.index.service import Index
from taskyard.model import paging, schema
from taskyard.model.identifiers import SLUGID
from taskyard.model.index_paths import MAX_PATH, Entry, IndexedTask, check_rank
from taskyard.model.types import JSONObject
from taskyard.queue import artifacts


def _ix(call: Call) -> Index:
    return call.services.index


async def ping(call: Call) -> Body:
    return {"alive": True, "uptime": call.services.uptime()}


class InsertTaskRequest(TypedDict):
    taskId: str
    rank: int | float
    data: JSONObject
    expires: str


INSERT_TASK = schema.obj(
    {
        "taskId": schema.string(pattern=SLUGID),
        "rank": schema.number(),
        "data": schema.any_object(),
        "expires": schema.date_time(),
    },
    required=["taskId", "rank", "data", "expires"],
    additional=False,
)
FIND_TASKS = schema.obj({"indexes": schema.array(schema.string())}, additional=False)
INDEXED_TASK = schema.obj(
    {
        "namespace": schema.string(max_length=MAX_PATH),
        "taskId": schema.string(pattern=SLUGID),
        "rank": schema.number(),
        "data": schema.any_object(),
        "expires": schema.date_time(),
    },
    required=["namespace", "taskId", "rank", "data", "expires"],
    additional=False,
)
_TOKEN = {"continuationToken": schema.string()}
TASK_LIST = schema.obj({"tasks": schema.array(INDEXED_TASK), **_TOKEN}, required=["tasks"], additional=False)
NAMESPACE_LIST = schema.obj(
    {
        "namespaces": schema.array(
            schema.obj(
                {"namespace": schema.string(), "name": schema.string(), "expires": schema.date_time()},
                required=["namespace", "name", "expires"],
                additional=False,
            )
        ),
        **_TOKEN,
    },
    required=["namespaces"],
    additional=False,
)


async def insert_task(call: Call) -> IndexedTask:
    body = call.body_as(InsertTaskRequest)
    entry = Entry(body["taskId"], check_rank(body["rank"]), body["data"], schema.to_millis(body["expires"]))
    return await entries.insert_task(_ix(call), call.params["namespace"], entry)


async def delete_task(call: Call) -> Body:
    await entries.delete_task(_ix(call), call.params["namespace"])
    return {}


async def find_task(call: Call) -> IndexedTask:
    return await entries.find_task(_ix(call), call.params["indexPath"])


async def find_tasks_at_index(call: Call) -> entries.FoundTasks:
    body = call.body if isinstance(call.body, dict) else {}
    found = body.get("indexes", [])
    paths = [p for p in found if isinstance(p, str)] if isinstance(found, list) else []
    call.authorize(indexes=paths)
    return await entries.find_tasks_at_index(_ix(call), paths, paging.parse(call.query))


async def list_namespaces(call: Call) -> entries.NamespaceList:
    namespace = call.params.get("namespace", "")
    return await entries.list_namespaces(_ix(call), namespace, paging.parse(call.query))


async def list_tasks(call: Call) -> entries.TaskList:
    namespace = call.params.get("namespace", "")
    return await entries.list_tasks(_ix(call), namespace, paging.parse(call.query))


async def find_artifact_from_task(call: Call) -> Reply:
    """303 to the content of the latest run's artifact `name` of the task indexed at `indexPath`,
    with no JSON body (TaskCluster's clients then hand the caller the response, as taskgraph
    reads it). The caller's `queue:get-artifact` scopes are checked first, on every name of a
    link chain as getLatestArtifact checks them."""
    name = call.params["name"]
    call.authorize(names=[name])
    found = await entries.find_task(_ix(call), call.params["indexPath"])
    q = call.services.queue
    artifact = await artifacts.follow(q, found["taskId"], None, name, guard=call.authorize)
    content = artifacts.content(q, artifact)
    if content["storageType"] == "error":
        return Reply(424, {"reason": content["reason"], "message": content["message"]})
    return Reply(303, None, {"location": content["url"]})


FIND_ARTIFACT_SCOPES = {"AllOf": [{"for": "n", "in": "names", "each": "queue:get-artifact:<n>"}]}
FIND_TASKS_SCOPES = {"AllOf": [{"for": "p", "in": "indexes", "each": "index:find-task:<p>"}]}

ROUTES = [
    Route("GET", "/ping", "ping", ping),
    Route(
        "GET",
        "/task/{indexPath}/artifacts/{name:path}",
        "findArtifactFromTask",
        find_artifact_from_task,
        FIND_ARTIFACT_SCOPES,
        loads=("names",),
    ),
    Route(
        "GET", "/task/{indexPath}", "findTask", find_task, "index:find-task:<indexPath>", output=INDEXED_TASK
    ),
    Route(
        "PUT",
        "/task/{namespace}",
        "insertTask",
        insert_task,
        "index:insert-task:<namespace>",
        INSERT_TASK,
        output=INDEXED_TASK,
    ),
    Route("DELETE", "/task/{namespace}", "deleteTask", delete_task, "index:delete-task:<namespace>"),
    Route(
        "POST",
        "/tasks/indexes",
        "findTasksAtIndex",
        find_tasks_at_index,
        FIND_TASKS_SCOPES,
        FIND_TASKS,
        "experimental",
        loads=("indexes",),
        output=TASK_LIST,
    ),
    Route(
        "GET",
        "/namespaces/{namespace:path}",
        "listNamespaces",
        list_namespaces,
        "index:list-namespaces:<namespace>",
        output=NAMESPACE_LIST,
    ),
    Route(
        "GET",
        "/tasks/{namespace:path}",
        "listTasks",
        list_tasks,
        "index:list-tasks:<namespace>",
        output=TASK_LIST,
    ),
]
