"""The example that ends each `sfbt` command's --help, as eu-stack's and
py-spy's help ends with one."""

import argparse


def with_example(command: str, what: str) -> dict:
    """add_parser / ArgumentParser keywords for a --help that ends with
    ``command`` (a command line) and what it does."""
    return {"epilog": f"example: {what}\n  {command}",
            "formatter_class": argparse.RawDescriptionHelpFormatter}
