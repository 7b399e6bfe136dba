"""The evaluator's parent side: the ``Evaluator`` service and everything it runs in the caller's own
process (devices, builds, caches, verdict assembly, profiles, executors).

Nothing under ``trusted/``, ``untrusted/``, ``sandbox/``, ``common/``, ``buildkit/`` or
``reference/`` imports from here (tests/test_layers.py checks): those run in workers and jails,
and a verdict must never depend on the parent's code running there. See docs/evaluator.md.
"""
