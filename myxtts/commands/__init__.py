"""The ``myxtts`` command line: argument parsing and console output, one module per command.

Each module defines ``add_parser(subparsers)``, which registers the command and sets ``func``
(called with the parsed namespace, returning the exit code). Library modules never import from
this package: everything here only parses, calls the library, and prints.
"""
