"""The ``safemanip`` command: one entry point, one module per subcommand."""

from __future__ import annotations

import argparse


def add_verb(sub: argparse._SubParsersAction[argparse.ArgumentParser], command: str, command_help: str, verb: str, verb_help: str,
             doc: str | None) -> argparse.ArgumentParser:
    """A ``safemanip COMMAND VERB`` parser (``config init``, ``ontology show``):
    the command with its required verb, and the verb's parser, described by
    the first paragraph of ``doc`` (the module docstring) after its first
    ``': '``."""
    p = sub.add_parser(command, help=command_help)
    verbs = p.add_subparsers(dest='verb', metavar='VERB')
    verbs.required = True
    return verbs.add_parser(verb, help=verb_help, description=doc.split('\n\n')[0].split(': ', 1)[1] if doc else None)

__all__ = ['add_verb']
