"""A kubeconfig file checked before the kube layer reads it: `--kubeconfig F` (run, snapshot,
and simulate/explain without snapshot files) and the files of $KUBECONFIG.

The Kubernetes client's loader raises whatever its first bad lookup raises on a file it
cannot use (a TypeError for `contexts: 5`, an AssertionError for a numeric server, a YAML
traceback for binary input), so the file is read here as every other input is
(kopfsched.documents: one line naming the file, the same wording for empty, binary,
non-UTF-8, malformed and hostile input) and its shape checked field by field, as
client-go's `clientcmd/api/v1` types decode it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from kopfsched.documents import STDIN, STDIN_NAME, describe_type, problem_line, read_documents

_NAMED_LISTS = (("clusters", "cluster"), ("contexts", "context"), ("users", "user"))
_STRING_FIELDS = {
    "cluster": ("server", "certificate-authority", "certificate-authority-data", "tls-server-name", "proxy-url"),
    "context": ("cluster", "user", "namespace"),
    "user": ("client-certificate", "client-certificate-data", "client-key", "client-key-data", "token",
             "tokenFile", "username", "password"),
}


def kubeconfig_problems(path: str, *, whole: bool = True) -> list[str]:
    """Every problem of one kubeconfig file, one line each; [] when the loader can take it.
    `whole`: the file stands alone (--kubeconfig), so its current context must resolve in it;
    files of $KUBECONFIG are merged, and a reference may point into another one."""
    if path == STDIN:
        return [f"{STDIN_NAME}: a kubeconfig must be a file, not standard input"]
    if os.path.isdir(path):
        return [f"{path}: a directory, not a kubeconfig file"]
    problems: list[str] = []
    documents = list(read_documents([path], problems))
    if problems:
        return problems
    first, *others = documents
    if others:
        return [problem_line(others[0].where, None, "a kubeconfig is one document")]
    problems = _shape_problems(first.obj, first.where)
    if whole and not problems:
        problems = _reference_problems(first.obj, first.where)
    return problems


def kubeconfig_files(explicit: str | None, environ: Mapping[str, str]) -> list[str]:
    """The files the kube layer would read: --kubeconfig, else (outside a cluster) the
    existing files of $KUBECONFIG. The default ~/.kube/config is left to the loader."""
    if explicit:
        return [explicit]  # checked whole
    if environ.get("KUBERNETES_SERVICE_HOST"):
        return []  # in a pod: the service account comes first
    return [p for p in environ.get("KUBECONFIG", "").split(os.pathsep) if p and os.path.isfile(p)]


def _shape_problems(obj: dict[str, Any], where: str) -> list[str]:
    problems: list[str] = []

    def report(field: str, message: str) -> None:
        problems.append(problem_line(where, "Config", f"{field}: {message}"))

    kind = obj.get("kind")
    if kind is not None and kind != "Config":
        report("kind", f'must be "Config", got {kind!r}')
    current = obj.get("current-context")
    if current is not None and not isinstance(current, str):
        report("current-context", f"must be a string, got {describe_type(current)}")
    for plural, singular in _NAMED_LISTS:
        items = obj.get(plural)
        if items is None:
            continue
        if not isinstance(items, list):
            report(plural, f"must be an array, got {describe_type(items)}")
            continue
        for index, item in enumerate(items):
            _item_problems(item, f"{plural}[{index}]", singular, report)
    return problems


def _item_problems(item: Any, field: str, singular: str, report) -> None:
    if not isinstance(item, dict):
        report(field, f"must be an object, got {describe_type(item)}")
        return
    name = item.get("name")
    if not isinstance(name, str) or not name:
        report(f"{field}.name",
               "required" if name is None else f"must be a non-empty string, got {describe_type(name)}")
    body = item.get(singular)
    if body is None:
        return
    if not isinstance(body, dict):
        report(f"{field}.{singular}", f"must be an object, got {describe_type(body)}")
        return
    for key in _STRING_FIELDS[singular]:
        value = body.get(key)
        if value is not None and not isinstance(value, str):
            report(f"{field}.{singular}.{key}", f"must be a string, got {describe_type(value)}")
    for key, value in body.items():
        if key in ("exec", "auth-provider") and not isinstance(value, dict):
            report(f"{field}.{singular}.{key}", f"must be an object, got {describe_type(value)}")


def all_problems(explicit: str | None, environ: Mapping[str, str]) -> list[str]:
    """The problems of every kubeconfig file the kube layer would read (kubeconfig_files)."""
    return [problem for path in kubeconfig_files(explicit, environ)
            for problem in kubeconfig_problems(path, whole=bool(explicit))]


def _reference_problems(obj: dict[str, Any], where: str) -> list[str]:
    """What the loader looks up: the current context, its cluster (with a server) and its user."""
    def line(field: str, message: str) -> list[str]:
        return [problem_line(where, "Config", f"{field}: {message}")]

    def named(plural: str, name: str) -> tuple[int, dict[str, Any]] | None:
        return next(((i, item) for i, item in enumerate(obj.get(plural) or ()) if item.get("name") == name), None)

    current = obj.get("current-context")
    if not current:
        return line("current-context", "required (the name of the context to use)")
    found = named("contexts", current)
    if found is None:
        return line("current-context", f'no context named "{current}" in contexts')
    index, context = found
    body = context.get("context") or {}
    cluster_name = body.get("cluster")
    if not cluster_name:
        return line(f"contexts[{index}].context.cluster", "required")
    cluster = named("clusters", cluster_name)
    if cluster is None:
        return line(f"contexts[{index}].context.cluster", f'no cluster named "{cluster_name}" in clusters')
    server = (cluster[1].get("cluster") or {}).get("server")
    if not server:
        return line(f"clusters[{cluster[0]}].cluster.server", "required")
    user_name = body.get("user")
    if not user_name and server.startswith("https:"):
        # kubectl would go on anonymously; kubernetes_asyncio's loader fails on a missing user.
        return line(f"contexts[{index}].context.user", "required with an https server")
    if user_name and named("users", user_name) is None:
        return line(f"contexts[{index}].context.user", f'no user named "{user_name}" in users')
    return []


__all__ = ["all_problems", "kubeconfig_files", "kubeconfig_problems"]
