"""``jobq conformance``: proves that a worker, in any language, follows the rules every jobq
worker must (openapi/GUIDE.md, "What every worker must do").

It starts the worker as a process whose ``JOBQ_URL`` is a recording proxy in front of the
service, enqueues ``conformance.echo``, ``conformance.fail`` and ``conformance.sleep`` jobs,
and reads what came of them (the jobs, through the SDK) and what the worker sent (the proxy's
record). The pieces:

- ``proxy``: the recording, claim-refusing HTTP proxy;
- ``process``: the worker's process (environment, output, signals);
- ``checks``: the six checks, in order (``CHECKS``), and their bounds;
- ``runner``: one run from start to end (``run(Options(...))`` returns the exit code).

Client-side only: the SDK, httpx and the standard library (tests/test_layers.py).
"""

from jobq.conformance.checks import CHECKS
from jobq.conformance.runner import Options, UsageError, run

__all__ = ["CHECKS", "Options", "UsageError", "run"]
