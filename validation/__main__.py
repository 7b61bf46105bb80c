"""``python -m validation SUBCOMMAND ...``

Each subcommand lives in its own module, imported only when that subcommand runs (so ``gpu``
works without z3, ``verify`` without pycuda, ...). To add one, write in its module

    def add_arguments(parser): ...      # argparse arguments of the subcommand
    def cli_main(args) -> int: ...      # the exit status; raise sim.errors.WorkbenchError on bad input

and list it in ``SUBCOMMANDS`` below. Errors exit with status 2 and one line ``file:line: message``
on stderr; ``--debug`` shows the traceback instead.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from sim.errors import ArgParser

#: name -> (module, one-line help). The module provides add_arguments(parser) and cli_main(args).
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "gpu": ("validation.gpu", "run the same PTX on the real GPU via pycuda (time + numpy check)"),
    "verify": ("validation.formal", "Z3: bounds, barriers, races, async copies, termination"),
    "compare": ("validation.compare", "predicted vs simulated (+ measured), gap traced to stalls by PTX line"),
    "calibrate": ("validation.calibrate", "H200 microbenchmarks: measured (committed or --gpu) vs simulated"),
    "sweep": ("validation.sweep", "hardware parameters x GEMM shapes x variants: predictions, simulations, plots"),
    "analyze": ("validation.analyze", "stage cycles and register pressure of a --profile kernel, predicted vs run"),
    "probe": ("validation.probe", "describe the live GPU through the driver and write its hardware YAML"),
}


def _load(name: str):
    return importlib.import_module(SUBCOMMANDS[name][0])


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The top-level parser. Only the chosen subcommand's module is imported to add its arguments."""
    common = ArgParser(add_help=False)
    common.add_argument("--debug", action="store_true", help="show tracebacks")
    parser = ArgParser(prog="python -m validation", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    argv = sys.argv[1:] if argv is None else argv
    chosen = next((a for a in argv if not a.startswith("-")), None)
    for name, (_module, help_text) in SUBCOMMANDS.items():
        p = sub.add_parser(name, help=help_text, parents=[common], description=help_text)
        if name == chosen:
            _load(name).add_arguments(p)
    return parser


def main(argv: list[str] | None = None) -> int:
    from sim.errors import run_cli

    return run_cli(_run, argv)


def _run(argv: list[str]) -> int:
    args = build_parser(argv).parse_args(argv)
    return int(_load(args.command).cli_main(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
