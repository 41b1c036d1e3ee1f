#!/usr/bin/env bash
# The Spark image's entrypoint (Dockerfile target `spark`, docs/spark.md "Spark on Kubernetes").
#
# Spark's Kubernetes scheduler starts its pods with the image's entrypoint and one argument naming
# the role: `driver <spark-submit arguments>` for the driver pod it creates in cluster mode, and
# `executor` (everything else in SPARK_* variables) for the executor pods the driver creates.
# Spark's own images carry an entrypoint.sh for this (resource-managers/kubernetes/docker in Spark's
# sources); the pyspark wheel ships bin/ and jars/ but not that script, so this is ours. It does the
# same for those two roles:
#
#   driver    spark-submit in client mode (the driver runs here, in its pod), bound to the pod's
#             address ($SPARK_DRIVER_BIND_ADDRESS, which Spark sets from status.podIP), which the
#             executors also get; the arguments Spark passes name the properties file it mounted
#             (--properties-file /opt/spark/conf/spark.properties), the main class and the
#             application (local:///opt/odradek/spark/<job>.py).
#   executor  java running org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend with
#             the options Spark sets as SPARK_JAVA_OPT_<n>, the heap $SPARK_EXECUTOR_MEMORY and the
#             identity it passes as SPARK_DRIVER_URL, SPARK_EXECUTOR_ID, SPARK_EXECUTOR_CORES,
#             SPARK_APPLICATION_ID, SPARK_EXECUTOR_POD_IP, SPARK_RESOURCE_PROFILE_ID and
#             SPARK_EXECUTOR_POD_NAME.
#   other     run as given (`odradek-spark-entrypoint spark-submit --version`, a shell, ...).
#
# Unlike Spark's script it adds no passwd entry for an arbitrary uid (the image's user, 10001, has
# one) and runs no init (tini): the JVM is PID 1, handles SIGTERM and reaps its Python workers.
# The classpath is $SPARK_CONF_DIR (the mounted configuration, if any), Spark's jars, then
# $SPARK_EXTRA_CLASSPATH and $SPARK_DIST_CLASSPATH, then the working directory, as in Spark's.
set -euo pipefail

if [ -z "${SPARK_HOME:-}" ]; then
    # pyspark's package directory is a Spark home (bin/, jars/); the image sets SPARK_HOME itself.
    SPARK_HOME="$(python3 -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__))')"
    export SPARK_HOME
fi
java="java"
if [ -n "${JAVA_HOME:-}" ]; then
    java="$JAVA_HOME/bin/java"
fi

classpath="$SPARK_HOME/jars/*"
if [ -n "${SPARK_CONF_DIR:-}" ]; then
    classpath="$SPARK_CONF_DIR:$classpath"
fi
if [ -n "${SPARK_EXTRA_CLASSPATH:-}" ]; then
    classpath="$classpath:$SPARK_EXTRA_CLASSPATH"
fi
if [ -n "${SPARK_DIST_CLASSPATH:-}" ]; then
    classpath="$classpath:$SPARK_DIST_CLASSPATH"
fi
classpath="$classpath:$PWD"

role="${1:-}"
case "$role" in
    driver)
        shift
        exec "$SPARK_HOME/bin/spark-submit" \
            --conf "spark.driver.bindAddress=${SPARK_DRIVER_BIND_ADDRESS:?set by Spark from status.podIP}" \
            --conf "spark.executorEnv.SPARK_DRIVER_POD_IP=$SPARK_DRIVER_BIND_ADDRESS" \
            --deploy-mode client \
            "$@"
        ;;
    executor)
        shift
        java_opts=()
        # SPARK_JAVA_OPT_0, _1, ... in their numeric order (each one option, spaces kept).
        while IFS= read -r name; do
            java_opts+=("${!name}")
        done < <(compgen -v SPARK_JAVA_OPT_ | sort -t_ -k4 -n)
        exec "$java" "${java_opts[@]}" \
            -Xms"${SPARK_EXECUTOR_MEMORY:?}" -Xmx"$SPARK_EXECUTOR_MEMORY" \
            -cp "$classpath" \
            org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend \
            --driver-url "${SPARK_DRIVER_URL:?}" \
            --executor-id "${SPARK_EXECUTOR_ID:?}" \
            --cores "${SPARK_EXECUTOR_CORES:?}" \
            --app-id "${SPARK_APPLICATION_ID:?}" \
            --hostname "${SPARK_EXECUTOR_POD_IP:?}" \
            --resourceProfileId "${SPARK_RESOURCE_PROFILE_ID:-0}" \
            --podName "${SPARK_EXECUTOR_POD_NAME:?}"
        ;;
    "")
        echo "usage: $0 driver <spark-submit arguments> | executor | <command>..." >&2
        exit 2
        ;;
    *)
        exec "$@"
        ;;
esac
