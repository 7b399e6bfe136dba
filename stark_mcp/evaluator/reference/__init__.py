"""The reference jail: the problem's own code, run in a jail of its own (docs/evaluator.md).

``problem_code.py`` holds the problem's objects (its module, the reference ``Model`` and its
float64 twin) and runs them; ``serve.py`` is the jailed process that answers the trusted worker's
requests for them (``trusted/reference_jail.py`` is the worker's end). No candidate code ever runs
here, and the worker believes what comes from here exactly as much as it believes the problem.
Standard library and torch only.
"""
