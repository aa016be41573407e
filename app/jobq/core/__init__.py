"""Queue semantics: enqueue, claim, heartbeat, ack, fail, expiry, operator actions.

No FastAPI here, and SQL only through ``jobq.store``.
"""
