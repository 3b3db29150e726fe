from plugins.memory.plugin import MemoryPlugin

__all__ = ["MemoryPlugin"]
