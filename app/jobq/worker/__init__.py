"""The jobq worker runner: claims jobs, runs handlers, acks or fails them.

    from jobq.worker import Discard, Retry, Worker

    def send_welcome(job):
        # job.id is stable across retries: use it as the idempotency key downstream.
        provider.send(to=job.payload["email"], idempotency_key=job.id)
        return {"sent": True}  # becomes the job's result

    Worker("http://127.0.0.1:8000", queues=["email"], handlers={"email.welcome": send_welcome},
           concurrency=16).run()

Talks to the service only through ``jobq.client``.
"""

from jobq.worker._control import Discard, Retry
from jobq.worker._loader import load_handlers, run_worker
from jobq.worker._worker import Handler, Worker

__all__ = ["Discard", "Handler", "Retry", "Worker", "load_handlers", "run_worker"]
