"""Fixtures the record tests share: Harbor's ATIF models (defined beside the ATIF writer's tests)."""

from tests.records.test_convert import harbor  # noqa: F401
