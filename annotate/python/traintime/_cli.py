"""The `traintime` command (installed by the wheel: pip install <traintime checkout>).

    traintime run [options] -- COMMAND...   COMMAND with traintime preloaded, then the job's summary
    traintime doctor [--json] [--out DIR]   can this machine be profiled, and what to do if not
    traintime report DIR [...]              traintime-report (the same program and options)

`traintime run` takes each setting of the library's config table as an option
(TRAINTIME_LOG_LEVEL=debug is --log-level debug; --out is TRAINTIME_OUTPUT), and passes the
variables on to every rank of python, torchrun, accelerate, deepspeed, mpirun/mpiexec (Open MPI,
MPICH) and srun.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Dict, List, Optional, Sequence

from . import _doctor, _paths, _run

USAGE_ERROR = 2


def _version() -> str:
    try:
        from importlib.metadata import version
        return version("traintime")
    except Exception:  # noqa: BLE001 - not installed as a distribution (PYTHONPATH)
        return "unknown (not installed with pip)"


def _setting_option(name: str) -> str:
    return "--" + name[len("TRAINTIME_"):].lower().replace("_", "-")


def _run_parser(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> argparse.ArgumentParser:
    p = sub.add_parser("run", help="run COMMAND with traintime preloaded, then print the job's summary",
                       description="Run COMMAND (python, torchrun, accelerate launch, deepspeed, mpirun, mpiexec, "
                                   "srun, ...) with libtraintime.so added to LD_PRELOAD in every rank; print the "
                                   "report's summary and where the HTML report is when it ends; exit as COMMAND "
                                   "did. Exit status 125: COMMAND could not be started (no library, --out not "
                                   "writable), 126 not executable, 127 not found.",
                       usage="traintime run [options] -- COMMAND [ARG...]")
    p.add_argument("--out", "--output", dest="out", metavar="DIR",
                   help="folder the rank files go to (TRAINTIME_OUTPUT; default: $TRAINTIME_OUTPUT, else "
                        "traintime-out/ here)")
    p.add_argument("--no-summary", action="store_true", help="print no summary when COMMAND ends")
    settings = p.add_argument_group("settings (each sets the TRAINTIME_* variable of the same name; the "
                                    "library's config table)")
    for row in _paths.config_table():
        if row["name"] == "TRAINTIME_OUTPUT":
            continue
        settings.add_argument(_setting_option(row["name"]), dest="setting:" + row["name"], metavar="VALUE",
                              help=f"{row['name']} (default {row['default'] or 'empty'}): {row['doc']}")
    p.add_argument("command", nargs=argparse.REMAINDER, help="the command to run, after --")
    return p


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="traintime", description=__doc__.splitlines()[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog="\n".join(__doc__.splitlines()[2:6]))
    parser.add_argument("--version", action="version", version=f"traintime {_version()}")
    sub = parser.add_subparsers(dest="verb", metavar="{run,doctor,report}")
    _run_parser(sub)
    d = sub.add_parser("doctor", help="check that this machine can be profiled",
                       description="One line per check, each with what to do when it fails. Exit status 0: what "
                                   "is present can be profiled; 1: something would stop profiling; 2: bad usage.")
    d.add_argument("--json", action="store_true", help="print the checks as JSON")
    d.add_argument("--out", metavar="DIR", help="the output folder to check (default: $TRAINTIME_OUTPUT, else "
                                                "traintime-out/ here)")
    sub.add_parser("report", help="traintime-report: the job's rank files merged (traintime report --help)",
                   add_help=False)
    return parser


def report_main(argv: Optional[Sequence[str]] = None) -> int:
    """traintime-report, the program the wheel ships (same arguments, same exit status)."""
    args = list(sys.argv[1:] if argv is None else argv)
    program = _paths.report_program()
    if program is None:
        print("traintime: this install has no traintime-report (the pure-Python package of annotate/python); "
              "install the wheel built from a traintime checkout", file=sys.stderr)
        return _run.CANNOT_START
    sys.stdout.flush()
    os.execv(str(program), [str(program)] + args)
    return _run.CANNOT_START  # not reached


def main(argv: Optional[Sequence[str]] = None) -> int:
    args_in = list(sys.argv[1:] if argv is None else argv)
    if args_in and args_in[0] == "report":
        return report_main(args_in[1:])
    parser = build_parser()
    args = parser.parse_args(args_in)
    if args.verb is None:
        parser.print_help(sys.stderr)
        return USAGE_ERROR
    if args.verb == "doctor":
        return _doctor.doctor(args.out, args.json)
    command: List[str] = list(args.command)
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        parser.error("run: give the command to run after --, e.g. traintime run -- python train.py")
    settings: Dict[str, str] = {key.split(":", 1)[1]: value for key, value in vars(args).items()
                                if key.startswith("setting:") and value is not None}
    return _run.run(command, args.out, settings, not args.no_summary)


if __name__ == "__main__":
    sys.exit(main())
