"""MateMemory's Python client: MateMemory (sync) and AsyncMateMemory (asyncio).

    from matememory import MateMemory, ConflictError

    with MateMemory("http://127.0.0.1:8080", api_key) as mem:
        ctx = mem.context(agent_id, conversation_id, question, recall=True)
        ack = mem.publish_completion({"agentId": agent_id, ...})
        run = mem.wait_run(agent_id, ack["eventId"], timeout=60)

Payloads and answers are the TypedDicts of matememory.models (generated from the served
OpenAPI document); errors are the classes of matememory.errors.
"""

from . import models
from .client import AsyncMateMemory, Bundle, Exported, ImportMode, MateMemory, Retry, is_final
from .errors import (
    ConflictError,
    ForbiddenError,
    IncompleteBundleError,
    InvalidRequestError,
    MateMemoryError,
    NotFoundError,
    PreconditionFailedError,
    RateLimitedError,
    TooLargeError,
    UnauthorizedError,
    UnavailableError,
)

__all__ = [
    "AsyncMateMemory",
    "Bundle",
    "ConflictError",
    "Exported",
    "ForbiddenError",
    "ImportMode",
    "IncompleteBundleError",
    "InvalidRequestError",
    "MateMemory",
    "MateMemoryError",
    "NotFoundError",
    "PreconditionFailedError",
    "RateLimitedError",
    "Retry",
    "TooLargeError",
    "UnauthorizedError",
    "UnavailableError",
    "is_final",
    "models",
]
