"""RootCoord: the TSO wiring (``internal/rootcoord/root_coord.go``). TimeTick sync arrives later."""

from .root_coord import GLOBAL_ID_ALLOCATOR_SUB_PATH, GLOBAL_TSO_ALLOCATOR_KEY, KV_ROOT_PATH, Core

__all__ = ["Core", "KV_ROOT_PATH", "GLOBAL_ID_ALLOCATOR_SUB_PATH", "GLOBAL_TSO_ALLOCATOR_KEY"]
