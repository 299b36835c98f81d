"""The queue's artifact routes (docs/protocol.md, Artifacts), with TaskCluster's paths, names and scopes.

Names are `{name:path}`: they hold `/`. getArtifact and friends check
`queue:get-artifact:<name>` for every name on the link chain they follow (AllOf).
"""

from __future__ import annotations

from taskyard.api.routing import Call, Reply, Route, run_id
from taskyard.model import artifacts as rules
from taskyard.model import paging, schema
from taskyard.model.artifacts import Artifact, ArtifactInfo
from taskyard.model.errors import InvalidRequestArguments
from taskyard.queue import artifacts, livelogs
from taskyard.queue.service import Queue

STORAGE_HEADER = "x-taskcluster-artifact-storage-type"
GET_SCOPES = {"AllOf": [{"for": "n", "in": "names", "each": "queue:get-artifact:<n>"}]}
GET_LOADS = ("names",)  # every name on the link chain, which the service follows
CREATE_SCOPES = "queue:create-artifact:<taskId>/<runId>"
FINISH = schema.obj({"uploadId": schema.string()}, additional=True)


def _q(call: Call) -> Queue:
    return call.services.queue


def _name(call: Call) -> str:
    return rules.check_name(call.params["name"], "URL parameter name", InvalidRequestArguments)


async def create_artifact(call: Call) -> artifacts.Created:
    return await artifacts.create_artifact(
        _q(call), call.params["taskId"], run_id(call), _name(call), call.body
    )


async def finish_artifact(call: Call) -> Reply:
    await artifacts.finish_artifact(_q(call), call.params["taskId"], run_id(call), _name(call))
    return Reply(204)


async def append_live_log(call: Call) -> livelogs.Appended:
    """A taskyard extension: the worker's live log, streamed by the URL it answers (livelog_v1)."""
    return await livelogs.append(_q(call), call.params["taskId"], run_id(call), _name(call), call.body)


async def _follow(call: Call, run: int | None) -> Artifact:
    task_id, name = call.params["taskId"], call.params["name"]
    return await artifacts.follow(_q(call), task_id, run, name, guard=call.authorize)


def _redirect(call: Call, found: Artifact) -> Reply:
    content = artifacts.content(_q(call), found)
    headers: dict[str, str] = {STORAGE_HEADER: found.storage_type}
    if found.storage_type == "error":
        return Reply(424, {"reason": content["reason"], "message": content["message"]}, headers)
    return Reply(303, content, {**headers, "location": content["url"]})


async def get_artifact(call: Call) -> Reply:
    return _redirect(call, await _follow(call, run_id(call)))


async def get_latest_artifact(call: Call) -> Reply:
    return _redirect(call, await _follow(call, None))


async def artifact(call: Call) -> artifacts.Content:
    return artifacts.content(_q(call), await _follow(call, run_id(call)))


async def latest_artifact(call: Call) -> artifacts.Content:
    return artifacts.content(_q(call), await _follow(call, None))


async def artifact_info(call: Call) -> ArtifactInfo:
    return await artifacts.info(_q(call), call.params["taskId"], run_id(call), _name(call))


async def latest_artifact_info(call: Call) -> ArtifactInfo:
    task_id, name = call.params["taskId"], _name(call)  # a bad name is a 400 before any lookup
    latest = await artifacts.latest_run_id(_q(call), task_id)
    return await artifacts.info(_q(call), task_id, latest, name)


async def list_artifacts(call: Call) -> artifacts.ArtifactList:
    page = paging.parse(call.query)
    return await artifacts.list_artifacts(_q(call), call.params["taskId"], run_id(call), page)


async def list_latest_artifacts(call: Call) -> artifacts.ArtifactList:
    page = paging.parse(call.query)
    return await artifacts.list_artifacts(_q(call), call.params["taskId"], None, page)


RUN = "/task/{taskId}/runs/{runId}"
LATEST = "/task/{taskId}"
NAME = "{name:path}"

ROUTES = [
    Route("POST", f"{RUN}/artifacts/{NAME}", "createArtifact", create_artifact, CREATE_SCOPES, rules.REQUEST),
    Route("PUT", f"{RUN}/artifacts/{NAME}", "finishArtifact", finish_artifact, CREATE_SCOPES, FINISH),
    Route(
        "POST",
        f"{RUN}/live-log/{NAME}",
        "appendLiveLog",
        append_live_log,
        CREATE_SCOPES,
        livelogs.APPEND_REQUEST,
        "experimental",
    ),
    Route("GET", f"{RUN}/artifacts/{NAME}", "getArtifact", get_artifact, GET_SCOPES, loads=GET_LOADS),
    Route(
        "GET",
        f"{LATEST}/artifacts/{NAME}",
        "getLatestArtifact",
        get_latest_artifact,
        GET_SCOPES,
        loads=GET_LOADS,
    ),
    Route(
        "GET", f"{RUN}/artifacts", "listArtifacts", list_artifacts, "queue:list-artifacts:<taskId>:<runId>"
    ),
    Route(
        "GET",
        f"{LATEST}/artifacts",
        "listLatestArtifacts",
        list_latest_artifacts,
        "queue:list-artifacts:<taskId>",
    ),
    Route("GET", f"{RUN}/artifact-info/{NAME}", "artifactInfo", artifact_info, "queue:get-artifact:<name>"),
    Route(
        "GET",
        f"{LATEST}/artifact-info/{NAME}",
        "latestArtifactInfo",
        latest_artifact_info,
        "queue:get-artifact:<name>",
    ),
    Route("GET", f"{RUN}/artifact-content/{NAME}", "artifact", artifact, GET_SCOPES, loads=GET_LOADS),
    Route(
        "GET",
        f"{LATEST}/artifact-content/{NAME}",
        "latestArtifact",
        latest_artifact,
        GET_SCOPES,
        loads=GET_LOADS,
    ),
]
