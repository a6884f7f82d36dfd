"""``build-graphs --shard-size``: the streaming build into a sharded dataset, in one process or as
the ranks of an MPI job (``mpiexec -n P``), fresh or appended (the rules: build-graphs' epilog and
:mod:`graph_builders.stream_build`).

Every rank runs :func:`run_streaming`; rank 0 alone prepares the output, decides what the others
follow, writes the index and the errors list, moves a fresh dataset into place and prints. A
fresh dataset is written into ``OUTPUT.tmp-<pid>`` beside OUTPUT and replaces it only when
complete; an append writes its shards (``part-aNNN-*``) into OUTPUT and lists them in a new index
at the end.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import Any

APPEND_PREFIX = "part-a"


@dataclass
class _Target:
    """Where this build writes: the directory, the shard name prefix, the layout, and (append) the
    dataset it adds to."""

    root: Path
    prefix: str
    layout: str
    existing: Any = None  # graph_builders.store.sharded.ShardIndex of the dataset appended to
    signature: tuple | None = None  # its graphs' attributes (graph_builders.batch_build.graph_signature)
    committed: bool = False  # the index written (append) or the dataset moved into place (fresh)


def run_streaming(args: argparse.Namespace, options, files: list[Path], fractions: tuple[float, ...], comm) -> int:
    """The exit code (build-graphs' epilog); every rank calls it."""
    from graph_builders.stream_build import StreamBuild, StreamBuildError, StreamPlan
    from hydragnn_ensemble.cli import UserError
    from hydragnn_ensemble.cli.build_checks import build_metadata

    rank = comm.Get_rank()
    target: _Target | str | None = None
    if rank == 0:
        try:
            target = _prepare(args)
        except UserError as exc:
            target = str(exc)
        except OSError as exc:  # e.g. no permission to write beside OUTPUT: every rank must hear of it
            target = f"cannot write {args.output}: {exc}"
    target = comm.bcast(target, root=0)
    if isinstance(target, str):
        if rank == 0:
            raise UserError(target)
        return 2
    plan = StreamPlan(options, args.shard_size, target.layout, args.seed, fractions, args.heads_from, target.prefix,
                      build_metadata(args, 0, 0))
    build = StreamBuild(files, plan, target.root, comm, progress=not args.no_progress)
    outcome: tuple[int, str | None] = (2, None)
    try:
        decision = build.decide()
        problem = None
        if rank == 0:
            try:
                decision = _settle(decision, args, target, options.heads)
            except UserError as exc:
                problem = (2, str(exc))
            except Exception as exc:  # noqa: BLE001 - every rank must hear of it (no rank left waiting)
                problem = (1, f"{type(exc).__name__}: {exc}")
        decision, problem = comm.bcast((decision, problem), root=0)
        if problem is None:
            result = build.write(decision)
            if rank == 0:
                try:
                    outcome = (_finish(args, target, decision, result, len(files)), None)
                except UserError as exc:
                    outcome = (2, str(exc))
                except Exception as exc:  # noqa: BLE001 - as above
                    outcome = (1, f"{type(exc).__name__}: {exc}")
        else:
            outcome = problem
    except StreamBuildError as exc:
        outcome = (1, str(exc))
    finally:
        build.close()
    code, problem = comm.bcast(outcome, root=0)
    if rank == 0 and problem is not None:
        _discard(target)
    if rank != 0:
        return code
    if problem is not None and code == 2:
        raise UserError(problem)
    if problem is not None:
        raise StreamBuildError(problem)
    return code


def _prepare(args: argparse.Namespace) -> _Target:
    """Rank 0: the directory to write into (an empty temporary one, or the dataset appended to)."""
    from graph_builders.batch_build import graph_signature
    from graph_builders.store import DEFAULT_LAYOUT, StoreError
    from graph_builders.store._atomic import remove_path, temporary_path
    from graph_builders.store.sharded import ShardedStore, is_sharded
    from hydragnn_ensemble.cli import UserError

    output: Path = args.output
    if not args.append:
        root = temporary_path(output)
        remove_path(root)
        root.mkdir(parents=True)
        return _Target(root, "part", args.layout or DEFAULT_LAYOUT)
    if not output.exists():
        raise UserError(f"--append: no dataset at {output}; build it first (without --append)")
    if not is_sharded(output):
        raise UserError(f"--append: {output} is not a sharded dataset (one built with --shard-size); "
                        "appending adds shards to one")
    try:
        with ShardedStore(output) as store:
            split = next(s for s in store.split_names if store.num_graphs(s))
            signature = graph_signature(store.get(split, 0))
            index = store.index
    except (StoreError, StopIteration) as exc:
        raise UserError(f"--append: cannot read the dataset {output}: {exc}") from None
    if args.layout is not None and args.layout != index.layout:
        raise UserError(f"--append: {output} is stored in layout {index.layout!r}, not {args.layout!r}; "
                        "leave --layout out to append in the dataset's layout")
    taken = {p.name for p in output.iterdir()}
    number = next(k for k in range(1, 10**6) if not any(n.startswith(f"{APPEND_PREFIX}{k:03d}-") for n in taken))
    return _Target(output, f"{APPEND_PREFIX}{number:03d}", index.layout, index, signature)


def _settle(decision, args: argparse.Namespace, target: _Target, chosen: tuple[str, ...] | None):
    """Rank 0: the decision every rank follows (the dataset's schema when appending), or a
    UserError: an unknown --heads name, no heads without --predict-only, an append that differs."""
    from hydragnn_ensemble.cli.build_checks import check_heads, no_heads_message
    from hydragnn_ensemble.cli import UserError

    if not decision.decided_from:
        return decision  # nothing built: the failures say why (see _finish)
    check_heads(decision, chosen)
    if not decision.heads.names and not args.predict_only:
        raise UserError(no_heads_message(decision, args.scale, [str(p) for p in args.inputs], decision.decided_from))
    if target.existing is None:
        return decision
    return _as_appended(decision, args, target)


def _as_appended(decision, args: argparse.Namespace, target: _Target):
    """``decision`` made the dataset's (its heads; extra heads of the new graphs left out), or a
    UserError naming the dataset and what differs."""
    from graph_builders.schema import HeadRegistry
    from graph_builders.stream_build import Decision
    from hydragnn_ensemble.cli import UserError
    from hydragnn_ensemble.cli.build_checks import build_metadata

    output = args.output
    ours = build_metadata(args, 0, 0)
    theirs = target.existing.metadata
    for key in ("scale", "cutoff", "max_neighbours"):
        if ours.get(key) != theirs.get(key):
            raise UserError(f"--append: {output} was built with {key} {theirs.get(key)}, these graphs with "
                            f"{ours.get(key)}")
    heads = HeadRegistry.from_json(target.existing.heads_json)
    for head in heads:
        if head.name not in decision.heads.names:
            raise UserError(f"--append: {output} has the head {head.name!r}; the new structures do not "
                            f"(their heads: {decision.heads.names})")
        new = decision.heads[head.name]
        if (new.level, new.dim, new.unit) != (head.level, head.dim, head.unit):
            raise UserError(f"--append: head {head.name!r} of {output} is {head.level}, dim {head.dim}, unit "
                            f"{head.unit or '-'}; in the new structures {new.level}, dim {new.dim}, unit "
                            f"{new.unit or '-'}")
    if decision.signature != target.signature:
        ours_, theirs_ = dict((i[0], i[1:]) for i in decision.signature), dict((i[0], i[1:]) for i in target.signature)
        differ = sorted(k for k in set(ours_) | set(theirs_) if ours_.get(k) != theirs_.get(k))
        raise UserError(f"--append: the new graphs' attributes differ from those of {output} in {differ} "
                        f"(theirs: {[(k, *theirs_[k]) for k in differ if k in theirs_]}, the new: "
                        f"{[(k, *ours_[k]) for k in differ if k in ours_]})")
    extra = [n for n in decision.heads.names if n not in heads.names]
    notes = list(decision.notes) + [f"head {n!r} of the new structures is not one of {output}'s heads: left out"
                                    for n in extra]
    return Decision(heads, decision.signature, decision.decided_from, notes, decision.available)


def _finish(args: argparse.Namespace, target: _Target, decision, result, num_files: int) -> int:
    """Rank 0: the errors list, the index, the dataset moved into place, the summary printed."""
    from graph_builders.batch_build import write_errors
    from graph_builders.store import describe, write_index
    from graph_builders.store._atomic import replace_path
    from hydragnn_ensemble.cli import UserError
    from hydragnn_ensemble.cli.build_checks import build_metadata, errors_path, report_failures

    output: Path = args.output
    errors = errors_path(output)
    for note in result.notes:
        print(f"note: {note}")
    if result.failures:
        write_errors(errors, result.failures)
    elif errors.exists():
        errors.unlink()  # a stale list from an earlier run of the same output
    if not result.graphs:
        raise UserError(f"no graph could be built from {num_files} files; reasons in {errors}"
                        if result.failures else f"no graph could be built from {num_files} files")
    metadata = build_metadata(args, result.files_with_graphs, len(result.failures))
    entries = list(result.entries)
    if target.existing is not None:
        old = target.existing.metadata
        metadata = {**old, "input_files": int(old.get("input_files", 0)) + result.files_with_graphs,
                    "failures": int(old.get("failures", 0)) + len(result.failures),
                    "appends": int(old.get("appends", 0)) + 1}
        entries = list(target.existing.shards) + entries
    write_index(target.root, decision.heads, target.layout, metadata, entries)
    if target.existing is None:
        replace_path(target.root, output)
    target.committed = True
    verb = "appended" if target.existing is not None else "built"
    print(f"{verb} {result.graphs} graphs from {result.files_with_graphs} of {num_files} files -> {output} "
          f"({len(result.entries)} new shards)")
    print(describe(output))
    return report_failures(result.failures, errors)


def _discard(target: _Target) -> None:
    """Rank 0, after a build that stopped before its dataset was complete: a fresh dataset's
    temporary directory removed, or the shards this append wrote (not in the index)."""
    from graph_builders.store._atomic import remove_path

    if target.committed:
        return
    if target.existing is None:
        remove_path(target.root)
        return
    for path in target.root.glob(f"{target.prefix}-*"):
        remove_path(path)
