# The Odradek image: the broker, the controller, the operator and Connect workers, one Python venv,
# a non-root user.
#
# The wheels come from the build context's wheels/ folder, built beforehand on a machine with a C
# compiler (the record walker, odradek.storage._recordwalk, is compiled into odradek's wheel):
#   wheels/deps/*.whl         the runtime dependencies and the `connect` extra's (pip wheel -w ...)
#   wheels/deps/SHA256SUMS    their checksums, with the paths they are mounted at (/mnt/NAME.whl)
#   wheels/odradek-*.whl      odradek itself             (pip wheel --no-deps -w wheels .)
# scripts/build_image.sh makes them, then builds; docs/image.md shows the same by hand with docker.
# Nothing is downloaded during the build (pip runs with --no-index), and neither pip nor the
# wheels end up in the image.
#
# BASE must be a Debian bookworm with Python 3.11 and its venv module, as the wheel's C extension
# is built for CPython 3.11 on glibc 2.36: python:3.11-slim-bookworm (python3 in /usr/local/bin),
# or Debian's own python3 + python3-venv (python3 in /usr/bin). Nothing below names the
# interpreter's path: the venv records it.
ARG BASE=python:3.11-slim-bookworm

# The user and the venv with the dependencies, the bulk of the image (242 MB), rebuilt only when
# the dependencies change. Their wheels are mounted, not copied; their checksums are copied, so
# that this step reruns whenever a wheel changes (a build cache keys a RUN step on its text and
# the layers below it, not on what it mounts), and each wheel is checked before it is installed.
FROM ${BASE} AS runtime
LABEL org.opencontainers.image.title="odradek" \
      org.opencontainers.image.description="A Kafka-compatible broker: odradek broker|controller, odradek-operator"
# uid/gid 10001: above any distribution's system range, and what the chart's securityContext sets.
# /var/lib/odradek holds the broker's log dirs (volume N is mounted at /var/lib/odradek/data-N).
RUN groupadd --system --gid 10001 odradek \
    && useradd --system --uid 10001 --gid 10001 --home-dir /var/lib/odradek --shell /usr/sbin/nologin odradek \
    && mkdir -p /var/lib/odradek \
    && chown 10001:10001 /var/lib/odradek
COPY wheels/deps/SHA256SUMS /opt/odradek/dependencies.sha256
# A pipe below: a failure on its left must fail the step.
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
RUN --mount=type=bind,source=wheels/deps,target=/mnt \
    sha256sum --check --quiet /opt/odradek/dependencies.sha256 \
    && python3 -m venv /opt/odradek \
    && cut -c67- /opt/odradek/dependencies.sha256 \
        | xargs /opt/odradek/bin/pip install --no-cache-dir --no-index \
    && /opt/odradek/bin/pip uninstall --yes --quiet pip setuptools

# odradek itself, installed under /staging: its own files only, at their /opt/odradek/... paths,
# by a pip of its own (pip --python) since the venv has none. Its dependencies are checked against
# the venv (with --no-index, a missing one fails the build).
FROM runtime AS app
COPY wheels/odradek-*.whl /wheels/
RUN python3 -m venv /opt/pip \
    && /opt/pip/bin/pip --python /opt/odradek/bin/python install --no-cache-dir --no-index \
        --root /staging /wheels/odradek-*.whl

# Spark drivers and executors (target `spark`, localhost/odradek-spark:<version>; docs/spark.md,
# "Spark on Kubernetes"): the final image's files, plus a headless Java 17, odradek's `spark` extra
# (pyspark with Spark's bin/ and jars/, pyarrow; their wheels in wheels/spark/, checked like the
# others) and our entrypoint for Spark's `driver` and `executor` roles (spark/k8s/entrypoint.sh),
# and the jobs of spark/ at /opt/odradek/spark (spark-submit ... local:///opt/odradek/spark/<job>.py).
# `scripts/build_image.sh --spark` (make image-spark) builds it; it is not built by default: this
# stage comes before the final one, so a build without --target never runs it.
FROM runtime AS spark
# JRE_VERSION: apt's version pattern; the default takes bookworm's current Java 17 update.
ARG JRE_VERSION=17.0.*
# Debian's slim images (and the debootstrap base) have no man directories; the JRE's
# update-alternatives fails without this one.
RUN mkdir -p /usr/share/man/man1 \
    && apt-get update \
    && apt-get install --yes --no-install-recommends "openjdk-17-jre-headless=${JRE_VERSION}" \
    && rm -rf /var/lib/apt/lists/*
COPY --from=app /staging/ /
COPY wheels/spark/SHA256SUMS /opt/odradek/spark-dependencies.sha256
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
# A throwaway pip (in /tmp, removed in the same step) installs the wheels into the venv.
RUN --mount=type=bind,source=wheels/spark,target=/mnt \
    sha256sum --check --quiet /opt/odradek/spark-dependencies.sha256 \
    && python3 -m venv /tmp/pip \
    && cut -c67- /opt/odradek/spark-dependencies.sha256 \
        | xargs /tmp/pip/bin/pip --python /opt/odradek/bin/python install --no-cache-dir --no-index \
    && rm -rf /tmp/pip \
    && /opt/odradek/bin/python -c "import pyspark, pyarrow, odradek.spark"
COPY --chmod=755 spark/k8s/entrypoint.sh /opt/odradek/bin/odradek-spark-entrypoint
COPY spark/*.py /opt/odradek/spark/
ENV PATH=/opt/odradek/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PYSPARK_PYTHON=/opt/odradek/bin/python
USER 10001:10001
WORKDIR /var/lib/odradek
# The driver's RPC and block manager ports as Spark's Kubernetes scheduler sets them, its UI.
EXPOSE 7078 7079 4040
ENTRYPOINT ["/opt/odradek/bin/odradek-spark-entrypoint"]

FROM runtime
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
