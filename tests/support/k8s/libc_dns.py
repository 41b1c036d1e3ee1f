"""Cluster DNS for C code in the kubelet stand-in's pods: a preloaded ``getaddrinfo``.

dns.py's ``sitecustomize`` resolves cluster names for Python code; a C library resolving names
itself (librdkafka in confluent_kafka, which the ``odradek produce``/``consume`` commands use)
goes to glibc, which knows nothing of the stand-in's hosts files. On a real node the pod's
resolver (cluster DNS) answers for it. So every local container runs with ``hosts-lookup.so``
preloaded (``LD_PRELOAD``; ``build``, compiled by the stand-in with the system's C compiler at
start). Its ``getaddrinfo(node, ...)``:

- reads ``$ODRADEK_STANDIN_HOSTS`` (the pod namespace's hosts file, dns.py's format: an address,
  then names, per line; read on every call, so a pod that turns Ready is found at once) and,
  for a name listed there (case-insensitive, a trailing dot ignored), returns what glibc gives
  for its address (``AI_NUMERICHOST``) with the caller's hints, IPv4 only, as dns.py does:
  ``AF_INET6`` alone finds nothing (``EAI_NONAME``), like a name with only A records;
- fails a name ending in ``.svc`` or ``.svc.cluster.local`` that is not listed (``EAI_NONAME``,
  like NXDOMAIN), as dns.py does, instead of asking the real DNS;
- hands everything else (numeric addresses, other names, no hosts file) to glibc unchanged.

A name is at most 253 characters (longer ones go to glibc, which refuses them); a line of the
hosts file at most 1023 (longer lines are skipped: dns.py writes one address and one name a line).
Without a compiler nothing is preloaded, and C libraries in pods resolve only real names.
"""

from __future__ import annotations

from pathlib import Path

from support.k8s.preload import compile_library

__all__ = ["LIBRARY", "build"]

LIBRARY = "hosts-lookup.so"
SOURCE = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#define NAME_MAX_CHARS 253
#define LINE_MAX_CHARS 1024

typedef int (*getaddrinfo_fn)(const char *, const char *, const struct addrinfo *,
                              struct addrinfo **);
static getaddrinfo_fn real_getaddrinfo;

static int ends_with(const char *name, size_t len, const char *suffix) {
    size_t n = strlen(suffix);
    return len >= n && strncasecmp(name + len - n, suffix, n) == 0;
}

/* 1 and the address in `address` when `name` (len chars) is listed in `path`, else 0. */
static int lookup(const char *path, const char *name, size_t len, char *address, size_t size) {
    FILE *file = fopen(path, "re");
    char line[LINE_MAX_CHARS];
    int found = 0;
    if (file == NULL) return 0;
    while (!found && fgets(line, sizeof line, file) != NULL) {
        char *save = NULL;
        char *first;
        char *word;
        if (strchr(line, '\n') == NULL && !feof(file)) {  /* too long: skip the rest */
            int c;
            while ((c = fgetc(file)) != EOF && c != '\n') {}
            continue;
        }
        first = strtok_r(line, " \t\r\n", &save);
        if (first == NULL || first[0] == '#') continue;
        while ((word = strtok_r(NULL, " \t\r\n", &save)) != NULL) {
            if (strlen(word) == len && strncasecmp(word, name, len) == 0) {
                if (strlen(first) < size) {
                    strcpy(address, first);
                    found = 1;
                }
                break;
            }
        }
    }
    fclose(file);
    return found;
}

int getaddrinfo(const char *node, const char *service, const struct addrinfo *hints,
                struct addrinfo **res) {
    const char *path = getenv("ODRADEK_STANDIN_HOSTS");
    size_t len;
    char address[64];
    if (real_getaddrinfo == NULL)
        real_getaddrinfo = (getaddrinfo_fn)dlsym(RTLD_NEXT, "getaddrinfo");
    if (node == NULL || path == NULL || (hints != NULL && (hints->ai_flags & AI_NUMERICHOST)))
        return real_getaddrinfo(node, service, hints, res);
    len = strlen(node);
    if (len > 0 && node[len - 1] == '.') len--;
    if (len == 0 || len > NAME_MAX_CHARS) return real_getaddrinfo(node, service, hints, res);
    if (lookup(path, node, len, address, sizeof address)) {
        struct addrinfo numeric;
        if (hints != NULL) numeric = *hints;
        else {
            memset(&numeric, 0, sizeof numeric);
            numeric.ai_flags = AI_V4MAPPED | AI_ADDRCONFIG;
        }
        if (numeric.ai_family == AF_INET6) return EAI_NONAME;
        numeric.ai_family = AF_INET;
        numeric.ai_flags |= AI_NUMERICHOST;
        return real_getaddrinfo(address, service, &numeric, res);
    }
    if (ends_with(node, len, ".svc") || ends_with(node, len, ".svc.cluster.local"))
        return EAI_NONAME;
    return real_getaddrinfo(node, service, hints, res);
}
"""


def build(directory: Path) -> Path | None:
    """Compile ``hosts-lookup.so`` into ``directory``; None without a C compiler (or on
    failure)."""
    return compile_library(SOURCE, directory, LIBRARY)
