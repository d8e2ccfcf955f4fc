"""Exception types raised by PipeLink (the native layer raises these by name)."""

from __future__ import annotations

__all__ = ["ContractViolationError", "IndexOutOfRangeError", "BackendUnavailableError"]


class ContractViolationError(ValueError):
    """A tensor broke an op's port contract (dtype, shape, device, alignment, ...).

    Raised before anything runs. ``field`` names the contract field ("dtype", "shape",
    "device", "alignment", "contiguity", "alias", "attribute", ...); ``expected`` and
    ``actual`` say what the contract wanted and what the tensor had.
    """

    def __init__(self, message: str, op: str = "", port: str = "", field: str = "", expected: str = "",
                 actual: str = "") -> None:
        super().__init__(message)
        self.op = op
        self.port = port
        self.field = field
        self.expected = expected
        self.actual = actual


class IndexOutOfRangeError(IndexError):
    """An index tensor holds a value outside ``[0, bound)``; nothing was written.

    ``position`` is the first bad edge, ``value`` its index, ``port`` "src" or "dst".
    """

    def __init__(self, message: str, op: str = "", port: str = "", position: int = -1, value: int = 0,
                 bound: int = 0) -> None:
        super().__init__(message)
        self.op = op
        self.port = port
        self.position = position
        self.value = value
        self.bound = bound


class BackendUnavailableError(RuntimeError):
    """The tensors live on a device this build or this machine cannot run (e.g. CUDA without a GPU)."""
