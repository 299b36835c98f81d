// Drives a task through its lifecycle with TaskCluster's JavaScript client, and prints what happened
// as JSON for tests/e2e/test_js_client.py to check. Reads TASKCLUSTER_ROOT_URL, TASKCLUSTER_CLIENT_ID,
// TASKCLUSTER_ACCESS_TOKEN and TASK_QUEUE_ID from the environment.
import taskcluster from "taskcluster-client";

const rootUrl = process.env.TASKCLUSTER_ROOT_URL;
const credentials = {
  clientId: process.env.TASKCLUSTER_CLIENT_ID,
  accessToken: process.env.TASKCLUSTER_ACCESS_TOKEN,
};
const taskQueueId = process.env.TASK_QUEUE_ID;
const queue = new taskcluster.Queue({ rootUrl, credentials, retries: 0 });
const result = {};

async function refusal(call) {
  try {
    await call();
    return null;
  } catch (err) {
    return { statusCode: err.statusCode, code: err.code };
  }
}

const taskId = taskcluster.slugid();
const now = new Date();
await queue.createTask(taskId, {
  taskQueueId,
  created: now.toJSON(),
  deadline: taskcluster.fromNowJSON("1 hour"),
  payload: {},
  metadata: { name: "js", description: "from the JS client", owner: "js@example.com", source: "https://example.com" },
});
result.created = (await queue.status(taskId)).status.state;

const claim = (await queue.claimWork(taskQueueId, { workerGroup: "js", workerId: "w1", tasks: 1 })).tasks[0];
result.claimed = claim.status.taskId === taskId;

// The claim's temporary credentials, certificate included, as a worker uses them.
const worker = new taskcluster.Queue({ rootUrl, credentials: claim.credentials, retries: 0 });
const reclaimed = await worker.reclaimTask(taskId, "0");
const fresh = new taskcluster.Queue({ rootUrl, credentials: reclaimed.credentials, retries: 0 });
result.completed = (await fresh.reportCompleted(taskId, "0")).status.state;
result.workerCannotCancel = await refusal(() => worker.cancelTask(taskId));

// A signed URL (bewit), fetched with no credentials.
const url = queue.buildSignedUrl(queue.status, taskId);
const response = await fetch(url);
result.signedUrl = { status: response.status, state: (await response.json()).status?.state };

// authorizedScopes narrow what the root client may do.
const narrowed = new taskcluster.Queue({ rootUrl, credentials, authorizedScopes: [`queue:status:${taskId}`], retries: 0 });
result.narrowedStatus = (await narrowed.status(taskId)).status.state;
result.narrowedTask = await refusal(() => narrowed.task(taskId));

// A wrong token is refused.
const wrong = new taskcluster.Queue({ rootUrl, credentials: { ...credentials, accessToken: "wrong" }, retries: 0 });
result.wrongToken = await refusal(() => wrong.task(taskId));

console.log(JSON.stringify(result));
