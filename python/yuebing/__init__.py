"""yuebing: a client of the yuebing KV-cache server.

``yuebing.Client`` is the native API (objects by name, blocks by key,
batches, prefix lookup, contexts); ``yuebing.mooncake`` offers Mooncake
Store's ``MooncakeDistributedStore`` on yuebing. Standard library only.
"""

from .client import Client, Item, Match
from .errors import (BadRequest, ChecksumMismatch, Conflict, ConnectionFailed, Forbidden, NoSpace, NotFound,
                     Overloaded, TooLarge, Unauthenticated, Unavailable, YuebingError)
from .keys import chain_keys, opaque_key

__all__ = ["Client", "Item", "Match", "YuebingError", "BadRequest", "ChecksumMismatch", "Conflict", "ConnectionFailed",
           "Forbidden", "NoSpace", "NotFound", "Overloaded", "TooLarge", "Unauthenticated", "Unavailable",
           "chain_keys", "opaque_key"]
__version__ = "0.1.0"
