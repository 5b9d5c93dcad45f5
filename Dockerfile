# memvm server image. Build: docker build -t memvm .   Run: see docker-compose.yml.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /app

# bubblewrap: the sandbox custom tools run in (prlimit comes with util-linux, already in the image).
RUN apt-get update \
 && apt-get install -y --no-install-recommends bubblewrap \
 && rm -rf /var/lib/apt/lists/*

# Dependencies in their own layer, keyed on pyproject.toml alone, so code edits
# don't reinstall them. The list is read with the stdlib TOML parser; no compiler
# is needed (asyncpg, uvloop, etc. ship manylinux wheels).
COPY pyproject.toml ./
RUN python -c "import tomllib; print('\n'.join(tomllib.load(open('pyproject.toml', 'rb'))['project']['dependencies']))" > /tmp/requirements.txt \
 && pip install --no-cache-dir -r /tmp/requirements.txt \
 && rm /tmp/requirements.txt

# Editable install on purpose: memvm finds migrations/ relative to src/, so the
# repo layout has to stay intact. Dependencies are already satisfied above.
# Bytecode is compiled here because the non-root user can't write __pycache__.
COPY README.md alembic.ini ./
COPY migrations ./migrations
COPY src ./src
RUN pip install --no-cache-dir -e . \
 && python -m compileall -q src migrations

# Run unprivileged. /data is only written by the embedded-PostgreSQL fallback
# (no MEMVM_DATABASE_URL); mount a volume there if you use that mode.
RUN groupadd --system --gid 10001 memvm \
 && useradd --system --uid 10001 --gid memvm --home-dir /data --no-create-home memvm \
 && mkdir -p /data \
 && chown memvm:memvm /data
# Numeric so runtimes that check runAsNonRoot can verify it without /etc/passwd.
USER 10001:10001

ENV MEMVM_HOST=0.0.0.0 \
    MEMVM_PORT=8283 \
    MEMVM_DATA_DIR=/data

EXPOSE 8283

# No curl in the slim image; urlopen raises (exit 1) on refused connections and non-2xx.
# start-period covers the Alembic migrations that run before the server listens.
HEALTHCHECK --interval=15s --timeout=5s --start-period=60s --retries=3 \
  CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/v1/health/' % os.environ.get('MEMVM_PORT', '8283'), timeout=3)"]

# Listening on every interface needs authentication: without MEMVM_ADMIN_API_KEY (or keys in the
# database) the server refuses to start and says how to make a key.
# Exec form: memvm is PID 1 and gets SIGTERM directly for a clean uvicorn shutdown.
# The port comes from MEMVM_PORT so the healthcheck and server always agree.
CMD ["memvm", "serve", "--host", "0.0.0.0"]
