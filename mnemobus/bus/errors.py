"""The bus's failures under names of our own, so code above `bus/` catches them without importing the client."""

from __future__ import annotations

import nats.errors
import nats.js.errors

#: nobody subscribes to the subject a request went to
NoResponders = nats.errors.NoRespondersError
#: a request got no answer in time
RequestTimeout = nats.errors.TimeoutError
#: any failure the client reports (connection, protocol, JetStream)
BusError = nats.errors.Error
#: a stream, consumer or message JetStream does not have
NotFound = nats.js.errors.NotFoundError
#: key-value: the key asked for is not there, or holds a delete marker
KeyNotFound = nats.js.errors.KeyNotFoundError
KeyDeleted = nats.js.errors.KeyDeletedError
