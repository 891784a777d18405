"""`make mutants`: mutation testing of the privacy-critical code with mutmut 3 (docs/testing.md).

mutmut copies the packages into ``mutants/``, compiles every mutant of a function into it behind a
trampoline, records once which tests call which function, then runs each mutant with only those tests,
in a process forked from one that has already imported everything. This driver adds what Veil needs
on top: a choice of files (``--paths``), a seeded sample of their mutants (``--sample``) for a quick
run on changed files (``--changed``), resumable runs (a mutant with a verdict is not run again unless
asked), and a report per package that leaves out the mutants docs/testing.md lists as equivalent.

    python tests/mutation/run.py --paths mechanisms/laplace.py
    python tests/mutation/run.py --changed --sample 40
    python tests/mutation/run.py --report-only

Run it as a script from the project root (``make mutants`` does), never as ``-m tests.mutation.run``:
the tests must be imported from the copy in mutants/, not from an already imported ``tests`` package.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

# What `make mutants` mutates by default, in the order it runs them: the noise, the budget, the release
# (sensitivity, ε split, threshold), then the passes that bound contributions and the analysis.
PACKAGES = (
    "mechanisms",
    "budget",
    "proxy/release",
    "proxy/rewrite",
    "proxy/analysis",
    "proxy/query/service.py",
    "proxy/query/planning.py",
)
EQUIVALENTS = Path("docs/testing.md")  # its table of equivalent mutants: | `name` | reason |
REPORT = Path("mutants/veil-report.md")
SUMMARY = Path("mutants/veil-report.json")
KILLED = {"killed", "timeout"}
PYTEST_SELECTION_OPTIONS = (
    "--ignore=",
    "--deselect=",
)  # allowed among --tests  # a timeout is a mutant the tests noticed (an endless loop)


def module_glob(path: str) -> str:
    """mutmut names a mutant ``<module>.x_<function>__mutmut_<n>`` (methods: ``xǁClassǁmethod``)."""
    module = path.removesuffix(".py").removesuffix("/__init__").strip("/").replace("/", ".")
    return f"{module}.*"


def package_of(mutant: str) -> str:
    """The PACKAGES entry a mutant belongs to, for the per-package score."""
    module = mutant.split(".x", 1)[0]
    for package in PACKAGES:
        prefix = package.removesuffix(".py").replace("/", ".")
        if module == prefix or module.startswith(prefix + "."):
            return package
    return "other"


def changed_paths(base: str) -> list[str]:
    """Python files of the mutated packages changed since ``base`` (committed or not)."""
    listed = subprocess.run(
        ["git", "diff", "--name-only", base, "--", *PACKAGES],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    return [path for path in listed if path.endswith(".py") and Path(path).exists()]


def equivalent_mutants() -> dict[str, str]:
    """Mutant name → why it cannot be killed, from docs/testing.md."""
    if not EQUIVALENTS.exists():
        return {}
    rows = re.findall(r"^\| `([^`]+__mutmut_\d+)` \| (.+?) \|$", EQUIVALENTS.read_text(), re.MULTILINE)
    return dict(rows)


def verdicts() -> dict[str, str]:
    """Every generated mutant's status so far ("not checked" until it has run)."""
    from mutmut.configuration import config
    from mutmut.stats import status_by_exit_code

    found = {}
    for meta in Path("mutants").rglob("*.py.meta"):
        if not config().should_mutate(str(meta.relative_to("mutants")).removesuffix(".meta")):
            continue  # generated before it was excluded (do_not_mutate)
        data = json.loads(meta.read_text())
        for name, code in data.get("exit_code_by_key", {}).items():
            found[name] = status_by_exit_code[code]
    return found


def durations() -> dict[str, float]:
    found: dict[str, float] = {}
    for meta in Path("mutants").rglob("*.py.meta"):
        found |= json.loads(meta.read_text()).get("durations_by_key", {})
    return found


def generate() -> None:
    """Copy the packages into mutants/ and write every mutant (only changed files are redone)."""
    from mutmut.__main__ import create_mutants, set_mutant_under_test
    from mutmut.utils.file_utils import copy_also_copy_files, copy_src_dir, setup_source_paths

    set_mutant_under_test("mutant_generation")
    Path("mutants").mkdir(exist_ok=True)
    copy_src_dir()
    copy_also_copy_files()
    setup_source_paths()
    create_mutants(1)
    forget_missing_paths()


def forget_missing_paths() -> None:
    """PYTHONPATH names mutants/, which on a fresh checkout did not exist when this interpreter started:
    the import system then cached that entry as a directory with nothing in it (a ``None`` finder) and
    never looks there again, so mutmut's in-process stats run could not import ``tests`` and stopped
    with "Failed to run pytest" — the first run on a new machine, never the second."""
    for entry, finder in list(sys.path_importer_cache.items()):
        if finder is None:
            del sys.path_importer_cache[entry]


def select(globs: list[str], *, rerun: str, sample: int, seed: int, per_path: bool = False) -> list[str]:
    """The mutants to run; with ``per_path`` the sample is drawn per glob (a stratified sample, so a
    small package is not left with a handful of mutants next to a large one)."""
    if per_path and len(globs) > 1:
        return sorted(name for g in globs for name in select([g], rerun=rerun, sample=sample, seed=seed))
    import fnmatch

    status = verdicts()
    chosen = sorted(name for name in status if any(fnmatch.fnmatchcase(name, g) for g in globs))
    if rerun == "none":
        chosen = [name for name in chosen if status[name] == "not checked"]
    elif rerun == "survivors":  # ran, and not killed: after adding tests
        chosen = [name for name in chosen if status[name] not in KILLED and status[name] != "not checked"]
    elif rerun == "timeouts":  # stopped by the clock: again with more --slack, to tell loops from load
        chosen = [name for name in chosen if status[name] == "timeout"]
    if sample and sample < len(chosen):
        chosen = sorted(random.Random(seed).sample(chosen, sample))
    return chosen


def report(globs: list[str], *, elapsed: float | None) -> dict[str, object]:
    """Per package: mutants, killed, survived, equivalent, score over the non-equivalent ones, and the
    CPU-bound time the mutants took. Survivors are listed with their diff in mutants/veil-report.md."""
    import fnmatch

    from mutmut.mutation.diff_apply import get_diff_for_mutant

    equivalent = equivalent_mutants()
    status = {
        name: state for name, state in verdicts().items() if any(fnmatch.fnmatchcase(name, g) for g in globs)
    }
    took = durations()
    packages: dict[str, Counter[str]] = {}
    modules: dict[str, Counter[str]] = {}
    seconds: Counter[str] = Counter()
    survivors = []
    for name, state in sorted(status.items()):
        module = name.split(".x", 1)[0]
        for group, key in ((packages, package_of(name)), (modules, module)):
            counts = group.setdefault(key, Counter())
            counts["mutants"] += 1
            seconds[key] += took.get(name, 0.0)
            if state == "not checked":
                counts["not checked"] += 1
            elif state in KILLED:
                counts["killed"] += 1
            elif name in equivalent:
                counts["equivalent"] += 1
            else:
                counts["survived"] += 1  # survived, no tests, suspicious, segfault: all count against
        if state not in KILLED and state != "not checked" and name not in equivalent:
            survivors.append((name, state))
    rows = {key: _row(counts, seconds[key]) for key, counts in packages.items()}
    files = {key: _row(counts, seconds[key]) for key, counts in modules.items()}
    summary: dict[str, object] = {"packages": rows, "modules": files, "elapsed_seconds": elapsed}
    lines = ["# Mutation report (generated by `make mutants`)", ""]
    for title, table in (("package", rows), ("module", files)):
        lines += [f"| {title} | mutants | killed | survived | equivalent | not checked | score | s |"]
        lines += ["|---|---|---|---|---|---|---|---|"]
        for key, row in sorted(table.items()):
            lines.append(
                f"| {key} | {row['mutants']} | {row.get('killed', 0)} | {row.get('survived', 0)} | "
                f"{row.get('equivalent', 0)} | {row.get('not checked', 0)} | {row['score']} | {row['seconds']} |"
            )
        lines.append("")
    lines += ["", "## Surviving mutants", ""]
    for name, state in survivors:
        try:
            diff = get_diff_for_mutant(name)
        except Exception as error:  # a stale name after a source change: say so, keep the report going
            diff = f"(no diff: {error!r})"
        lines += [f"### `{name}` ({state})", "", "```diff", diff, "```", ""]
    REPORT.write_text("\n".join(lines))
    SUMMARY.write_text(json.dumps(summary, indent=2))
    return summary


def trust_clean_tests() -> None:
    """mutmut runs every covering test once without mutants before the first mutant; the stats run has
    just run them all green, so a quick rerun of a few survivors may skip that."""
    import mutmut.__main__ as mutmut_main

    make_runner = mutmut_main.get_mutant_runner

    def trusting(*args: object, **kwargs: object) -> object:
        runner = make_runner(*args, **kwargs)  # type: ignore[arg-type]
        runner.run_clean_tests = lambda tests: 0  # type: ignore[method-assign]
        return runner

    mutmut_main.get_mutant_runner = trusting  # type: ignore[assignment]


def _row(counts: Counter[str], seconds: float) -> dict[str, object]:
    """Score: killed / (killed + survived), equivalent mutants and unchecked ones left out."""
    checked = counts["killed"] + counts["survived"]
    score = round(100 * counts["killed"] / checked, 1) if checked else None
    return {**counts, "score": score, "seconds": round(seconds)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--paths", nargs="*", default=[], help="files or packages (default: all of PACKAGES)")
    parser.add_argument("--changed", metavar="BASE", nargs="?", const="main", help="files changed since BASE")
    parser.add_argument("--sample", type=int, default=0, help="run only this many mutants, chosen at random")
    parser.add_argument("--seed", type=int, default=0, help="seed of the sample")
    parser.add_argument("--per-path", action="store_true", help="draw --sample mutants from each path")
    parser.add_argument(
        "--tests",
        nargs="*",
        default=[],
        help="run these tests instead of pyproject's selection (e.g. only those of the mutated package); "
        "pytest's --ignore=PATH and --deselect=ID may be among them",
    )
    parser.add_argument("--names", nargs="*", default=[], help="exactly these mutants (mutmut's names)")
    parser.add_argument(
        "--rerun",
        choices=("none", "survivors", "timeouts", "all"),
        default="none",
        help="also run mutants that already have a verdict: the survivors (after adding tests), the timeouts "
        "(with more --slack), or all",
    )
    parser.add_argument(
        "--slack",
        type=float,
        help="seconds added to each mutant's expected test time before its limit (timeout_constant); mutmut "
        "also stops a mutant after half its CPU limit of *wall* time, so on a loaded machine raise it",
    )
    parser.add_argument("--report-only", action="store_true", help="write the report, run nothing")
    parser.add_argument(
        "--trust-clean",
        action="store_true",
        help="skip mutmut's run of the covering tests without mutants (minutes); only after a green stats run",
    )
    args, extra = parser.parse_known_args(argv)
    # argparse takes `--ignore=…`/`--deselect=…` for options of its own: they belong to --tests
    passed_on = [option for option in extra if option.startswith(PYTEST_SELECTION_OPTIONS)]
    if passed_on != extra or (passed_on and not args.tests):
        parser.error(
            f"unrecognized arguments: {' '.join(extra)} (pytest's --ignore/--deselect go after --tests)"
        )
    args.tests += passed_on
    paths = args.paths or (changed_paths(args.changed) if args.changed else list(PACKAGES))
    if not paths:
        print("no changed files in the mutated packages")
        return 0
    globs = [module_glob(path) for path in paths]
    started = time.monotonic()
    from mutmut.configuration import config

    # a stats run that fails on one slow server start is lost (docs/testing.md): wait longer than make test
    os.environ.setdefault("VEIL_TEST_SERVER_START_TIMEOUT", "120")
    if os.environ.get("MUTANTS_DEBUG"):
        config().debug = True
    if args.tests:  # a changed selection makes mutmut record coverage again (its fingerprint)
        config().pytest_add_cli_args_test_selection = args.tests
    if args.slack is not None:  # a changed timeout makes mutmut forget every timeout (its fingerprint)
        config().timeout_constant = args.slack
    if not args.report_only:
        generate()
        names = args.names or select(
            globs, rerun=args.rerun, sample=args.sample, seed=args.seed, per_path=args.per_path
        )
        print(f"{len(names)} mutants to run in {', '.join(paths)}", flush=True)
        if names:
            from mutmut.__main__ import _run

            if args.trust_clean:
                trust_clean_tests()

            _run(names, max_children=int(os.environ.get("MUTANTS_CHILDREN", "1")))
    summary = report(globs, elapsed=None if args.report_only else round(time.monotonic() - started))
    print(json.dumps(summary, indent=2))
    print(f"report: {REPORT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
