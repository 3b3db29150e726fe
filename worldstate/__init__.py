"""World state: probes observe the memory pipeline, goals judge it, metrics and transitions report it.

Operators must learn that memory is broken before users do; a service whose
health check passes while its worker is dead or its search fails is the case
this package exists for.
"""
