"""Z3 formal checks of a PTX kernel: bounds, barrier divergence, shared races, async copies,
termination, the wgmma and mbarrier disciplines. ``python -m validation verify KERNEL.ptx``; see
docs/verify.md."""

from validation.formal.cli import add_arguments, cli_main, verify_text

__all__ = ["add_arguments", "cli_main", "verify_text"]
