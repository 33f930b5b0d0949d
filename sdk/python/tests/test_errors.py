"""Errors carry the API's code; the SDK's list of codes is the node's catalogue."""

from __future__ import annotations

import os
import re
import unittest

from wheelhouse import errors

CATALOGUE = os.path.join(os.path.dirname(__file__), "..", "..", "..", "src", "lib", "errors.ts")


class ErrorsTest(unittest.TestCase):
    def test_an_answer_becomes_its_family_with_code_details_and_retry_after(self) -> None:
        body = {"error": {"code": "validation_failed", "message": "bad", "details": {"field": "priority", "index": 2}}}
        error = errors.api_error(400, body, None, "POST", "/api/tasks/batch")
        self.assertIsInstance(error, errors.ValidationError)
        self.assertEqual((error.code, error.status, error.field, error.index), ("validation_failed", 400, "priority", 2))
        busy = errors.api_error(429, {"error": {"code": "backlog_full", "message": "m"}}, 2.0)
        self.assertIsInstance(busy, errors.BacklogFullError)
        self.assertEqual(busy.retry_after, 2.0)
        self.assertIsInstance(errors.api_error(404, {"error": {"code": "task_not_found", "message": "m"}}), errors.TaskNotFoundError)
        self.assertIsInstance(errors.api_error(409, {"error": {"code": "task_finished", "message": "m"}}), errors.ConflictError)

    def test_an_answer_without_a_known_code_takes_its_status_family(self) -> None:
        error = errors.api_error(502, "Bad Gateway")
        self.assertEqual((error.code, error.raw_code), ("internal", None))
        newer = errors.api_error(409, {"error": {"code": "something_new", "message": "m"}})
        self.assertEqual((newer.code, newer.raw_code), ("invalid_transition", "something_new"))

    @unittest.skipUnless(os.path.exists(CATALOGUE), "not inside the Wheelhouse repository")
    def test_the_codes_are_the_nodes_catalogue(self) -> None:
        with open(CATALOGUE, encoding="utf-8") as f:
            text = f.read()
        catalogue = text.split("ERROR_CATALOGUE = {", 1)[1].split("} as const", 1)[0]
        codes = set(re.findall(r"^  ([a-z_]+): \{", catalogue, re.M))
        self.assertTrue(codes, "no codes read from src/lib/errors.ts")
        self.assertEqual(set(errors.API_ERROR_CODES), codes)


if __name__ == "__main__":
    unittest.main()
