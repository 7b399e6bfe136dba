from stark_mcp.errors import StarkError


class EvaluatorError(StarkError):
    """The evaluator cannot do what was asked (bad device, bad option, broken installation).

    Candidate failures are verdicts, never exceptions; a broken problem raises ProblemError.
    """
