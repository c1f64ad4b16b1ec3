"""The private kopf symbols kube/kopf_internals.py relies on, one test each: a kopf release that
renames, removes or re-shapes one fails here, naming it, before any end-to-end test hangs on it.
And no other module of ours reaches into kopf's private modules."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from kopfsched.kube import kopf_internals

PACKAGE = Path(kopf_internals.__file__).resolve().parent.parent


@pytest.mark.parametrize("symbol", kopf_internals.SYMBOLS, ids=lambda s: s.path)
def test_the_private_kopf_symbol_is_as_we_rely_on(symbol: kopf_internals.Symbol) -> None:
    problem = symbol.problem()
    assert problem is None, f"kopf changed a private symbol kopfsched relies on: {problem}"


def test_a_changed_symbol_is_named_in_one_line(monkeypatch) -> None:
    from kopf._cogs.clients import watching

    monkeypatch.delattr(watching, "WatchingError")
    assert kopf_internals.check() == ["kopf._cogs.clients.watching.WatchingError: gone from kopf"]


def test_a_missing_parameter_is_named(monkeypatch) -> None:
    async def narrower(*, settings, resource, namespace):  # operator_pause_waiter gone
        yield None

    monkeypatch.setattr(kopf_internals, "original_continuous_watch", narrower)
    [problem] = kopf_internals.check()
    assert problem == ("kopf._cogs.clients.watching.continuous_watch: no parameter operator_pause_waiter "
                       "(has settings, resource, namespace)")


def test_no_other_module_imports_kopfs_private_modules() -> None:
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "kopf_internals.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            offenders += [f"{path.relative_to(PACKAGE)}: {n}" for n in names if n.startswith(("kopf._", "kopf."))]
    assert offenders == []
