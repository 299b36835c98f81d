from tests.e2e.helpers import create, claim_one
def test_smoke(queue, tq):
    t = create(queue, tq)
    c = claim_one(queue, tq)
    assert c["status"]["taskId"] == t
    print(queue.ping())
