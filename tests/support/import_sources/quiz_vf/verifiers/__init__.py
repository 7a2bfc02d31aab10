"""Stands in for the `verifiers` library: the quiz environment imports it only to be detected as a Verifiers
environment by `openenv import`, whose generated wrapper needs nothing from it on the rubric path."""
