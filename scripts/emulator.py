"""Starts moto's server with DynamoDB made atomic.

moto serves each request on its own thread and checks a DynamoDB condition and applies the
write in separate steps, so two conditional writes racing on one item can both succeed, and a
transaction deep-copies every table while other threads write to them. Real DynamoDB applies
each write (and each transaction) atomically, and Sundial's invariants rest on that: one lock
around every DynamoDB backend operation restores it. SQS and SNS are left as they are.
"""

import functools
import sys
import threading

from moto.dynamodb.models import DynamoDBBackend
from moto.server import main

_LOCK = threading.RLock()


def _atomic(method):
    @functools.wraps(method)
    def wrapper(*args, **kwargs):
        with _LOCK:
            return method(*args, **kwargs)

    return wrapper


for _name, _member in list(vars(DynamoDBBackend).items()):
    if callable(_member) and not _name.startswith("_"):
        setattr(DynamoDBBackend, _name, _atomic(_member))

if __name__ == "__main__":
    main(sys.argv[1:])
