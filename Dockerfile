# The jobq service as an image: the first stage builds jobq's wheel and a wheel of every
# dependency of its "server" extra, at the versions requirements.lock pins (those the test
# suite passed on); the second installs from those wheels alone (no index: what it runs is
# exactly what the first stage built) and runs `jobq serve` as a user that is not root.
# Starting a container needs no network beyond its database: `jobq serve` applies pending
# migrations from the installed package, then serves.
#
#   docker build -t jobq .
#   docker run -e JOBQ_DATABASE_URL=postgresql://… -e JOBQ_ADMIN_TOKEN=… -p 8000:8000 jobq
#
# Not built in this project's CI (no Docker engine there): tests/test_docker.py checks this
# file's structure and runs its two pip commands, its CMD and its HEALTHCHECK outside Docker.

FROM python:3.12-slim AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
WORKDIR /src
COPY . .
RUN pip wheel --wheel-dir /wheels --constraint requirements.lock '.[server]'

FROM python:3.12-slim
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1 PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
# A fixed, unprivileged uid (not 0), so that "run as non-root" policies can check it.
RUN useradd --system --uid 10001 --user-group --create-home --home-dir /var/lib/jobq jobq
# Copied, not bind-mounted (RUN --mount): that needs BuildKit, which Debian 12's docker.io
# (20.10) does not use by default. The price: the wheels (~45 MB) stay in this layer.
COPY --from=build /wheels /tmp/wheels
RUN pip install --no-index --find-links /tmp/wheels 'jobq[server]' && rm -rf /tmp/wheels
USER 10001:10001
# The working directory is the user's own: with no JOBQ_DATABASE_URL the embedded PostgreSQL
# would live under ./.jobq here (give it a volume if you use it; compose sets a URL instead).
WORKDIR /var/lib/jobq
EXPOSE 8000
# Readiness (database reachable, schema current) through the standard library: the slim
# image has no curl. urlopen raises on a refused connection or a non-2xx answer: exit 1.
HEALTHCHECK --interval=10s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/readyz', timeout=4)"]
# Binding 0.0.0.0 needs JOBQ_ADMIN_TOKEN (or tokens made with `jobq tokens create`): without
# one, jobq serve refuses to start and says so.
CMD ["jobq", "serve", "--host", "0.0.0.0", "--port", "8000"]
