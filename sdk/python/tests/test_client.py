"""The client against a real node: submit, batch, get, list, cancel, retry, explain, limits,
and errors as exceptions carrying the API's code."""

from __future__ import annotations

import unittest
import uuid

from wheelhouse import (
    AuthError,
    Client,
    ConflictError,
    NotFoundError,
    TaskNotFoundError,
    ValidationError,
    Worker,
    task_body,
)

from .support import TOKEN, URL, client, needs_node, unique_type, until


@needs_node
class ClientTest(unittest.TestCase):
    def setUp(self) -> None:
        self.client = client()

    def tearDown(self) -> None:
        self.client.close()

    def test_submit_get_list_and_an_idempotent_replay(self) -> None:
        task_type = unique_type("client")
        key = f"k-{uuid.uuid4().hex}"
        first = self.client.submit(task_type, {"n": 1}, priority=2, idempotency_key=key, schedule={"type": "delayed", "delay_seconds": 3600})
        self.assertTrue(first["created"])
        self.assertEqual(first["status"], "pending")
        replay = self.client.submit(task_type, {"n": 1}, priority=2, idempotency_key=key, schedule={"type": "delayed", "delay_seconds": 3600})
        self.assertEqual((replay["task_id"], replay["created"]), (first["task_id"], False))
        task = self.client.get(first["task_id"])
        self.assertEqual((task["task_type"], task["payload"], task["priority"]), (task_type, {"n": 1}, 2))
        batch = self.client.submit_batch([task_body(task_type, {"n": i}, schedule={"type": "delayed", "delay_seconds": 3600}) for i in range(3)])
        self.assertEqual(len(batch), 3)
        listed = [t["task_id"] for t in self.client.list(task_type=task_type, page_size=2)]
        self.assertEqual(sorted(listed), sorted([first["task_id"]] + [t["task_id"] for t in batch]))
        explained = self.client.explain(batch[0]["task_id"])
        self.assertEqual(explained["state"], "scheduled")
        self.assertIsInstance(explained["sentence"], str)

    def test_cancel_then_retry_and_the_errors_that_say_why_not(self) -> None:
        task_type = unique_type("cancel")
        task_id = self.client.submit(task_type, schedule={"type": "delayed", "delay_seconds": 3600})["task_id"]
        self.assertEqual(self.client.cancel(task_id)["ok"], True)
        self.assertEqual(self.client.get(task_id)["status"], "cancelled")
        with self.assertRaises(ConflictError) as finished:
            self.client.cancel(task_id)
        self.assertEqual((finished.exception.code, finished.exception.status), ("task_finished", 409))
        retried = self.client.retry(task_id)
        self.assertIn(retried["status"], ("pending", "ready"))
        with self.assertRaises(ConflictError) as again:
            self.client.retry(task_id)
        self.assertEqual(again.exception.code, "invalid_transition")

    def test_errors_carry_the_api_code(self) -> None:
        with self.assertRaises(TaskNotFoundError) as missing:
            self.client.get(str(uuid.uuid4()))
        self.assertEqual((missing.exception.code, missing.exception.status), ("task_not_found", 404))
        with self.assertRaises(ValidationError) as invalid:
            self.client.submit_batch([task_body("ok.type"), task_body("ok.type", priority=42)])
        self.assertEqual(invalid.exception.code, "validation_failed")
        self.assertEqual(invalid.exception.index, 1)
        with self.assertRaises(ValidationError) as cron:
            self.client.submit("x.y", schedule={"type": "cron", "cron_expression": "not a cron"})
        self.assertEqual(cron.exception.code, "invalid_cron")

    @unittest.skipUnless(TOKEN, "the node asks for no key")
    def test_the_key_is_sent_as_a_bearer_token_and_a_wrong_one_is_refused(self) -> None:
        assert URL is not None
        with Client(URL, token="not-a-key", retries=0) as stranger:
            with self.assertRaises(AuthError) as refused:
                stranger.get(str(uuid.uuid4()))
        self.assertEqual((refused.exception.code, refused.exception.status), ("unauthorized", 401))

    def test_limits_put_get_list_delete(self) -> None:
        family = f"pyfam{uuid.uuid4().hex[:6]}"
        declared = self.client.limits.put(f"{family}:*", concurrency=2, rate={"limit": 10, "period_seconds": 60})
        self.assertEqual((declared["name"], declared["concurrency"]), (f"{family}:*", 2))
        key = self.client.limits.get(f"{family}:7")
        self.assertEqual((key["declared_as"], key["concurrency"], key["rate"]["limit"]), (f"{family}:*", 2, 10))
        self.assertEqual([l["name"] for l in self.client.limits.list(prefix=family)], [f"{family}:*"])
        waiting = self.client.submit(unique_type("limited"), limits=[f"{family}:7"], schedule={"type": "delayed", "delay_seconds": 3600})
        with self.assertRaises(ConflictError) as in_use:
            self.client.limits.delete(f"{family}:*")
        self.assertEqual(in_use.exception.code, "limit_in_use")
        self.client.cancel(waiting["task_id"])
        self.client.limits.delete(f"{family}:*")
        with self.assertRaises(NotFoundError) as gone:
            self.client.limits.get(f"{family}:*")
        self.assertEqual(gone.exception.code, "not_found")

    def test_wait_for_and_history_of_a_task_a_worker_ran(self) -> None:
        task_type = unique_type("wait")
        assert URL is not None
        worker = Worker(URL, {task_type: lambda ctx: {"echo": ctx.payload}}, token=TOKEN, worker_id="py-wait")
        worker.start()
        try:
            task_id = self.client.submit(task_type, {"a": 1})["task_id"]
            task = self.client.wait_for(task_id, "succeeded", timeout=20)
            self.assertEqual(task["result"], {"echo": {"a": 1}})
            executions = list(self.client.history(task_id))
            self.assertEqual([(e["status"], e["worker_id"]) for e in executions], [("succeeded", "py-wait")])
            until(lambda: worker.stats.get("reported") == 1, "the result acknowledged")
        finally:
            worker.stop(5)


if __name__ == "__main__":
    unittest.main()
