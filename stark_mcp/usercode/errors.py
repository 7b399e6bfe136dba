from stark_mcp.errors import StarkError


class UserCodeError(StarkError):
    """Something about the user's module, its inputs or a capture is wrong; the message says what."""


class TargetError(UserCodeError):
    """The target ``package.module:Name`` cannot be imported or is not a module class or function."""


class SpecError(UserCodeError):
    """Constructor arguments, input specs or shapes are malformed or do not fit together."""


class CaptureError(UserCodeError):
    """A call could not be captured, or a capture file cannot be read."""


class SwapError(UserCodeError):
    """A drop-in replacement cannot be swapped into a model as asked."""
