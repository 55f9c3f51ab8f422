"""`fabctl schema`: write (or check) the stack file's JSON Schema and docs/configuration.md's tables."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from rich.console import Console

from components.config import stack_file_schema
from fabctl.commands.common import EXIT_CONFIG
from fabctl.reference import with_reference
from fabctl.render import PROJECT_DIR

SCHEMA_PATH = PROJECT_DIR / "schema" / "stack.schema.json"


REFERENCE_PATH = PROJECT_DIR / "docs" / "configuration.md"


def cmd_schema(args: argparse.Namespace, console: Console, err: Console) -> int:
    """Write, or check, every file generated from the config model: the JSON Schema and the reference tables."""
    generated = {
        SCHEMA_PATH: json.dumps(stack_file_schema(), indent=2, sort_keys=True) + "\n",
        REFERENCE_PATH: with_reference(REFERENCE_PATH.read_text()),
    }
    stale = [path for path, text in generated.items() if not path.is_file() or path.read_text() != text]
    if args.check:
        for path in stale:
            err.print(f"error: {path.relative_to(PROJECT_DIR)} is out of date; run: python -m fabctl schema", markup=False)
        if not stale:
            console.print("schema and configuration reference are up to date", highlight=False)
        return EXIT_CONFIG if stale else 0
    for path in stale:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(generated[path])
        console.print(f"wrote {path.relative_to(PROJECT_DIR)}", highlight=False)
    return 0


def add_parser(sub: Any, project_dir: Path) -> None:
    schema = sub.add_parser("schema", help="write the stack file JSON Schema and the configuration reference tables")
    schema.add_argument("--check", action="store_true", help="only check that the committed schema is current")
    schema.set_defaults(func=cmd_schema)
