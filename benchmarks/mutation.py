"""A bounded mutation-testing run: small deliberate bugs planted one at a time in a copy of
operator/, each followed by the tests of the module it is in. A mutant the tests still pass
("survived") marks behaviour no test pins down.

    python -m benchmarks.mutation                                    # plugins/, queue/, kube/client.py
    python -m benchmarks.mutation operator/kopfsched/plugins/helper/tolerations.py --max 30
    python -m benchmarks.mutation operator/kopfsched/queue --tests tests/queue --max 50 --seed 2

A hand-written AST mutator rather than mutmut or cosmic-ray: it needs nothing installed, runs
offline, and its budget (`--max` mutants, `--timeout` seconds each) bounds the run on a shared
machine. Operators it applies, one site at a time:

- comparisons: < <=, > >=, == !=, in / not in, is / is not swapped;
- boolean `and` / `or` swapped, `not x` made `x`;
- arithmetic + -, * /, // % swapped;
- integer constants n -> n + 1, True / False swapped;
- `return <expr>` made `return None` (not for a falsy constant: that one is equivalent).

Each file's tests are the room's test module named after it (plugins/tainttoleration.py ->
tests/plugins/test_tainttoleration.py), else `--tests`, else the room (tests/plugins). Mutants
are sampled with `--seed` when there are more sites than `--max`. Output: one line per
survivor (file:line, the change, the source line) and a count; exit status 0 (a report, not a
gate).
"""
from __future__ import annotations

import argparse
import ast
import dataclasses
import os
import pathlib
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGE = ROOT / 'operator' / 'kopfsched'
DEFAULT_TARGETS = ('operator/kopfsched/plugins', 'operator/kopfsched/queue', 'operator/kopfsched/kube/client.py')
ROOMS = {'plugins': 'tests/plugins', 'queue': 'tests/queue', 'kube': 'tests/kube'}
EXTRA_TESTS = {  # modules whose tests are not named after them
    'plugins/helper/tolerations.py': ['tests/plugins/test_tainttoleration.py'],
    'kube/client.py': ['tests/kube/test_client.py', 'tests/kube/test_direct_api.py'],
    'queue/scheduling_queue.py': ['tests/queue'],
    'queue/in_flight.py': ['tests/queue'],
    'queue/pool.py': ['tests/queue'],
    'queue/profile.py': ['tests/queue'],
}

SWAP_COMPARE: dict[type[ast.cmpop], type[ast.cmpop]] = {
    ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt, ast.Eq: ast.NotEq, ast.NotEq: ast.Eq,
    ast.In: ast.NotIn, ast.NotIn: ast.In, ast.Is: ast.IsNot, ast.IsNot: ast.Is,
}
SWAP_BINOP: dict[type[ast.operator], type[ast.operator]] = {
    ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.Div, ast.Div: ast.Mult, ast.FloorDiv: ast.Mod,
    ast.Mod: ast.FloorDiv,
}
SYMBOL = {ast.Lt: '<', ast.LtE: '<=', ast.Gt: '>', ast.GtE: '>=', ast.Eq: '==', ast.NotEq: '!=', ast.In: 'in',
          ast.NotIn: 'not in', ast.Is: 'is', ast.IsNot: 'is not', ast.Add: '+', ast.Sub: '-', ast.Mult: '*',
          ast.Div: '/', ast.FloorDiv: '//', ast.Mod: '%', ast.And: 'and', ast.Or: 'or'}


@dataclasses.dataclass(frozen=True)
class Site:
    """One mutation: the `index`-th node (in ast.walk order) of `path`, changed as `change` says."""
    path: pathlib.Path
    index: int
    line: int
    change: str


def _docstring_nodes(tree: ast.AST) -> set[int]:
    """ids of docstring constants: mutating them changes nothing a test could see."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                found.add(id(body[0].value))
    return found


def _describe(node: ast.AST) -> str | None:
    """What mutating this node does, or None when it is not a mutation site."""
    if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in SWAP_COMPARE:
        old = type(node.ops[0])
        return f'{SYMBOL[old]} -> {SYMBOL[SWAP_COMPARE[old]]}'
    if isinstance(node, ast.BinOp) and type(node.op) in SWAP_BINOP:
        return f'{SYMBOL[type(node.op)]} -> {SYMBOL[SWAP_BINOP[type(node.op)]]}'
    if isinstance(node, ast.BoolOp):
        return f'{SYMBOL[type(node.op)]} -> {"or" if isinstance(node.op, ast.And) else "and"}'
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return 'not x -> x'
    if isinstance(node, ast.Constant) and type(node.value) is bool:
        return f'{node.value} -> {not node.value}'
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return f'{node.value} -> {node.value + 1}'
    if isinstance(node, ast.Return) and node.value is not None and not (
            isinstance(node.value, ast.Constant) and not node.value.value):  # return False -> None: the same
        return 'return x -> return None'
    return None


def sites(path: pathlib.Path) -> Iterator[Site]:
    tree = ast.parse(path.read_text())
    docstrings = _docstring_nodes(tree)
    for index, node in enumerate(ast.walk(tree)):
        if id(node) in docstrings:
            continue
        change = _describe(node)
        if change is not None:
            yield Site(path, index, getattr(node, 'lineno', 0), change)


class _Mutate(ast.NodeTransformer):
    def __init__(self, target: ast.AST) -> None:
        self.target = target

    def visit(self, node: ast.AST) -> ast.AST:
        if node is not self.target:
            return super().visit(node)
        if isinstance(node, ast.Compare):
            node.ops = [SWAP_COMPARE[type(node.ops[0])]()]
        elif isinstance(node, ast.BinOp):
            node.op = SWAP_BINOP[type(node.op)]()
        elif isinstance(node, ast.BoolOp):
            node.op = ast.Or() if isinstance(node.op, ast.And) else ast.And()
        elif isinstance(node, ast.UnaryOp):
            return node.operand
        elif isinstance(node, ast.Constant) and type(node.value) is bool:
            node.value = not node.value
        elif isinstance(node, ast.Constant):
            node.value = node.value + 1
        elif isinstance(node, ast.Return):
            node.value = ast.Constant(None)
        return node


def mutated_source(site: Site) -> str:
    tree = ast.parse(site.path.read_text())
    target = next(node for index, node in enumerate(ast.walk(tree)) if index == site.index)
    return ast.unparse(ast.fix_missing_locations(_Mutate(target).visit(tree)))


def tests_for(path: pathlib.Path, override: list[str]) -> list[str]:
    if override:
        return override
    relative = path.relative_to(PACKAGE).as_posix()
    if relative in EXTRA_TESTS:
        return EXTRA_TESTS[relative]
    room = ROOMS.get(relative.split('/')[0], 'tests')
    named = ROOT / room / f'test_{path.stem if path.stem != "plugin" else path.parent.name}.py'
    return [str(named.relative_to(ROOT))] if named.exists() else [room]


def run_tests(copy_root: pathlib.Path, tests: list[str], timeout: float) -> str:
    """'killed', 'survived' or 'timeout' (a mutant that hangs the tests counts as killed)."""
    env = {**os.environ, 'PYTHONPATH': os.pathsep.join([str(copy_root / 'operator'), str(ROOT)]),
           'PYTHONDONTWRITEBYTECODE': '1'}
    command = [sys.executable, '-m', 'pytest', *tests, '-x', '-q', '-p', 'no:cacheprovider', '-o', 'addopts=']
    try:
        done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return 'timeout'
    return 'survived' if done.returncode == 0 else 'killed'


def expand(targets: list[str]) -> list[pathlib.Path]:
    files: list[pathlib.Path] = []
    for target in targets:
        path = (ROOT / target).resolve()
        if path.is_dir():
            files += sorted(p for p in path.rglob('*.py') if p.name != '__init__.py')
        elif path.is_file():
            files.append(path)
        else:
            raise SystemExit(f'mutation: {target}: no such file or directory')
    return files


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog='python -m benchmarks.mutation', description=__doc__.splitlines()[0])
    parser.add_argument('targets', nargs='*', default=list(DEFAULT_TARGETS),
                        help='files or folders under operator/kopfsched (default: plugins, queue, kube/client.py)')
    parser.add_argument('--tests', action='append', default=[], help='the tests to run for every mutant')
    parser.add_argument('--max', type=int, default=40, help='mutants to try at most (sampled)')
    parser.add_argument('--seed', type=int, default=1)
    parser.add_argument('--timeout', type=float, default=300.0, help='seconds per mutant run')
    parser.add_argument('--lines', help='only sites on these lines, e.g. 40-55 (with one target file)')
    args = parser.parse_args(argv)

    candidates = [site for path in expand(args.targets) for site in sites(path)]
    if args.lines:
        first, _, last = args.lines.partition('-')
        candidates = [s for s in candidates if int(first) <= s.line <= int(last or first)]
    chosen = sorted(random.Random(args.seed).sample(candidates, min(args.max, len(candidates))),
                    key=lambda s: (str(s.path), s.line, s.index))
    print(f'mutation: {len(chosen)} of {len(candidates)} mutants, seed {args.seed}', file=sys.stderr)
    outcomes: dict[str, int] = {'killed': 0, 'survived': 0, 'timeout': 0}
    survivors: list[Site] = []
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix='kopfsched-mutation-') as scratch:
        copy_root = pathlib.Path(scratch)
        shutil.copytree(ROOT / 'operator', copy_root / 'operator',
                        ignore=shutil.ignore_patterns('__pycache__', '*.egg-info'))
        for tests in sorted({tuple(tests_for(site.path, args.tests)) for site in chosen}):
            if run_tests(copy_root, list(tests), args.timeout) != 'survived':  # unmutated: must pass
                print(f'mutation: {" ".join(tests)} fail(s) without any mutant; fix that first', file=sys.stderr)
                return 1
        for number, site in enumerate(chosen, 1):
            relative = site.path.relative_to(ROOT / 'operator')
            mirror = copy_root / 'operator' / relative
            original = mirror.read_text()
            mirror.write_text(mutated_source(site))
            try:
                outcome = run_tests(copy_root, tests_for(site.path, args.tests), args.timeout)
            finally:
                mirror.write_text(original)
            outcomes[outcome] += 1
            where = f'{site.path.relative_to(ROOT)}:{site.line}'
            print(f'[{number}/{len(chosen)}] {outcome:8} {where} {site.change}', file=sys.stderr)
            if outcome == 'survived':
                survivors.append(site)
    for site in survivors:
        line = site.path.read_text().splitlines()[site.line - 1].strip()
        print(f'survived {site.path.relative_to(ROOT)}:{site.line}: {site.change}: {line}')
    total = sum(outcomes.values())
    print(f'{outcomes["killed"]} killed, {outcomes["timeout"]} timed out, {outcomes["survived"]} survived '
          f'of {total} in {time.monotonic() - started:.0f} s')
    return 0


if __name__ == '__main__':
    sys.exit(main())
