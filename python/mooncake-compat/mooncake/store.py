"""``mooncake.store`` on a yuebing node: the names Mooncake's bindings
export, from yuebing.mooncake (which docs/python.md documents method by
method)."""

from yuebing.mooncake import (BufferHandle, ErrorCode, MooncakeDistributedStore, MooncakeHostMemAllocator,
                              ReplicaDesc, ReplicateConfig, SoftPinAction, load_config)

__all__ = ["BufferHandle", "ErrorCode", "MooncakeDistributedStore", "MooncakeHostMemAllocator", "ReplicaDesc",
           "ReplicateConfig", "SoftPinAction", "load_config"]
