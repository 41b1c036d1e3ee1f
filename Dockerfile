# The Odradek image: the broker, the controller and the operator, one Python venv, a non-root user.
#
# The wheels come from the build context's wheels/ folder, built beforehand on a machine with a C
# compiler (the record walker, odradek.storage._recordwalk, is compiled into odradek's wheel):
#   wheels/deps/*.whl       the runtime dependencies   (pip wheel -w wheels/deps <dependencies>)
#   wheels/odradek-*.whl    odradek itself             (pip wheel --no-deps -w wheels .)
# scripts/build_image.sh does both, then builds; docs/image.md shows the same by hand with docker.
# Nothing is downloaded during the build (pip runs with --no-index).
#
# BASE must be a Debian bookworm with Python 3.11 and its venv module, as the wheel's C extension
# is built for CPython 3.11 on glibc 2.36: python:3.11-slim-bookworm (python3 in /usr/local/bin),
# or Debian's own python3 + python3-venv (python3 in /usr/bin). Nothing below names the
# interpreter's path: the venv records it.
ARG BASE=python:3.11-slim-bookworm

# The dependencies in a venv of their own: the bulk of the image (250 MB), rebuilt only when the
# dependencies change, not when odradek alone does.
FROM ${BASE} AS deps
COPY wheels/deps/ /wheels/deps/
RUN python3 -m venv /opt/odradek \
    && /opt/odradek/bin/pip install --no-cache-dir --no-index /wheels/deps/*.whl

# odradek itself, installed under /staging (its files only, with /opt/odradek/... paths below it);
# its dependencies are checked against the venv, not fetched.
FROM deps AS app
COPY wheels/odradek-*.whl /wheels/
RUN /opt/odradek/bin/pip install --no-cache-dir --no-index --find-links /wheels/deps \
        --root /staging /wheels/odradek-*.whl

# pip and setuptools only install: the venv that is copied into the image has neither.
FROM deps AS venv
RUN /opt/odradek/bin/pip uninstall --yes --quiet pip setuptools

FROM ${BASE}
LABEL org.opencontainers.image.title="odradek" \
      org.opencontainers.image.description="A Kafka-compatible broker: odradek broker|controller, odradek-operator"
# uid/gid 10001: above any distribution's system range, and what the chart's securityContext sets.
# /var/lib/odradek holds the broker's log dirs (volume N is mounted at /var/lib/odradek/data-N).
RUN groupadd --system --gid 10001 odradek \
    && useradd --system --uid 10001 --gid 10001 --home-dir /var/lib/odradek --shell /usr/sbin/nologin odradek \
    && mkdir -p /var/lib/odradek \
    && chown 10001:10001 /var/lib/odradek
COPY --from=venv /opt/odradek /opt/odradek
COPY --from=app /staging/ /
# The record walker must load: the wheel's C extension was built for this Python.
RUN /opt/odradek/bin/python -c "import odradek.storage._recordwalk"
ENV PATH=/opt/odradek/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
USER 10001:10001
WORKDIR /var/lib/odradek
# Client, control-plane and admin (/metrics /healthz /readyz) ports, as the chart sets them.
EXPOSE 9092 9091 9645
# `odradek broker ...`, `odradek controller ...`; the operator's pods set command: [odradek-operator].
ENTRYPOINT ["odradek"]
CMD ["--help"]
