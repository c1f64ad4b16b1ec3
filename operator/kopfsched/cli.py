"""The `kopfsched` command: run, sandbox, simulate, explain, snapshot, bench, validate, replay.

Exit status: 0 success, 1 invalid input (one line per problem, no traceback), 2 usage.
Every input problem is worded the same in every subcommand (kopfsched.documents.problem_line):
`file: document N: Kind/namespace/name: field: message`. docs/cli.md documents the command.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from collections.abc import Sequence

from kopfsched import __version__

EXIT_OK, EXIT_INVALID, EXIT_USAGE = 0, 1, 2
INPUT_HELP = "YAML or JSON file, directory (its .yaml, .yml and .json files) or - for stdin"
KUBECONFIG_HELP = "kubeconfig file (default: the in-cluster service account, then $KUBECONFIG or ~/.kube/config)"


def _count(minimum: int, maximum: int | None = None):
    """An argparse type: an integer of at least `minimum` (and at most `maximum`), worded as
    argparse's own errors."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"invalid int value: {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, got {value}")
        if maximum is not None and value > maximum:
            raise argparse.ArgumentTypeError(f"must be at most {maximum}, got {value}")
        return value
    return parse


MAX_BENCH_NODES, MAX_BENCH_PODS = 100_000, 1_000_000
"""Twenty times scheduler_perf's largest cases: a typo's extra zeros is refused, not run out of memory."""


def _port(text: str) -> int:
    value = _count(0)(text)
    if value > 65535:
        raise argparse.ArgumentTypeError(f"must be a port number (0-65535), got {value}")
    return value


def _ip_address(text: str) -> str:
    import ipaddress
    try:
        return str(ipaddress.ip_address(text))
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an IP address, got {text!r}") from None


def _allow_paths(text: str) -> tuple[str, ...]:
    from kopfsched.observability.secure import PathMatcher
    paths = tuple(p.strip() for p in text.split(",") if p.strip())
    try:
        PathMatcher(paths)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return paths


def _feature_gates(text: str):
    """An argparse type: kube-scheduler's `--feature-gates Name=true,...`, for the gates kopfsched can switch."""
    from kopfsched import features

    try:
        return features.parse(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


FEATURE_GATES_HELP = ("Name=true|false,... as kube-scheduler v1.37.2's --feature-gates; kopfsched can switch "
                      "DRADeviceTaintRules, DRADeviceTaints, NominatedNodeNameForExpectation, "
                      "SchedulerPopFromBackoffQ, StorageCapacityScoring and VolumeLimitScaling "
                      "(default: every gate at its default, see docs/feature-gates.md)")


def _parser() -> argparse.ArgumentParser:
    from kopfsched.bench.workloads import WORKLOADS

    parser = argparse.ArgumentParser(
        prog="kopfsched", description="A Kubernetes scheduler in Python: kube-scheduler's framework on kopf.",
        epilog="Exit status: 0 success, 1 invalid input (one line per problem on stderr), 2 usage error. "
               "See docs/cli.md.")
    parser.add_argument("--version", action="version", version=f"kopfsched {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    run = sub.add_parser("run", help="run the scheduler against a cluster",
                         description="Run the scheduler: serve every SchedulerProfile of the cluster (and --config's "
                                     "profiles) until SIGTERM/SIGINT.")
    run.add_argument("--kubeconfig", metavar="F", help=KUBECONFIG_HELP)
    run.add_argument("--feature-gates", type=_feature_gates, metavar="GATES", help=FEATURE_GATES_HELP)
    run.add_argument("--config", metavar="F",
                     help="a KubeSchedulerConfiguration file whose profiles are served too (default: none)")
    run.add_argument("--leader-elect", action=argparse.BooleanOptionalAction, default=None,
                     help="Lease-based leader election (default: the --config's leaderElection, else on)")
    run.add_argument("--metrics-port", type=_port, default=10251, metavar="N",
                     help="plain-HTTP port on 127.0.0.1 of the dashboard, /debug/*, /metrics and the health paths, "
                          "reached with kubectl port-forward; 0 turns it off (default: 10251)")
    # Secure serving (security helper): kube-scheduler's flags, see docs/operations.md.
    run.add_argument("--secure-port", type=_port, default=10259, metavar="N",
                     help="HTTPS port of /metrics, /debug/* and the health paths, every request but the health "
                          "paths checked with TokenReview and SubjectAccessReview; 0 turns it off (default: 10259)")
    run.add_argument("--bind-address", type=_ip_address, default="0.0.0.0", metavar="IP",
                     help="the address of --secure-port (default: 0.0.0.0, every interface)")
    run.add_argument("--tls-cert-file", metavar="F", help="the serving certificate (PEM) of --secure-port "
                                                          "(default: self-signed, see --cert-dir)")
    run.add_argument("--tls-private-key-file", metavar="F", help="the key (PEM) of --tls-cert-file (default: none)")
    run.add_argument("--cert-dir", metavar="D", help="where a self-signed kopfsched.crt/.key is kept when no "
                                                     "--tls-cert-file is given (default: none, made in memory)")
    run.add_argument("--authorization-always-allow-paths", type=_allow_paths, metavar="PATHS",
                     default=("/healthz", "/readyz", "/livez"),
                     help="comma-separated paths served without a token; a trailing * matches a prefix "
                          "(default: /healthz,/readyz,/livez)")
    _sandbox_parser(sub)

    simulate = sub.add_parser("simulate", help="schedule a cluster snapshot offline",
                              description="Schedule a cluster snapshot offline with the same code that runs in a "
                                          "cluster. See docs/cli.md and docs/simulate-json.md.")
    simulate.add_argument("files", nargs="*", metavar="FILE",
                          help=f"{INPUT_HELP} (none: the live cluster of --kubeconfig)")
    simulate.add_argument("--kubeconfig", metavar="F",
                          help="with no FILE: read the live cluster of this kubeconfig file (default: none; "
                               "required when no FILE is given)")
    simulate.add_argument("--profile", action="append", default=[], metavar="F",
                          help="SchedulerProfile or KubeSchedulerConfiguration file, directory or - (repeatable; "
                               "default: only the profiles in FILE, plus upstream's default profile)")
    simulate.add_argument("-o", "--output", choices=("table", "json", "html"), default="table",
                          help="output format (default: table)")
    simulate.add_argument("--feature-gates", type=_feature_gates, metavar="GATES", help=FEATURE_GATES_HELP)
    simulate.add_argument("--explain", action="store_true",
                          help="also show every filtered-out node with its reasons and every scored node's scores "
                               "(default: off)")
    simulate.add_argument("--seed", type=int, default=0, metavar="N",
                          help="seed for breaking score ties; equal seeds give equal runs (default: 0)")
    simulate.add_argument("--compare", metavar="F", help="simulate again with the profiles of F replacing those of "
                                                          "the same schedulerName, and report what changes "
                                                          "(default: no comparison)")
    simulate.add_argument("--reschedule-all", action="store_true",
                          help="unbind every pod (but static, mirror and DaemonSet pods) and place them all again "
                               "(default: off)")

    _explain_parser(sub)
    _plan_parser(sub)

    snapshot = sub.add_parser("snapshot", help="copy what the scheduler reads from a live cluster, as simulate input",
                              description="Copy what the scheduler reads from a live cluster (read-only, paged LISTs) "
                                          "into one file that simulate and explain read. See docs/explain.md.")
    snapshot.add_argument("--kubeconfig", metavar="F", help=KUBECONFIG_HELP)
    snapshot.add_argument("-o", "--output", metavar="FILE", help="write to FILE (default: stdout)")
    snapshot.add_argument("-q", "--quiet", action="store_true",
                          help="leave out the progress lines on stderr (default: off)")

    bench = sub.add_parser("bench", help="measure the scheduler core in-process",
                           description="Measure the scheduler core in-process (queue, cycles, cache, binding through "
                                       "the in-memory client): no API server, no HTTP.")
    bench.add_argument("--nodes", type=_count(1, MAX_BENCH_NODES), metavar="N",
                       help=f"nodes, 1 to {MAX_BENCH_NODES} ({_size_default(0)})")
    bench.add_argument("--init-pods", type=_count(0, MAX_BENCH_PODS), metavar="N",
                       help=f"pods running before the measurement, 0 to {MAX_BENCH_PODS} ({_size_default(1)})")
    bench.add_argument("--pods", type=_count(1, MAX_BENCH_PODS), metavar="N",
                       help=f"pods measured, 1 to {MAX_BENCH_PODS} ({_size_default(2)})")
    bench.add_argument("--workload", choices=tuple(WORKLOADS), default="basic", metavar="NAME",
                       help="the workload, shaped as upstream's scheduler_perf case: " + _workloads() +
                            " (default: basic)")
    bench.add_argument("--feature-gates", type=_feature_gates, metavar="GATES", help=FEATURE_GATES_HELP)
    bench.add_argument("--no-churn", action="store_true",
                       help="leave out the churn pods of preemption-async and unschedulable: the measured pods "
                            "alone, to see what the churn costs them (default: off)")
    bench.add_argument("--profile", metavar="F",
                       help="SchedulerProfile or KubeSchedulerConfiguration file to bench (default: upstream's "
                            "default profile)")
    bench.add_argument("-o", "--output", choices=("table", "json"), default="table",
                       help="output format (default: table)")

    validate = sub.add_parser("validate", help="check SchedulerProfiles and KubeSchedulerConfigurations",
                              description="Check SchedulerProfiles and KubeSchedulerConfigurations as the operator "
                                          "would load them, together (one scheduler name per profile, one "
                                          "queueSort). Exit status 1 when anything is invalid.")
    validate.add_argument("files", nargs="+", metavar="FILE", help=INPUT_HELP)
    _replay_parser(sub)
    return parser


def _workloads() -> str:
    """`basic (SchedulingBasic), ...`: each workload with the scheduler_perf case it follows,
    the first word of its docstring."""
    import re

    from kopfsched.bench.workloads import WORKLOADS

    return ", ".join(f"{name} ({re.match(r'[A-Za-z]+', (make.__doc__ or '?').strip()).group()})"  # type: ignore[union-attr]
                     for name, make in WORKLOADS.items())


def _size_default(index: int) -> str:
    """`default: 500; preemption-async 5000, ...`: the workloads' own sizes, as scheduler_perf's."""
    from kopfsched.bench.workloads import DEFAULT_SIZE, SIZES

    others = [f"{name} {size[index]}" for name, size in SIZES.items() if size[index] != DEFAULT_SIZE[index]]
    return f"default: {DEFAULT_SIZE[index]}" + (f"; {', '.join(others)}" if others else "")


def _sandbox_parser(sub) -> None:
    sandbox = sub.add_parser("sandbox", help="the operator against an emulated cluster on 127.0.0.1, for kubectl",
                             description="Run the real operator against an emulated Kubernetes API on 127.0.0.1 "
                                         "holding a cluster snapshot, and write a kubeconfig for kubectl; Ctrl-C "
                                         "stops it. See docs/sandbox.md.")
    sandbox.add_argument("files", nargs="*", metavar="FILE",
                         help="cluster snapshot files to preload (default: examples/cluster.yaml)")
    sandbox.add_argument("--kubeconfig-out", metavar="F", default=None,
                         help="where to write the kubeconfig for kubectl, once the sandbox serves "
                              "(default: ~/.kube/kopfsched-sandbox.kubeconfig)")
    sandbox.add_argument("--metrics-port", type=_port, default=None, metavar="N",
                         help="port of the dashboard, /debug/pending and /metrics (default: kopfsched run's; "
                              "0 picks a free one)")


def _pod_ref(text: str) -> str:
    """An argparse type: NAMESPACE/NAME, checked before any input is read."""
    from kopfsched.simulate.explain import ExplainError, parse_pod_ref

    try:
        parse_pod_ref(text)
    except ExplainError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def _explain_parser(sub) -> None:
    explain = sub.add_parser("explain", help="why one pod fits where it does, or nowhere, node by node",
                             description="Run one scheduling cycle for one pod and show every node's verdict, "
                                         "grouped by reason, the scores, and what preemption could do. "
                                         "See docs/explain.md.")
    explain.add_argument("pod", metavar="NAMESPACE/NAME", type=_pod_ref,
                         help="the pod to explain (a NAME alone: in namespace default)")
    explain.add_argument("files", nargs="*", metavar="FILE", help=f"{INPUT_HELP} (none: the live cluster)")
    explain.add_argument("--kubeconfig", metavar="F", help="read the live cluster (default without files: in-cluster, "
                                                           "then $KUBECONFIG)")
    explain.add_argument("--profile", action="append", default=[], metavar="F",
                         help="explain with this profile instead of the pod's own (repeatable: the one of the "
                              "pod's schedulerName wins; default: the pod's own profile)")
    explain.add_argument("--node", metavar="N", help="show one node's verdict and scores in full (default: all "
                                                      "nodes, grouped by reason)")
    explain.add_argument("-o", "--output", choices=("table", "json", "html"), default="table",
                         help="output format (default: table)")
    explain.add_argument("--seed", type=int, default=0, metavar="N",
                         help="seed for breaking score ties, as simulate's (default: 0)")
    explain.add_argument("--as-given", action="store_true",
                         help="evaluate the pod alone against the input as it stands (default: off: replay "
                              "simulate, so the pods queued ahead of it are placed first, and evaluate its "
                              "first attempt)")


PROBLEMS_SHOWN = 20
"""Problems of a simulate or explain input printed before the rest are only counted: a
generated file with one mistake per object must not bury the terminal."""


def _print_problems(problems: Sequence[str], *, limit: int | None = None) -> None:
    shown = problems if limit is None or len(problems) <= limit + 1 else problems[:limit]
    for problem in shown:
        print(problem, file=sys.stderr)
    if len(shown) < len(problems):
        print(f"... and {len(problems) - len(shown)} more problem(s) (the first {len(shown)} shown)", file=sys.stderr)


def _plugin_registry():
    """Built-in plus installed plugins; problems with installed ones are warnings (a profile
    that enables a broken plugin is itself reported invalid)."""
    from kopfsched.plugins.registry import full_registry

    registry = full_registry()
    _print_problems([f"warning: {problem}" for problem in registry.problems])
    return registry


def load_profile_files(paths: Sequence[str]):
    """The --profile files: only SchedulerProfiles and KubeSchedulerConfigurations belong there."""
    from kopfsched.documents import problem_line, read_documents
    from kopfsched.simulate.loader import CONFIG_KINDS, ClusterInput, add_document

    inputs = ClusterInput()
    for document in read_documents(paths, inputs.problems):
        kind = document.obj.get("kind")
        if kind in CONFIG_KINDS or not isinstance(kind, str) or not kind:
            add_document(inputs, document)
        else:
            inputs.problems.append(problem_line(document.where, _label(document.obj),
                                                "kind: not a SchedulerProfile or KubeSchedulerConfiguration"))
    return inputs


def _label(obj) -> str | None:
    from kopfsched.documents import object_label

    return object_label(obj)


def cmd_simulate(args: argparse.Namespace) -> int:
    from kopfsched.simulate.output import to_json, to_table
    from kopfsched.simulate.runner import simulate

    inputs = _read_input(list(args.files), args.kubeconfig)
    if not inputs.problems and not inputs.nodes and not inputs.pods and not inputs.workloads:
        # Say so, instead of an empty table that looks like a run (e.g. only ConfigMaps).
        where = ", ".join("<stdin>" if f == "-" else f for f in args.files) or "the cluster"
        inputs.problems.append(f"{where}: nothing to schedule: no Nodes, Pods or workloads in it")
    if inputs.problems and not inputs.nodes and not inputs.pods and not inputs.workloads:
        # Nothing usable was read: the problems are the whole answer, not an empty table.
        _print_problems(inputs.warnings)
        _print_problems(inputs.problems, limit=PROBLEMS_SHOWN)
        return EXIT_INVALID
    profile_inputs = load_profile_files(list(args.profile))
    inputs.problems.extend(profile_inputs.problems)
    inputs.configs.extend(profile_inputs.configs)
    registry = _plugin_registry()
    if args.reschedule_all:
        from kopfsched.simulate.compare import unbind_all

        unbind_all(inputs)
    if args.compare:
        return _simulate_compare(args, inputs, registry)
    sim = asyncio.run(simulate(inputs, registry=registry, seed=args.seed, explain=args.explain))
    report = to_json(sim, explain=args.explain)
    if args.output == "json":
        print(json.dumps(report, indent=2))
    elif args.output == "html":
        from kopfsched.simulate.html import simulate_html

        sys.stdout.write(simulate_html(sim, report))
    else:
        sys.stdout.write(to_table(report, explain=args.explain))
    _print_problems(inputs.warnings)
    _print_problems(inputs.problems, limit=PROBLEMS_SHOWN)
    return EXIT_INVALID if inputs.problems else EXIT_OK


def _override_profiles(paths: list[str], registry, problems: list[str]):
    """The profiles of --profile files (the built-in default left out)."""
    from kopfsched.simulate.runner import build_profiles

    if not paths:
        return []
    inputs = load_profile_files(paths)
    problems.extend(inputs.problems)
    if not inputs.configs:
        if not inputs.problems:
            problems.append(f"{', '.join(paths)}: no SchedulerProfile or KubeSchedulerConfiguration in it")
        return []
    before = len(inputs.problems)
    profiles = [p for p in build_profiles(inputs, registry) if p.source != "default"]
    problems.extend(inputs.problems[before:])
    return profiles


def _read_input(files: list[str], kubeconfig: str | None):
    """Snapshot files, or the live cluster when no file is given."""
    from kopfsched.simulate.loader import ClusterInput, load_files, load_objects

    if files:
        from kopfsched.documents import Progress

        return load_files(files, progress=Progress())
    result = ClusterInput()
    try:
        from kopfsched.framework.client import ClusterError
        from kopfsched.kube.operator import StartupError
        from kopfsched.kube.snapshot import read_cluster
    except ImportError as exc:  # the kube layer is optional for offline use
        result.problems.append(f"reading a live cluster is unavailable: {exc}")
        return result
    try:
        objects = read_cluster(kubeconfig)
    except (StartupError, ClusterError) as exc:
        result.problems.append(f"reading the cluster: {exc}")
        return result
    return load_objects(objects, "cluster")


def cmd_explain(args: argparse.Namespace) -> int:
    from kopfsched.simulate.explain import ExplainError, explain_pod, parse_pod_ref
    from kopfsched.simulate.explain_table import to_table

    try:
        key = parse_pod_ref(args.pod)
    except ExplainError as exc:
        print(exc, file=sys.stderr)
        return EXIT_USAGE
    registry = _plugin_registry()
    problems: list[str] = []
    overrides = _override_profiles(list(args.profile), registry, problems)
    if problems:
        _print_problems(problems)
        return EXIT_INVALID
    inputs = _read_input(list(args.files), args.kubeconfig)
    if inputs.problems and not (inputs.nodes or inputs.pods):
        _print_problems(inputs.problems, limit=PROBLEMS_SHOWN)
        return EXIT_INVALID
    target = next((p for p in inputs.pods if f"{p.obj['metadata']['namespace']}/{p.obj['metadata']['name']}" == key),
                  None)
    scheduler_name = ((target.obj.get("spec") or {}).get("schedulerName") if target else None) or "default-scheduler"
    profile = next((p for p in overrides if p.scheduler_name == scheduler_name), overrides[0] if overrides else None)
    try:
        explanation = asyncio.run(explain_pod(inputs, key, registry=registry, profile=profile, seed=args.seed,
                                                    as_given=args.as_given))
    except ExplainError as exc:
        _print_problems([*inputs.problems, str(exc)], limit=PROBLEMS_SHOWN)
        return EXIT_INVALID
    entry = explanation.entry
    if args.node is not None and args.node not in {n["name"] for n in explanation.nodes}:
        print(f'node "{args.node}" not found in the input', file=sys.stderr)  # worded as a missing pod
        return EXIT_INVALID
    if args.output == "json":
        print(json.dumps(entry, indent=2))
    elif args.output == "html":
        from kopfsched.simulate.html import explain_html

        sys.stdout.write(explain_html(explanation))
    else:
        sys.stdout.write(to_table(entry, node=args.node))
    _print_problems(inputs.warnings)
    _print_problems(inputs.problems, limit=PROBLEMS_SHOWN)
    return EXIT_INVALID if inputs.problems else EXIT_OK


def cmd_snapshot(args: argparse.Namespace) -> int:
    try:
        from kopfsched.kube.snapshot import snapshot
    except ImportError as exc:  # the kube layer is optional for offline use
        print(f"kopfsched snapshot: unavailable: {exc}", file=sys.stderr)
        return EXIT_INVALID
    if args.output is None:
        return snapshot(args.kubeconfig, sys.stdout, quiet=args.quiet)
    # Written beside the target and renamed into place once complete: a failed read of the
    # cluster leaves an existing FILE as it was, never truncated or half written.
    import tempfile

    problem = _unwritable(args.output)
    if problem:  # found now, not after the cluster has been read
        print(problem, file=sys.stderr)
        return EXIT_INVALID
    directory, name = os.path.split(os.path.abspath(args.output))
    partial = None
    try:
        handle, partial = tempfile.mkstemp(dir=directory, prefix=f".{name}.", suffix=".partial")
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            code = snapshot(args.kubeconfig, out, quiet=args.quiet)
        if code == EXIT_OK:
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(partial, 0o666 & ~umask)  # as open(FILE, "w") would have made it
            os.replace(partial, args.output)
        return code
    except OSError as exc:
        print(f"{args.output}: cannot write: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_INVALID
    finally:
        if partial is not None and os.path.exists(partial):
            os.unlink(partial)


def _simulate_compare(args: argparse.Namespace, inputs, registry) -> int:
    from kopfsched.simulate import compare

    problems: list[str] = []
    overrides = _override_profiles([args.compare], registry, problems)
    if problems:
        _print_problems(problems)
        return EXIT_INVALID
    comparison = asyncio.run(compare.compare(inputs, overrides, registry=registry, seed=args.seed,
                                             explain=args.explain))
    if args.output == "json":
        print(json.dumps(comparison.report, indent=2))
    elif args.output == "html":
        from kopfsched.simulate.html import compare_html

        sys.stdout.write(compare_html(comparison))
    else:
        sys.stdout.write(compare.to_table(comparison.report))
    _print_problems(inputs.warnings)
    _print_problems(inputs.problems, limit=PROBLEMS_SHOWN)
    return EXIT_INVALID if inputs.problems else EXIT_OK


def cmd_validate(args: argparse.Namespace) -> int:
    from kopfsched.config.validate_files import validate_files

    read: list[str] = []
    problems = validate_files(list(args.files), _plugin_registry(), read=read)
    _print_problems(problems)
    if not problems:
        print(f"{len(read)} file(s) valid")  # a directory counts its files
    return EXIT_INVALID if problems else EXIT_OK


def cmd_bench(args: argparse.Namespace) -> int:
    from kopfsched.bench.runner import bench
    from kopfsched.bench.workloads import DEFAULT_SIZE, SIZES

    default_nodes, default_init, default_pods = SIZES.get(args.workload, DEFAULT_SIZE)
    nodes = default_nodes if args.nodes is None else args.nodes
    init_pods = default_init if args.init_pods is None else args.init_pods
    pods = default_pods if args.pods is None else args.pods
    registry = _plugin_registry()
    profile = None
    if args.profile:
        profile, problems = _load_one_profile(args.profile, registry)
        if problems:
            _print_problems(problems)
            return EXIT_INVALID
    result = bench(workload=args.workload, nodes=nodes, init_pods=init_pods, pods=pods,
                   profile=profile, registry=registry, progress=pods >= 5000, churn=not args.no_churn)
    if result["timedOut"]:
        print(f"kopfsched bench: stopped after {result['seconds']:.0f} s with {result['scheduled']} of "
              f"{result['pods']} measured pods scheduled: the rest stayed pending", file=sys.stderr)
    if args.output == "json":
        print(json.dumps(result))
    else:
        sys.stdout.write(_bench_table(result))
    return EXIT_OK


def _bench_table(result: dict) -> str:
    """`key: value` lines; the extension points as a table of their own (calls, total ms, mean µs)."""
    lines = [f"{key:>16}: {value}" for key, value in result.items() if not isinstance(value, dict)]
    for key, value in result.items():
        if not isinstance(value, dict):
            continue
        lines += ["", f"{key}:", f"  {'POINT':<12} {'CALLS':>8} {'TOTAL MS':>10} {'MEAN US':>9}"]
        for point, figures in sorted(value.items(), key=lambda item: -item[1].get("ms", 0)):
            calls, ms = figures.get("calls", 0), figures.get("ms", 0.0)
            mean = f"{ms * 1000 / calls:.1f}" if calls else "-"
            lines.append(f"  {point:<12} {calls:>8} {ms:>10.1f} {mean:>9}")
    return "\n".join(lines) + "\n"


def _load_one_profile(path: str, registry):
    from kopfsched.simulate.runner import build_profiles

    inputs = load_profile_files([path])
    if not inputs.configs and not inputs.problems:
        return None, [f"{path}: no SchedulerProfile or KubeSchedulerConfiguration in it"]
    profiles = build_profiles(inputs, registry)
    chosen = next((p for p in profiles if p.source != "default"), profiles[0])
    return chosen, inputs.problems


def cmd_run(args: argparse.Namespace) -> int:
    try:
        from kopfsched.kube.main import run_operator
    except ImportError as exc:  # the kube layer is optional for offline use
        print(f"kopfsched run: unavailable: {exc}", file=sys.stderr)
        return EXIT_INVALID
    return run_operator(kubeconfig=args.kubeconfig, config_file=args.config, leader_elect=args.leader_elect,
                        metrics_port=args.metrics_port or None, serving={
                            "secure_port": args.secure_port or None, "bind_address": args.bind_address,
                            "tls_cert_file": args.tls_cert_file, "tls_private_key_file": args.tls_private_key_file,
                            "cert_dir": args.cert_dir, "always_allow_paths": args.authorization_always_allow_paths})


def _unwritable(path: str) -> str | None:
    """The one line saying why `path` cannot be written, checked before any work is done."""
    if os.path.isdir(path):
        return f"{path}: cannot write: Is a directory"
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        return f"{path}: cannot write: No such file or directory"
    if not os.access(directory, os.W_OK) or (os.path.exists(path) and not os.access(path, os.W_OK)):
        return f"{path}: cannot write: Permission denied"
    return None


def cmd_sandbox(args: argparse.Namespace) -> int:
    try:
        import kmock  # noqa: F401  (the emulator's base, in the `sandbox` extra)
    except ImportError:
        print("kopfsched sandbox needs the API emulator: pip install 'kopfsched[sandbox]'", file=sys.stderr)
        return EXIT_INVALID
    from kopfsched.sandbox import DEFAULT_KUBECONFIG, SandboxOptions, main

    kubeconfig_out = args.kubeconfig_out or os.path.expanduser(DEFAULT_KUBECONFIG)
    if args.kubeconfig_out is None:
        os.makedirs(os.path.dirname(kubeconfig_out), exist_ok=True)  # kubectl's own directory
    problem = _unwritable(kubeconfig_out)
    if problem:  # found now, not after the cluster has started
        print(problem, file=sys.stderr)
        return EXIT_INVALID
    options = SandboxOptions(files=list(args.files), kubeconfig_out=kubeconfig_out)
    if args.metrics_port is not None:
        options.metrics_port = args.metrics_port
    return main(options)


# -- replay ------------------------------------------------------------------------------------


def _replay_parser(sub) -> None:
    replay = sub.add_parser("replay", help="run a history of arrivals and departures through the scheduler",
                            description="Run a time-ordered workload (pods arriving at their creationTimestamp or "
                                        "a CSV trace's arrival, leaving at their departure or after their duration) "
                                        "on the virtual clock through the real queue, cycles, preemption and binding. "
                                        "See docs/replay.md.")
    replay.add_argument("files", nargs="+", metavar="FILE",
                        help=f"{INPUT_HELP}, or a CSV trace (a file ending in .csv; docs/replay.md)")
    replay.add_argument("--profile", action="append", default=[], metavar="F",
                        help="SchedulerProfile or KubeSchedulerConfiguration file, directory or - (repeatable; "
                             "default: only the profiles in FILE, plus upstream's default profile)")
    replay.add_argument("--compare", metavar="F", help="replay again with the profiles of F replacing those of the "
                                                        "same schedulerName, and show both (default: no comparison)")
    replay.add_argument("-o", "--output", choices=("table", "json", "html"), default="table",
                        help="output format (default: table)")
    replay.add_argument("--feature-gates", type=_feature_gates, metavar="GATES", help=FEATURE_GATES_HELP)
    replay.add_argument("--seed", type=int, default=0, metavar="N",
                        help="seed for breaking score ties; equal seeds give equal runs (default: 0)")


def _read_history(files: list[str]):
    """The history of FILEs: YAML snapshots and CSV traces, checked as a whole."""
    from kopfsched.documents import Progress
    from kopfsched.simulate import history
    from kopfsched.simulate.loader import ClusterInput, load_files

    yaml_paths, csv_paths = history.trace_paths(files)
    inputs = load_files(yaml_paths, progress=Progress()) if yaml_paths else ClusterInput()
    return history.build(inputs, csv_paths)


def cmd_replay(args: argparse.Namespace) -> int:
    from kopfsched.simulate.replay import replay
    from kopfsched.simulate.replay_output import compare_json, compare_table, to_json, to_table

    hist = _read_history(list(args.files))
    profile_inputs = load_profile_files(list(args.profile))
    hist.problems.extend(profile_inputs.problems)
    hist.inputs.configs.extend(profile_inputs.configs)
    registry = _plugin_registry()
    overrides = _override_profiles([args.compare], registry, hist.problems) if args.compare else None
    if hist.problems:
        _print_problems(hist.warnings)
        _print_problems(hist.problems)
        return EXIT_INVALID
    runs = [asyncio.run(replay(hist, registry=registry, seed=args.seed))]
    if hist.problems:  # the profiles of FILE, found invalid as the scheduler loaded them
        _print_problems(hist.problems)
        return EXIT_INVALID
    if overrides is not None:
        runs.append(asyncio.run(replay(hist, registry=registry, seed=args.seed, overrides=overrides)))
    reports = [to_json(run) for run in runs]
    report = compare_json(*reports) if overrides is not None else reports[0]
    if args.output == "json":
        print(json.dumps(report, indent=2))
    elif args.output == "html":
        from kopfsched.simulate.html import replay_html, replay_view

        labels = ["before", "after"] if overrides is not None else [""]
        sys.stdout.write(replay_html([(label, rep, replay_view(run.sim, run.resources))
                                      for label, rep, run in zip(labels, reports, runs, strict=True)]))
    else:
        sys.stdout.write(compare_table(report) if overrides is not None else to_table(report))
    _print_problems(hist.warnings)
    return EXIT_OK


COMMANDS = {"run": cmd_run, "sandbox": cmd_sandbox, "simulate": cmd_simulate, "explain": cmd_explain,
            "snapshot": cmd_snapshot, "bench": cmd_bench, "validate": cmd_validate, "replay": cmd_replay}


# -- plan ------------------------------------------------------------------------------------

def _plan_parser(sub) -> None:
    plan = sub.add_parser("plan", help="the nodes to add so pending pods fit, and the nodes that could go",
                          description="Find the fewest (or, with prices, the cheapest) nodes made from node "
                                      "templates with which the pending pods fit, and the existing nodes whose pods "
                                      "could all move elsewhere, with the real scheduling cycle. See docs/plan.md.")
    plan.add_argument("files", nargs="+", metavar="FILE", help=INPUT_HELP)
    plan.add_argument("--node-template", action="append", default=[], metavar="F",
                      help="file of Node objects used as node templates (their ResourceSlices beside them), "
                           "repeatable; kopfsched.dev/price and kopfsched.dev/max-count annotations optional "
                           "(default: none; at least one is required)")
    plan.add_argument("-o", "--output", choices=("table", "json", "html"), default="table",
                      help="output format (default: table)")
    plan.add_argument("--apply-to", metavar="F",
                      help="also write the snapshot with the planned nodes added and the removable nodes gone to F, "
                           "for simulate and explain (default: none)")
    plan.add_argument("--seed", type=int, default=0, metavar="N",
                      help="seed for breaking score ties (default: 0)")


def cmd_plan(args: argparse.Namespace) -> int:
    from kopfsched.simulate import plan as planning
    from kopfsched.simulate.plan_output import plan_html, to_table

    if args.apply_to:
        problem = _unwritable(args.apply_to)
        if problem:
            print(problem, file=sys.stderr)
            return EXIT_INVALID
    if not args.node_template:
        print("no node templates: give --node-template F (a file of Node objects)", file=sys.stderr)
        return EXIT_INVALID
    templates, problems = planning.load_templates(list(args.node_template))
    inputs = _read_input(list(args.files), None)
    problems = [*inputs.problems, *problems]
    if not inputs.problems and not inputs.nodes and not inputs.pods and not inputs.workloads:
        where = ", ".join("<stdin>" if f == "-" else f for f in args.files)
        problems.append(f"{where}: nothing to plan: no Nodes, Pods or workloads in it")
    if problems:
        _print_problems(inputs.warnings)
        _print_problems(problems)
        return EXIT_INVALID
    result = asyncio.run(planning.plan(inputs, templates, registry=_plugin_registry(), seed=args.seed))
    if args.apply_to:
        try:
            with open(args.apply_to, "w", encoding="utf-8") as out:
                planning.write_objects(result.apply_objects, out)
        except OSError as exc:
            print(f"{args.apply_to}: cannot write: {exc.strerror or exc}", file=sys.stderr)
            return EXIT_INVALID
    if args.output == "json":
        print(json.dumps(result.report, indent=2))
    elif args.output == "html":
        sys.stdout.write(plan_html(result))
    else:
        sys.stdout.write(to_table(result.report))
    _print_problems(inputs.warnings)
    return EXIT_OK


COMMANDS["plan"] = cmd_plan


def _subparser(parser: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser:
    """A subcommand's parser, so its usage errors read `kopfsched NAME: error: ...` as argparse's own."""
    [choices] = [a.choices for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return choices[name]


def _reads_a_cluster(args: argparse.Namespace) -> bool:
    """run and snapshot always; simulate and explain when no snapshot file is given."""
    return args.command in ("run", "snapshot") or (args.command in ("simulate", "explain") and not args.files)


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command == "simulate" and not args.files and not args.kubeconfig:
        _subparser(parser, "simulate").error("give snapshot FILEs, or --kubeconfig F to read a live cluster")
    if getattr(args, "feature_gates", None) is not None:
        from kopfsched import features

        features.set_gates(args.feature_gates)
    inputs = [path for option in ("files", "profile", "compare", "config", "node_template")
              for value in [getattr(args, option, None) or ()]
              for path in ([value] if isinstance(value, str) else value)]
    if inputs.count("-") > 1:  # one stream: a second reader would find it empty
        print("<stdin>: standard input can be read only once", file=sys.stderr)
        return EXIT_INVALID
    if _reads_a_cluster(args):
        from kopfsched.config.kubeconfig import all_problems

        problems = all_problems(args.kubeconfig, os.environ)
        if problems:
            _print_problems(problems)
            return EXIT_INVALID
    from kopfsched import gcpolicy

    try:
        with gcpolicy.owning_the_process():
            return COMMANDS[args.command](args)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return EXIT_OK
