import base64
from tests.api.conftest import Api, task_definition, GOOD_PARAMS

async def test_probe(api: Api):
    c = api.clock
    cases = {
        "routes": dict(routes=["a\u0000b"]),
        "routes2": dict(routes=["\U0001F600", "é"]),
        "tags": dict(tags={"k\u0000": "v\u0000"}),
        "payload": dict(payload={"\u0000": ["\u0000", 1e308, -1e308, 2**63, 2**64, 1.5e-320]}),
        "extra": dict(extra={"x": "\ud83d\ude00"}),
        "meta": dict(metadata={"name": "\u0000", "description": "\u0000", "owner": "\u0000", "source": "https://\u0000"}),
        "scopes": dict(scopes=["a b", ""]),
        "retries": dict(retries=49.0),
    }
    for name, kw in cases.items():
        r = await api.call("PUT", f"/task/{__import__('taskyard.model.slugid').model.slugid.nice()}", task_definition(c, **kw))
        print(name, r.status_code, r.text[:150])
    r = await api.call("POST", "/claim-work/api-prov%2Fapi-wt", {"workerGroup": "wg", "workerId": "wid", "tasks": 32})
    print("claim", r.status_code, len(r.json()["tasks"]) if r.status_code == 200 else r.text[:300])
    path = "/provisioners/api-prov/worker-types/api-wt/workers/wg/wid"
    r = await api.call("PUT", path, {"quarantineUntil": "9999-12-31T23:59:59.999Z", "quarantineInfo": "\u0000\U0001F600"})
    print("quarantine", r.status_code, r.text[:300])
    r = await api.call("PUT", path, {"quarantineUntil": "0001-01-01T00:00:00.000Z"})
    print("quarantine", r.status_code, r.text[:300])
    r = await api.call("PUT", "/provisioners/api-prov/worker-types/api-wt/wg/wid2", {"expires": "9999-12-31T23:59:59.999Z"})
    print("declare", r.status_code, r.text[:300])
    r = await api.call("PUT", "/provisioners/api-prov/worker-types/api-wt/wg/wid3", {"expires": "0001-01-01T00:00:00.000Z"})
    print("declare", r.status_code, r.text[:300])
    r = await api.call("GET", "/provisioners/api-prov/worker-types/api-wt/workers")
    print("workers", r.status_code, r.text[:300])
    r = await api.call("GET", "/task-queues")
    print("tqs", r.status_code, r.text[:300])
    r = await api.call("GET", "/provisioners")
    print("provs", r.status_code, r.text[:300])
